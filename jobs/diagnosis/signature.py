"""A failure's signature: its last error lines with what differs from run to run folded away.

Two jobs that failed the same way (the same exception from the same library, the same message from the
same launcher) rarely print the same bytes: step counts, ranks, ports, pids, paths, addresses, ids and
timestamps differ. Folding those into placeholders leaves lines that two such failures share, and their
digest groups them on the admins' page of unrecognised failures (failures/).

The lines taken are the last ones that look like an error (a word such as error, failed, fatal or
exception), at most `LINES`; a log with none gives its last non-blank lines instead. Pure, no Django.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

LINES = 3
# A log's tail is already bounded by the caller; this bounds the folding whatever it is given.
MAX_SCAN_CHARS = 64 * 1024
MAX_LINE_CHARS = 240

_ERRORISH = re.compile(
    r"(?i:error|exception|failed|failure|fatal|abort|killed|denied|refused|cannot|can't|could not|unable|invalid"
    r"|not found|no such|timed? ?out|terminat|panic|segmentation|core dumped)"
)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):")
# A frame of a traceback with a prefix of its own (`[rank1]:   File "x.py"`), still inside the traceback.
_INDENTED_FRAME = re.compile(r"^(?:\[rank\d+\]: ?)?\s|^\S{0,40}\s+(?:File \"|\^)")
# In this order: the specific shapes first, so a path's digits or a UUID's hex are not folded piecemeal.
_FOLDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\x1b\[[0-9;]{0,20}[A-Za-z]"), ""),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\b\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?"), "<time>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<id>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:~|\.{1,2})?(?:/[\w.@+-]{1,200}){2,40}/?"), "<path>"),
    (re.compile(r"\b0x[0-9a-fA-F]{1,32}\b"), "<hex>"),
    (re.compile(r"\b[0-9a-fA-F]{12,128}\b"), "<hex>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b"), "<address>"),
    # Every run of digits, a rank's (`rank3`) and a version's included: they differ between two such failures.
    (re.compile(r"\d+(?:\.\d+)*"), "<n>"),
    (re.compile(r"[ \t]{2,}"), " "),
)


@dataclass(frozen=True)
class Signature:
    digest: str  # sha256 of `text`, hex, 64 characters: the group's key
    text: str  # the folded lines, newline-separated: what the page shows


def fold(line: str) -> str:
    """A line with its numbers, paths, addresses, ids and hex folded into placeholders."""
    line = line.strip()[:MAX_LINE_CHARS]
    for pattern, placeholder in _FOLDS:
        line = pattern.sub(placeholder, line)
    return line.strip()


def error_lines(text: str, count: int = LINES) -> list[str]:
    """The last `count` lines that look like an error, in log order; or the last non-blank ones.

    A line looks like an error when it has one of the words of `_ERRORISH`, or when it closes a Python
    traceback (the first line after "Traceback (most recent call last):" that is not indented): that is the
    exception, whatever its library named it.
    """
    lines = [line for line in text[-MAX_SCAN_CHARS:].splitlines() if line.strip()]
    errorish, in_traceback = [], False
    for line in lines:
        if _TRACEBACK.search(line):
            in_traceback = True
            continue
        closes = in_traceback and not line[:1].isspace() and not _INDENTED_FRAME.match(line)
        if closes:
            in_traceback = False
        if closes or _ERRORISH.search(line):
            errorish.append(line)
    return (errorish or lines)[-count:]


def signature_of(text: str) -> Signature:
    """The signature of a log's tail; an empty log has the signature of no lines (one group: "empty log")."""
    folded = [fold(line) for line in error_lines(text)]
    joined = "\n".join(line for line in folded if line)
    return Signature(hashlib.sha256(joined.encode("utf-8")).hexdigest(), joined)
