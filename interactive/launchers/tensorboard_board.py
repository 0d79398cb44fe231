"""TensorBoard for a session, behind the session's token.

Runs inside the session's container with the image's python3 and its TensorBoard:
interactive/kinds.py embeds this file's text in the session's command. TensorBoard has no
password of its own, so it is served through its documented `server_class` hook by a server
that answers 403 to any request without `Authorization: token <JUPYTER_TOKEN>` (the header the
portal's proxy adds, interactive/proxy.py): it listens on every address of the node, and the
token keeps everyone else out. The runs are GPUPOOL_BOARD_LOGDIRS, TensorBoard's own
`name:path,name:path` list, written by the portal (interactive/boards.py) from the job's or the
sweep's directories, which the job script mounts read-only (GPUPOOL_READ_ONLY_DIRS).
"""

import hmac
import os
import sys

from tensorboard import program
from werkzeug.serving import make_server

PORT_LINE = "[gpupool] session port "


def guarded(app, expected):
    def application(environ, start_response):
        if not hmac.compare_digest(environ.get("HTTP_AUTHORIZATION", "").encode(), expected):
            start_response("403 Forbidden", [("Content-Type", "text/plain"), ("Content-Length", "0")])
            return [b""]
        return app(environ, start_response)

    return application


def server_class(expected):
    class GuardedServer(program.TensorBoardServer):
        def __init__(self, wsgi_app, flags):
            self._server = make_server("0.0.0.0", 0, guarded(wsgi_app, expected), threaded=True)
            print(PORT_LINE + str(self._server.server_port), flush=True)

        def serve_forever(self):
            self._server.serve_forever()

        def get_url(self):
            return f"http://0.0.0.0:{self._server.server_port}/"

    return GuardedServer


def main():
    token = os.environ.get("JUPYTER_TOKEN", "")
    logdirs = os.environ.get("GPUPOOL_BOARD_LOGDIRS", "")
    if not token or not logdirs:
        sys.exit("tensorboard_board: JUPYTER_TOKEN and GPUPOOL_BOARD_LOGDIRS must be set")
    board = program.TensorBoard(server_class=server_class(("token " + token).encode()))
    board.configure(argv=[None, "--logdir_spec", logdirs, "--reload_interval", "15"])
    sys.exit(board.main())


if __name__ == "__main__":
    main()
