"""A file's response holds a block at a time: under ASGI its body is an async iterator (Django
would read a sync one whole first), and no more than the size it had when opened is sent."""

import os

from asgiref.sync import async_to_sync
from django.test import AsyncRequestFactory, RequestFactory

from foundation import file_streams


def _open(tmp_path, data: bytes) -> int:
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY)


def test_under_asgi_the_body_is_read_a_block_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(file_streams, "BLOCK", 4)
    response = file_streams.file_response(
        AsyncRequestFactory().get("/"), _open(tmp_path, b"0123456789"), 10, filename="m.pt"
    )
    assert response.is_async
    assert response["Content-Length"] == "10" and response["Content-Disposition"] == "attachment; filename*=UTF-8''m.pt"

    async def read():
        return [block async for block in response.streaming_content]

    assert async_to_sync(read)() == [b"0123", b"4567", b"89"]


def test_a_file_that_grows_is_sent_as_it_was_and_a_name_is_quoted(tmp_path):
    fd = _open(tmp_path, b"abc")
    response = file_streams.file_response(RequestFactory().get("/"), fd, 3, filename="a b;.png", inline=True)
    os.write(os.open(tmp_path / "checkpoint.pt", os.O_WRONLY | os.O_APPEND), b"more written later")
    assert not response.is_async
    assert b"".join(response.streaming_content) == b"abc"
    assert response["Content-Disposition"] == "inline; filename*=UTF-8''a%20b%3B.png"
