"""Slurm's spellings of a job array's task ids: "0-2,5,7-8", with a throttle "0-23%4", with a
step "0-10:2", and slurmdbd's hex bitmap ("0x3C": tasks 2 to 5) for tasks that never ran."""

from __future__ import annotations

import re
from collections.abc import Iterable

_RANGE_RE = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?", re.ASCII)
# Far above any MaxArraySize: a malformed string cannot make us build a huge list.
MAX_TASK_ID = 4_000_000


def compress_ids(task_ids: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8"."""
    parts: list[str] = []
    run: list[int] = []
    for task_id in sorted(set(task_ids)):
        if isinstance(task_id, bool) or not isinstance(task_id, int) or task_id < 0:
            raise ValueError(f"not a task id: {task_id!r}")
        if run and task_id == run[-1] + 1:
            run.append(task_id)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [task_id]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)


def expand_task_string(text: str) -> tuple[list[int], int]:
    """ "4-23%4" -> ([4, ..., 23], 4); "1,3,5-9:2" -> ([1, 3, 5, 7, 9], 0). ValueError when
    malformed."""
    body, _percent, throttle = text.strip().partition("%")
    ids: list[int] = []
    for part in filter(None, body.strip("[]").split(",")):
        match = _RANGE_RE.fullmatch(part)
        if not match:
            raise ValueError(f"not a task id range: {part!r}")
        first = int(match[1])
        last = int(match[2]) if match[2] else first
        step = int(match[3]) if match[3] else 1
        if last < first or step < 1 or last > MAX_TASK_ID:
            raise ValueError(f"not a task id range: {part!r}")
        ids.extend(range(first, last + 1, step))
    return ids, int(throttle) if throttle.isdigit() else 0


def bitmap_task_ids(text: str) -> list[int]:
    """slurmdbd's record of an array's tasks that never had one of their own: "0x3C" -> [2, 3, 4, 5]."""
    if not text.lower().startswith("0x"):
        return expand_task_string(text)[0] if text else []
    value = int(text, 16)
    if value.bit_length() > MAX_TASK_ID:
        raise ValueError("task bitmap too large")
    return [index for index in range(value.bit_length()) if value >> index & 1]
