"""The apps a session can run, and the command that starts each in the job's container.

The command is the portal's own text (a user never writes any of it): it runs in the job's
directory inside the image (jobs/submission/batch_script.py), keeps Jupyter's state there, takes
a free port, says which on its first output line (read by interactive/actions/starting.py) and starts
the server on it with the token the portal put in the job's environment (JUPYTER_TOKEN: the
variable jupyter_server reads). The server listens on every address of the node: the portal's
proxy reaches it there, and the token keeps everyone else out.

VS Code (code-server) is not offered: its package is an npm build needing Node.js in the image,
which neither NVIDIA's images nor the dev cluster's stand-ins carry.
"""

from __future__ import annotations

from dataclasses import dataclass

PORT_LINE = "[gpupool] session port "


@dataclass(frozen=True)
class Kind:
    code: str
    title: str
    command: str
    # Where the browser lands, and what the portal asks to learn that the server is up.
    landing_path: str
    status_path: str


_FREE_PORT = "python3 -c 'import socket; s = socket.socket(); s.bind((\"\", 0)); print(s.getsockname()[1])'"

JUPYTERLAB = Kind(
    code="jupyterlab",
    title="JupyterLab",
    command=(
        'export JUPYTER_CONFIG_DIR="$PWD/.jupyter/config" JUPYTER_DATA_DIR="$PWD/.jupyter/data"'
        ' JUPYTER_RUNTIME_DIR="$PWD/.jupyter/runtime" IPYTHONDIR="$PWD/.jupyter/ipython"'
        ' HOME="${HOME:-$PWD}"; '
        f"port=$({_FREE_PORT}); "
        f"printf '{PORT_LINE}%s\\n' \"$port\"; "
        'exec python3 -m jupyterlab --no-browser --ip=0.0.0.0 --port="$port" --port-retries=0'
        ' --ServerApp.allow_remote_access=True --ServerApp.root_dir="$PWD" --ServerApp.password=""'
        " --ServerApp.terminals_enabled=True"
    ),
    landing_path="/lab",
    status_path="/api/status",
)

KINDS = {kind.code: kind for kind in (JUPYTERLAB,)}


def kind_for(code) -> Kind | None:
    return KINDS.get(code) if isinstance(code, str) else None
