#!/usr/bin/env python3
"""Figures of the code's shape, for reviews of the layout: modules per package, the longest
modules and functions (tests and migrations left out).

    python3 scripts/layout_stats.py [REPO]
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

SKIP = {"tests", "migrations", ".venv", "node_modules", "var", "agent"}


def modules(repo: Path):
    for path in sorted(repo.glob("*/**/*.py")):
        parts = path.relative_to(repo).parts
        if SKIP & set(parts) or not (repo / parts[0] / "__init__.py").exists():
            continue
        yield path


def main(repo: Path) -> None:
    paths = list(modules(repo))
    per_package = Counter(path.relative_to(repo).parts[0] for path in paths)
    lengths = sorted(((len(p.read_text().splitlines()), p.relative_to(repo)) for p in paths), reverse=True)
    functions = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions.append((node.end_lineno - node.lineno + 1, f"{path.relative_to(repo)}:{node.name}"))
    functions.sort(reverse=True)
    print(f"{len(paths)} modules, {sum(n for n, _ in lengths)} lines")
    print("modules per package: " + ", ".join(f"{name} {count}" for name, count in sorted(per_package.items())))
    folders = Counter(str(path.parent.relative_to(repo)) for path in paths)
    print("largest folders:", ", ".join(f"{name}/ {count}" for name, count in folders.most_common(4)))
    print("longest modules:", "; ".join(f"{path} {n}" for n, path in lengths[:8]))
    print("longest functions:", "; ".join(f"{name} {n}" for n, name in functions[:8]))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]).resolve())
