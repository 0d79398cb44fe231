"""Slurm host lists: "gpu-a100-[01-02,04],gpu-h100-01" -> the node names, in order."""

from __future__ import annotations

import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(text: str) -> list[str]:
    names: list[str] = []
    for item in _split(text or ""):
        if "[" not in item:
            names.append(item)
            continue
        prefix, rest = item.split("[", 1)
        body, suffix = rest.split("]", 1) if "]" in rest else (rest, "")
        for part in body.split(","):
            match = _RANGE.match(part.strip())
            if not match:
                continue
            low, high = match.group(1), match.group(2) or match.group(1)
            width = len(low)
            names.extend(f"{prefix}{number:0{width}d}{suffix}" for number in range(int(low), int(high) + 1))
    return names


def _split(text: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text:
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    if current:
        items.append(current)
    return [item.strip() for item in items if item.strip()]
