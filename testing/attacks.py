"""What a hostile or careless client does to a web process, over raw sockets, and the process's
memory meanwhile: for the flow-control tests (gpupool/tests/test_flow_control.py) and their
benchmark (bench/flow_control.py). Each client is plain HTTP/1.1 on 127.0.0.1."""

from __future__ import annotations

import select
import socket
import time
from contextlib import contextmanager

PIECE = 1024 * 1024


def rss_mb(pid: int) -> float:
    """The process's resident memory, MB (VmRSS of /proc/<pid>/status)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def peak_rss_mb(pid: int, seconds: float, every: float = 0.2) -> float:
    """The highest resident memory seen over `seconds`."""
    peak, deadline = 0.0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, rss_mb(pid))
        time.sleep(every)
    return max(peak, rss_mb(pid))


def _request(method: str, path: str, host: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@contextmanager
def stalled_readers(port: int, path: str, *, host: str, headers: dict[str, str] | None = None, count: int = 1):
    """`count` clients that send a GET, read the first bytes of the answer (its status line) and
    then nothing more, with a receive buffer as small as the kernel allows. Yields the status
    lines; the connections close on exit."""
    sockets, firsts = [], []
    try:
        for _ in range(count):
            client = socket.socket()
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            client.connect(("127.0.0.1", port))
            client.settimeout(30)
            client.sendall(_request("GET", path, host, headers or {}))
            firsts.append(client.recv(64).split(b"\r\n", 1)[0].decode("latin-1"))
            sockets.append(client)
        yield firsts
    finally:
        for client in sockets:
            client.close()


def post_body(port: int, path: str, *, host: str, size: int, chunked: bool = False, headers=None) -> tuple[int, int]:
    """POST `size` bytes (declared in Content-Length, or chunked without one), a MiB at a time,
    until the server answers, stops reading or closes. Returns (the answer's status, 0 if none;
    the bytes sent)."""
    head = {"Content-Type": "application/json", **(headers or {})}
    head["Transfer-Encoding" if chunked else "Content-Length"] = "chunked" if chunked else str(size)
    client = socket.create_connection(("127.0.0.1", port), timeout=10)
    sent = 0
    try:
        client.sendall(_request("POST", path, host, head))
        piece = b"0" * PIECE
        while sent < size:
            if select.select([client], [], [], 0)[0]:
                break  # the server has answered (or closed) before the whole body
            framed = f"{PIECE:x}\r\n".encode() + piece + b"\r\n" if chunked else piece
            try:
                client.sendall(framed)
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                break  # the server stopped reading: its answer, if any, is waiting
            sent += PIECE
        else:
            if chunked:
                client.sendall(b"0\r\n\r\n")
        try:
            answer = client.recv(256)
        except (ConnectionResetError, TimeoutError):
            answer = b""
    finally:
        client.close()
    parts = answer.split(b" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return status, sent


def large_dataset_file(user, size: int, name: str = "big") -> str:
    """A ready dataset of `user` holding one file of `size` bytes; returns its download path."""
    import io

    # Here, not at the top: the raw clients above need no Django.
    from datasets import actions
    from datasets.models import VersionState

    # (As above: Django's, here.)
    from datasets.tasks import verify_version

    version = actions.open_version(actions.create_dataset(user, name=name), user)
    upload = actions.create_upload(version, user, path="weights.bin", length=size)
    offset = 0
    while offset < size:
        piece = min(8 * PIECE, size - offset)
        offset = actions.receive_chunk(upload, user, offset=offset, stream=io.BytesIO(b"w" * piece))
    actions.commit_version(version, user)
    verify_version(version.pk)
    version.refresh_from_db()
    if version.state != VersionState.READY:
        raise RuntimeError(f"the dataset did not become ready: {version.error}")
    return f"/api/v1/datasets/{version.dataset_id}/versions/{version.number}/files/weights.bin"
