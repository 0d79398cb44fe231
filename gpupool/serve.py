"""One web process: `python -m gpupool.serve --port 8101 [--host 127.0.0.1]`.

Uvicorn serves gpupool.asgi:application (HTTP and WebSocket) with flow control both ways, which
Daphne (Twisted) had neither of:
- A response body is written only as fast as the client takes it: each `send` of a body piece
  waits while the socket's write buffer is over its high-water mark (64 KiB), so a client that
  stops reading holds at most that and one piece (the session proxy's and a dataset file's
  pieces are at most 1 MiB), and the source (a notebook, a file) is read no faster.
- A request body is read from the socket only as fast as the application takes it (64 KiB
  ahead at most); gpupool/body_limit.py refuses one over the limit before it is read.
- A WebSocket's next message is read once the application took the last one.
Connections beyond WEB_MAX_CONNECTIONS are answered 503 at once (pages and sockets reconnect).

Every command that runs a web process (scripts/dev.sh, deploy/local-production.sh, the systemd
unit, testing/servers.py) runs this one, so they all serve alike.
"""

from __future__ import annotations

import argparse
import os


def config(host: str, port: int):
    # Imported here: loading the application sets Django up, which `--help` need not wait for.
    import uvicorn

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")
    from django.conf import settings

    # The application after DJANGO_SETTINGS_MODULE is set (it sets Django up).
    from gpupool.asgi import application

    return uvicorn.Config(
        application,
        host=host,
        port=port,
        http="httptools",
        loop="uvloop",
        ws="websockets-sansio",
        # Channels' applications have no lifespan protocol.
        lifespan="off",
        # X-Forwarded-* are read by Django (TRUSTED_PROXY_COUNT, SECURE_PROXY_SSL_HEADER), once.
        proxy_headers=False,
        server_header=False,
        # Pings keep sockets through nginx's 300 s read timeout and find dead peers.
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        # A kernel's messages (interactive/proxy.py) are the largest a browser sends.
        ws_max_size=settings.SESSION_WEBSOCKET_MAX_BYTES,
        # Compression costs a zlib context per socket; job updates are a few hundred bytes.
        ws_per_message_deflate=False,
        limit_concurrency=settings.WEB_MAX_CONNECTIONS,
        timeout_keep_alive=settings.WEB_KEEPALIVE_SECONDS,
        timeout_graceful_shutdown=10,
        access_log=settings.WEB_ACCESS_LOG,
    )


def main(argv: list[str] | None = None) -> None:
    # As in config(): nothing heavy before the arguments are read.
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default=os.environ.get("WEB_BIND", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    arguments = parser.parse_args(argv)
    uvicorn.Server(config(arguments.host, arguments.port)).run()


if __name__ == "__main__":
    main()
