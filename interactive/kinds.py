"""The apps a session can run, and the command that starts each in the job's container.

The command is the portal's own text (a user never writes any of it): it runs in the job's
directory inside the image (jobs/submission/batch_script.py), keeps the app's state there, takes
a free port, says which on an output line (read by interactive/actions/starting.py) and serves
on it behind the token the portal put in the job's environment (JUPYTER_TOKEN: the variable
jupyter_server reads). The server listens on every address of the node: the portal's proxy
reaches it there, adding `Authorization: token <token>`, and the token keeps everyone else out.
JupyterLab checks the token itself; VS Code (code-server) listens on a Unix socket in a private
directory behind a guard that checks it (interactive/launchers/session_guard.py); TensorBoard is
served by a launcher that checks it (interactive/launchers/tensorboard_board.py). The launchers'
text travels in the command, base64, and runs with the image's python3.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

PORT_LINE = "[gpupool] session port "


@dataclass(frozen=True)
class Kind:
    code: str
    title: str
    command: str
    # Where the browser lands, and what the portal asks to learn that the server is up.
    landing_path: str
    status_path: str
    # What the start button and the list say ("notebook", "editor", "board").
    noun: str = "session"
    # A board reads other jobs' files: a TensorBoard session names the job or sweep it shows.
    needs_board: bool = False


def _launcher(name: str) -> str:
    """`python3 -c <the launcher's text>`, the text decoded in the job from base64 (one word)."""
    text = (Path(__file__).parent / "launchers" / name).read_text()
    encoded = base64.b64encode(text.encode()).decode()
    return f'python3 -c "$(printf %s {encoded} | base64 -d)"'


# A home the image lacks (the user's own is not mounted into the container) is the job's directory.
_HOME_OR_HERE = '[ -d "${HOME:-}" ] && [ -w "${HOME:-}" ] || export HOME="$PWD"; '

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
    noun="notebook",
)

# code-server keeps its settings and extensions in the job's directory and opens that folder; its
# socket is in a directory of mktemp's (mode 700: only the job's user enters it), its own password
# is off (the guard holds the token), and it asks nothing of the internet.
VSCODE = Kind(
    code="vscode",
    title="VS Code",
    command=(
        f"{_HOME_OR_HERE}"
        'export XDG_CONFIG_HOME="$PWD/.vscode-server/config" XDG_DATA_HOME="$PWD/.vscode-server/share"; '
        # No core files in the job's directory: Node.js dumps one when Slurm's cancel meets it mid-write.
        'ulimit -c 0; gpupool_socket_dir="$(mktemp -d)"; '
        f'exec {_launcher("session_guard.py")} "$gpupool_socket_dir/code-server.sock" --'
        ' code-server --socket "$gpupool_socket_dir/code-server.sock" --socket-mode 600 --auth none'
        " --disable-telemetry --disable-update-check --disable-workspace-trust --disable-getting-started-override"
        ' --user-data-dir "$PWD/.vscode-server/data" --extensions-dir "$PWD/.vscode-server/extensions" "$PWD"'
    ),
    landing_path="/",
    status_path="/healthz",
    noun="editor",
)

# TensorBoard over the runs GPUPOOL_BOARD_LOGDIRS names (interactive/boards.py), read-only.
TENSORBOARD = Kind(
    code="tensorboard",
    title="TensorBoard",
    command=f"{_HOME_OR_HERE}exec {_launcher('tensorboard_board.py')}",
    landing_path="/",
    status_path="/data/environment",
    noun="board",
    needs_board=True,
)

KINDS = {kind.code: kind for kind in (JUPYTERLAB, VSCODE, TENSORBOARD)}


def kind_for(code) -> Kind | None:
    return KINDS.get(code) if isinstance(code, str) else None
