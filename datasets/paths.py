"""The one check of a file's path inside a dataset version. Paths come from users (the
browser's folder picker, the CLI's walk, a hand-made request), so they are hostile: this is
pure and strict, and storage only ever joins a path that passed it."""

from __future__ import annotations

import unicodedata

MAX_PATH_BYTES = 1024
# Linux's NAME_MAX: a longer component could not be created on the nodes' filesystems.
MAX_COMPONENT_BYTES = 255
MAX_DEPTH = 32


class PathError(ValueError):
    """Why a path is refused, in words for the user."""


def clean_relative_path(raw) -> str:
    """The path, NFC-normalised, or PathError. Refused: anything not a string, empty, over
    MAX_PATH_BYTES in UTF-8, absolute, with a backslash, NUL or another control character,
    with an empty, `.` or `..` component, deeper than MAX_DEPTH or with a component over
    MAX_COMPONENT_BYTES."""
    if not isinstance(raw, str):
        raise PathError("A path must be a string.")
    path = unicodedata.normalize("NFC", raw)
    if not path:
        raise PathError("A path is required.")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise PathError(f"A path may be at most {MAX_PATH_BYTES} bytes long.")
    if any(ord(char) < 32 or ord(char) == 127 for char in path):
        raise PathError("A path may not contain NUL or other control characters.")
    if "\\" in path:
        raise PathError("Separate folders with / (a backslash is not allowed).")
    if path.startswith("/"):
        raise PathError("A path is relative to the dataset: it may not start with /.")
    parts = path.split("/")
    if len(parts) > MAX_DEPTH:
        raise PathError(f"A path may be at most {MAX_DEPTH} folders deep.")
    for part in parts:
        if part in ("", ".", ".."):
            raise PathError("A path may not contain empty, '.' or '..' parts.")
        if len(part.encode("utf-8", "surrogatepass")) > MAX_COMPONENT_BYTES:
            raise PathError(f"Each part of a path may be at most {MAX_COMPONENT_BYTES} bytes long.")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise PathError("A path must be valid UTF-8.") from None
    return path


def clashes(path: str, others) -> str | None:
    """The first of `others` that `path` cannot sit beside in one tree: the same path, or one
    that would have to be both a file and a folder ("a" beside "a/b")."""
    for other in others:
        if other == path or other.startswith(path + "/") or path.startswith(other + "/"):
            return other
    return None
