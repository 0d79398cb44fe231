"""What its owner does in a session, as the session proxy sees it pass (interactive/proxy.py): the
use the idle culling (interactive/actions/culling.py) counts for apps whose server has no kernels
to ask (VS Code, TensorBoard), and for every app a page opened.

- A navigation (a page of the session opened or reloaded: the browser's `Sec-Fetch-Mode: navigate`)
  is use.
- VS Code's workbench speaks its remote protocol over a WebSocket: binary messages with a 13-byte
  header (type, id, ack, length). A Regular message (type 1) from the browser is a request the
  workbench makes because its user did something: a keystroke in an editor or a terminal, a file
  opened or saved. KeepAlive (9), Ack (3) and the other control messages are the protocol's own:
  a tab left open sends them for ever, so they are not use. Seen in Chromium against code-server
  4.139: a workbench left alone for 80 s sent no Regular message; typing in its terminal, 648.

Each is noted on the session's row (`browser_input_at`), by a conditional UPDATE that never moves
the moment back, at most once every NOTE_SECONDS per socket (interactive/terminal_activity.py).
"""

from __future__ import annotations

from django.utils import timezone

from interactive.terminal_activity import SocketWatch, note_moment

VSCODE_HEADER_BYTES = 13
VSCODE_REGULAR = 1
FIELD = "browser_input_at"


def is_navigation(headers) -> bool:
    """Whether a request's headers (ASGI: lower-case bytes pairs) say a page is being opened."""
    return any(key == b"sec-fetch-mode" and value.strip().lower() == b"navigate" for key, value in headers)


async def note_navigation(session_id: int) -> None:
    await note_moment(session_id, FIELD, timezone.now())


def is_vscode_request(data) -> bool:
    """Whether a message the browser sent on a VS Code socket is a Regular one (its user acting)."""
    return isinstance(data, bytes | bytearray) and len(data) >= VSCODE_HEADER_BYTES and data[0] == VSCODE_REGULAR


class VsCodeWatch(SocketWatch):
    """A VS Code socket: the workbench's requests from the browser, never its heartbeat."""

    def field_for(self, data, from_browser: bool) -> str | None:
        return FIELD if from_browser and is_vscode_request(data) else None
