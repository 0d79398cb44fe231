"""The token guard in front of an app that has no token of its own (VS Code's code-server).

Runs inside the session's container, with the image's python3 (standard library only, Python 3.8
and later): interactive/kinds.py embeds this file's text in the session's command. Usage:

    python3 -c "<this file>" SOCKET -- COMMAND...

It listens on a free TCP port of every address of the node, prints the port line the portal
reads (interactive/kinds.py, PORT_LINE), starts COMMAND (which must listen on the Unix socket
SOCKET, in a directory only the job's user can enter) and relays each TCP connection to it
whose first request carries `Authorization: token <JUPYTER_TOKEN>`: the header the portal's
proxy adds to everything it forwards (interactive/proxy.py). Any other connection is answered
403 and closed, so nobody else on the node's network reaches the app. A connection is judged
by its first request; later requests on it come from the same client (the proxy). The guard
ends when COMMAND does, with its exit status.
"""

import asyncio
import hmac
import os
import signal
import socket
import subprocess
import sys

PORT_LINE = "[gpupool] session port "
HEAD_MAX_BYTES = 64 * 1024
HEAD_SECONDS = 30
CHUNK_BYTES = 64 * 1024
FORBIDDEN = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
UNAVAILABLE = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def carries_token(head: bytes, expected: bytes) -> bool:
    """Whether the request head has an Authorization header equal to `expected`."""
    found = False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"authorization":
            found = hmac.compare_digest(value.strip(), expected) if not found else False
    return found


async def pipe(reader, writer):
    try:
        while True:
            chunk = await reader.read(CHUNK_BYTES)
            if not chunk:
                break
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


async def handle(reader, writer, socket_path, expected):
    upstream = None
    try:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_SECONDS)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return
        if not carries_token(head, expected):
            writer.write(FORBIDDEN)
            await writer.drain()
            return
        try:
            up_reader, upstream = await asyncio.open_unix_connection(socket_path, limit=HEAD_MAX_BYTES)
        except OSError:
            writer.write(UNAVAILABLE)  # the app is not listening yet: the portal's probe asks again
            await writer.drain()
            return
        upstream.write(head)
        await asyncio.gather(pipe(reader, upstream), pipe(up_reader, writer))
    except (ConnectionError, OSError):
        pass
    finally:
        for side in (writer, upstream):
            if side is not None:
                side.close()


async def serve(listener, socket_path, expected, child):
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, socket_path, expected), sock=listener, limit=HEAD_MAX_BYTES
    )
    async with server:
        while child.poll() is None:
            await asyncio.sleep(0.5)
    return child.returncode


def main(argv):
    if len(argv) < 4 or argv[2] != "--":
        sys.exit("usage: session_guard SOCKET -- COMMAND...")
    socket_path, command = argv[1], argv[3:]
    token = os.environ.get("JUPYTER_TOKEN", "")
    if not token:
        sys.exit("session_guard: no JUPYTER_TOKEN in the environment")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("", 0))
    listener.listen(128)
    print(PORT_LINE + str(listener.getsockname()[1]), flush=True)
    child = subprocess.Popen(command)
    # Slurm's cancel signals the step: the app hears it too, and the guard waits for it to end.
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    sys.exit(asyncio.run(serve(listener, socket_path, ("token " + token).encode(), child)))


if __name__ == "__main__":
    main(sys.argv)
