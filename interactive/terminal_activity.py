"""What a JupyterLab terminal does, as the session proxy sees it pass (interactive/proxy.py).

A terminal speaks terminado's protocol over its WebSocket (`/terminals/websocket/<name>`): JSON
arrays, `["stdin", text]` from the browser and `["stdout", text]` from the shell. The proxy notes
the moment of each on the session's row, at most once every NOTE_SECONDS per direction, and the
idle culling (interactive/actions/culling.py) applies a terminal's own rule: a keystroke is use;
output alone (a `watch nvidia-smi`, a training loop's progress printed in a terminal) keeps the
session only while its GPUs move. The server is never asked: its word would be the user's.
"""

from __future__ import annotations

import re
import time
from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from foundation.async_db import PROXY_DB
from interactive.models import InteractiveSession

NOTE_SECONDS = 15.0
_TERMINAL_SOCKET = re.compile(r"^/terminals/websocket/[\w.-]{1,64}/?$")
_FIELDS = {"stdin": "terminal_input_at", "stdout": "terminal_output_at"}


def is_terminal_socket(path: str) -> bool:
    return bool(_TERMINAL_SOCKET.match(path))


def kind_of(data: str | bytes | None) -> str | None:
    """ "stdin" or "stdout" for a terminado message that carries keystrokes or output, else None."""
    if not isinstance(data, str):
        return None
    head = data[:12].replace(" ", "")
    for kind in _FIELDS:
        if head.startswith(f'["{kind}"'):
            return kind
    return None


@PROXY_DB
def note_moment(session_id: int, field: str, at: datetime) -> None:
    """`field` of the session's row set to `at`, conditionally: a slower writer never moves the
    moment back. Also what interactive/browser_activity.py writes."""
    InteractiveSession.objects.filter(
        Q(**{f"{field}__isnull": True}) | Q(**{f"{field}__lt": at}), pk=session_id
    ).update(**{field: at})


class SocketWatch:
    """One socket's notes for the idle culling: `seen(message, from_browser)` for every message
    either way; returns the note to await (None when nothing is due), so the bridge awaits a
    database write at most every NOTE_SECONDS per field."""

    def __init__(self, session_id: int):
        self.session_id = session_id
        self._last: dict[str, float] = {}

    def seen(self, data, from_browser: bool):
        field = self.field_for(data, from_browser)
        if field is None:
            return None
        now = time.monotonic()
        if now - self._last.get(field, -NOTE_SECONDS) < NOTE_SECONDS:
            return None
        self._last[field] = now
        return note_moment(self.session_id, field, timezone.now())

    def field_for(self, data, from_browser: bool) -> str | None:
        raise NotImplementedError


class TerminalWatch(SocketWatch):
    """A terminal's keystrokes and output."""

    def field_for(self, data, from_browser: bool) -> str | None:
        # terminado says which way a message goes in the message itself.
        kind = kind_of(data)
        return _FIELDS[kind] if kind is not None else None
