"""A development environment file (`var/dev.env`, written by `make dev`) that manage.py reads,
so every command in the README works without exporting variables first.

Only `NAME=value` lines and comments; values are taken literally (no quotes, no expansion).
A variable already in the environment wins, so a deployment's own settings are never
overridden by a file left behind. Production does not use this file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_LINE = re.compile(r"([A-Z_][A-Z0-9_]*)=(.*)")


class EnvFileError(ValueError):
    pass


def parse_env_file(text: str, source: str = "env file") -> dict[str, str]:
    values = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _LINE.fullmatch(stripped)
        if match is None:
            raise EnvFileError(f"{source}:{number}: expected NAME=value, got {stripped[:60]!r}")
        values[match.group(1)] = match.group(2)
    return values


def load_env_file(path: str | os.PathLike | None) -> list[str]:
    """Set the file's variables that the environment lacks; returns their names."""
    if not path:
        return []
    path = Path(path)
    if not path.is_file():
        return []
    loaded = []
    for name, value in parse_env_file(path.read_text(), str(path)).items():
        if name not in os.environ:
            os.environ[name] = value
            loaded.append(name)
    return loaded


def default_env_file() -> str:
    """GPUPOOL_ENV_FILE, or var/dev.env in the checkout ("" turns the file off)."""
    return os.environ.get("GPUPOOL_ENV_FILE", str(Path(__file__).resolve().parent.parent / "var" / "dev.env"))
