"""The direction of imports (issue: layers for the money side).

Apps stand in layers and import only their own layer and those below; `cluster/` knows
Slurm and no product; no two modules import each other, even through a function-level
import (the way circles used to be dodged), and the few function-level imports of the
portal's own modules that remain say why on the line before.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Lower numbers are lower layers. gpupool's helpers are at the bottom; its project modules
# (settings, URLs, ASGI, Celery, the demo seed) sit on top of everything.
LAYERS = {
    "gpupool.base": 0,
    "cluster": 1,
    "audit": 2,
    "plans": 3,
    "accounts": 4,
    "reservations": 5,
    "jobs": 6,
    "telemetry": 7,
    "alerts": 8,
    "billing": 9,
    "credits": 9,
    "console": 10,
    "gpupool": 11,
}
GPUPOOL_BASE = {
    "gpupool.env",
    "gpupool.envfile",
    "gpupool.gpu_types",
    "gpupool.lookups",
    "gpupool.ratelimit",
    "gpupool.redis_client",
    "gpupool.api",
}
# Function-level imports that need no reason: Django's way of registering signal receivers.
READY_FUNCTIONS = {"ready"}


def _modules() -> dict[str, Path]:
    found = {}
    for app in {name.split(".")[0] for name in LAYERS}:
        for path in (REPO / app).rglob("*.py") if (REPO / app).is_dir() else []:
            parts = path.relative_to(REPO).with_suffix("").parts
            if "migrations" in parts or "tests" in parts or "agent" in parts:
                continue
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _layer(module: str) -> int:
    if module.split(".")[0] == "gpupool":
        base = module in GPUPOOL_BASE or module.startswith("gpupool.api.")
        return LAYERS["gpupool.base"] if base else LAYERS["gpupool"]
    return LAYERS[module.split(".")[0]]


def _imports(modules: dict[str, Path]):
    """(importer, imported, line, function name or None, the source lines) for every import
    of a portal module."""
    for name, path in modules.items():
        source = path.read_text()
        yield from _visit(ast.parse(source), None, name, modules, source.splitlines())


def _visit(node, function, name, modules, lines):
    for child in ast.iter_child_nodes(node):
        inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
        if isinstance(child, ast.Import):
            targets = [alias.name for alias in child.names]
        elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
            targets = [child.module] + [f"{child.module}.{alias.name}" for alias in child.names]
        else:
            targets = []
        for target in targets:
            if target in modules and target != name:
                yield name, target, child.lineno, function, lines
        yield from _visit(child, inner, name, modules, lines)


def _edges():
    modules = _modules()
    return modules, list(_imports(modules))


def test_cluster_imports_no_product_app():
    _modules_, imports = _edges()
    leaks = sorted({(a, b) for a, b, *_ in imports if a.startswith("cluster") and not b.startswith("cluster")})
    assert leaks == []


def test_apps_import_only_their_layer_and_below():
    _modules_, imports = _edges()
    upward = sorted({(a, b) for a, b, *_ in imports if a.split(".")[0] != b.split(".")[0] and _layer(b) > _layer(a)})
    assert upward == []


def test_no_two_modules_import_each_other_even_through_functions():
    modules, imports = _edges()
    graph = defaultdict(set)
    for a, b, *_ in imports:
        graph[a].add(b)
    index, low, stack, on_stack, circles = {}, {}, [], set(), []
    counter = [0]

    def strongconnect(node):  # Tarjan's algorithm
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                strongconnect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in modules:
        if module not in index:
            strongconnect(module)
    assert circles == []


def test_function_level_imports_of_portal_modules_say_why():
    _modules_, imports = _edges()
    unexplained = sorted(
        {
            (a, b, line)
            for a, b, line, function, lines in imports
            if function is not None
            and function not in READY_FUNCTIONS
            and not any("#" in lines[i] for i in range(max(0, line - 3), line))
        }
    )
    assert unexplained == []


def test_the_checks_see_a_circle_and_an_upward_import(tmp_path, monkeypatch):
    """The checks above can fail: a fake pair of modules that import each other, one of
    them from a lower layer, is caught by both."""
    fake = {"cluster.fake_a": tmp_path / "a.py", "jobs.fake_b": tmp_path / "b.py"}
    fake["cluster.fake_a"].write_text("def f():\n    from jobs.fake_b import g\n")
    fake["jobs.fake_b"].write_text("from cluster.fake_a import f\n")
    imports = list(_imports(fake))
    assert {(a, b) for a, b, *_ in imports} >= {("cluster.fake_a", "jobs.fake_b"), ("jobs.fake_b", "cluster.fake_a")}
    assert any(_layer(b) > _layer(a) for a, b, *_ in imports)
