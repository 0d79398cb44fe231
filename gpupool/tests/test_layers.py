"""The direction of imports, as docs/architecture.md's table says (the README shows the same
table).

Packages stand in layers and import only packages on lower layers; two packages on the same
layer never import each other; `cluster/` knows Slurm and no product; no two modules import
each other, even through a function-level import (the way circles used to be dodged), and
the few function-level imports of the portal's own modules that remain say why on the line
before. Every package is scanned (management commands and `testing/` included); tests and
migrations are not.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TABLE_FILE = REPO / "docs" / "architecture.md"
# A table row: "| 7 | `telemetry`, `credits` | what lives there |".
ROW = re.compile(r"^\|\s*(\d+)\s*\|([^|]*)\|")
# Function-level imports that need no reason: Django's way of registering signal receivers.
READY_FUNCTIONS = {"ready"}
# Folders of Python that are not portal packages: tools run from outside (benchmarks, the dev
# cluster's scripts) and the telemetry agent, which runs on GPU nodes without Django.
NOT_PACKAGES = {"bench", "deploy", "scripts", "docs", "static", "templates", "var", "node_modules"}


def table_rows(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if ROW.match(line.strip())]


def read_layers(text: str) -> dict[str, int]:
    layers = {}
    for line in table_rows(text):
        match = ROW.match(line)
        for package in re.findall(r"`([a-z_]+)`", match[2]):
            layers[package] = int(match[1])
    return layers


def section(text: str, heading: str) -> str:
    """The part of `text` from `heading` to the next heading of its level or above."""
    start = text.index(heading)
    level = heading.split(" ", 1)[0]
    rest = text[start + len(heading) :]
    ends = [match.start() for match in re.finditer(r"^(#+) ", rest, re.M) if len(match[1]) <= len(level)]
    return text[start : start + len(heading) + (ends[0] if ends else len(rest))]


LAYERS = read_layers(section(TABLE_FILE.read_text(), "## The layers"))
# The packages inside jobs/, in layers of their own (docs/architecture.md, "jobs/, the largest app").
JOBS_LAYERS = read_layers(section(TABLE_FILE.read_text(), "### `jobs/`"))


def _packages() -> set[str]:
    return {
        path.parent.name
        for path in REPO.glob("*/__init__.py")
        if path.parent.name not in NOT_PACKAGES and not path.parent.name.startswith(".")
    }


def _modules() -> dict[str, Path]:
    found = {}
    for package in _packages():
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            if "migrations" in parts or "tests" in parts or "agent" in parts:
                continue
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _layer(module: str) -> int:
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
            # `from package import submodule` depends on the submodule; the package itself only
            # when something else is taken from it.
            submodules = [f"{child.module}.{alias.name}" for alias in child.names]
            takes_more = any(target not in modules for target in submodules)
            targets = ([child.module] if takes_more else []) + submodules
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
    leaks = sorted(
        {(a, b) for a, b, *_ in imports if a.startswith("cluster") and b.split(".")[0] not in {"cluster", "foundation"}}
    )
    assert leaks == []


def _crossing(a: str, b: str) -> bool:
    """True when module a may not import module b: another package on its own layer or above."""
    return a.split(".")[0] != b.split(".")[0] and _layer(b) >= _layer(a)


def test_every_package_has_a_place_in_the_table():
    assert LAYERS, f"no layer table found in {TABLE_FILE}"
    assert sorted(_packages() - set(LAYERS)) == []
    assert sorted(set(LAYERS) - _packages()) == []


def test_the_readme_shows_the_same_table():
    readme = table_rows((REPO / "README.md").read_text())
    assert readme == table_rows(section(TABLE_FILE.read_text(), "## The layers"))


def _jobs_package(module: str) -> str | None:
    """The package of jobs/ in the table that `module` is in, or None (jobs' own modules)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "jobs" and len(parts) > 1 and parts[1] in JOBS_LAYERS else None


def _jobs_crossing(a: str, b: str) -> bool:
    """True when module a of a package of jobs/ may not import module b of another: one beside
    it or above it in the jobs table."""
    package_a, package_b = _jobs_package(a), _jobs_package(b)
    if not package_a or not package_b or package_a == package_b:
        return False
    return JOBS_LAYERS[package_b] >= JOBS_LAYERS[package_a]


def test_every_package_of_jobs_has_a_place_in_its_table():
    packages = {path.parent.name for path in (REPO / "jobs").glob("*/__init__.py")} - {
        "tests",
        "migrations",
        "management",
    }
    assert JOBS_LAYERS and sorted(packages ^ set(JOBS_LAYERS)) == []


def test_the_packages_of_jobs_import_only_lower_rows_and_form_no_loop():
    _modules_, imports = _edges()
    crossing = sorted({(a, b) for a, b, *_ in imports if _jobs_crossing(a, b)})
    assert crossing == []


def test_the_jobs_check_sees_a_loop():
    assert _jobs_crossing("jobs.mirror.arrays", "jobs.slurm_events.receiving")  # up a row
    assert _jobs_crossing("jobs.live.events", "jobs.submission.intake")  # beside it
    assert not _jobs_crossing("jobs.slurm_events.receiving", "jobs.mirror.arrays")
    assert not _jobs_crossing("jobs.mirror.rows", "jobs.models")  # jobs' own modules are not in the table


def test_packages_import_only_lower_layers():
    _modules_, imports = _edges()
    crossing = sorted({(a, b) for a, b, *_ in imports if _crossing(a, b)})
    assert crossing == []


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
    assert any(_crossing(a, b) for a, b, *_ in imports)


def test_the_table_reader_and_the_sideways_check_can_fail():
    layers = read_layers("| Layer | Packages |\n|---|---|\n| 7 | `telemetry`, `credits` | x |\n| 9 | `billing` | y |\n")
    assert layers == {"telemetry": 7, "credits": 7, "billing": 9}
    assert LAYERS["telemetry"] == LAYERS["credits"]
    assert _crossing("credits.actions.ledger", "telemetry.models")
    assert not _crossing("billing.actions.charging", "credits.actions.ledger")
    assert _crossing("credits.actions.ledger", "billing.actions.charging")


# The actions rule (docs/architecture.md, "The skeleton of an app"): a function that opens a
# transaction and is called from another app or from an entry module lives in an `actions`
# module (or package). Found from the code, not from a list: every function using `atomic`.
ENTRY_MODULES = ("views", "api", "admin", "tasks", "receivers", "management")


def _is_entry(module: str) -> bool:
    _app, *rest = module.split(".")
    return bool(rest) and (rest[0] in ENTRY_MODULES or rest[0].startswith("views_"))


def _in_actions(module: str) -> bool:
    return "actions" in module.split(".")


def transaction_openers(modules: dict[str, str]) -> dict[str, set[str]]:
    """{module: names of its functions that use `atomic`} from {module: source}."""
    found: dict[str, set[str]] = defaultdict(set)
    for name, source in modules.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                isinstance(inner, ast.Attribute) and inner.attr == "atomic" for inner in ast.walk(node)
            ):
                found[name].add(node.name)
    return found


def calls_outside_actions(modules: dict[str, str]) -> set[tuple[str, str, str]]:
    """(module, function, caller) for each transaction-opening function outside an actions
    module that another app or an entry module imports or calls."""
    openers = transaction_openers(modules)
    found = set()
    for caller, source in modules.items():
        aliases: dict[str, str] = {}
        tree = ast.parse(source)
        targets: list[tuple[str, str]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    targets.append((node.module, alias.name))
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    aliases[alias.asname or alias.name] = alias.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                targets.append((aliases[node.value.id], node.attr))
        for module, function in targets:
            if function not in openers.get(module, ()) or _in_actions(module):
                continue
            if module.split(".")[0] != caller.split(".")[0] or _is_entry(caller):
                found.add((module, function, caller))
    return found


def test_a_function_that_opens_a_transaction_for_others_lives_in_actions():
    sources = {name: path.read_text() for name, path in _modules().items()}
    assert sorted(calls_outside_actions(sources)) == []


def test_the_actions_check_sees_a_bypass():
    sources = {
        "billing.charging": (
            "from django.db import transaction\ndef charge():\n    with transaction.atomic():\n        pass\n"
        ),
        "billing.views": "from billing import charging\ncharging.charge()\n",
        "billing.costs": "from billing.charging import charge\n",
        "credits.ledger": "from billing.charging import charge\n",
        "billing.actions.closing": "from django.db import transaction\n@transaction.atomic\ndef close():\n    pass\n",
        "console.views.home": "from billing.actions.closing import close\n",
    }
    assert calls_outside_actions(sources) == {
        ("billing.charging", "charge", "billing.views"),  # an entry module of its own app
        ("billing.charging", "charge", "credits.ledger"),  # another app
    }  # billing.costs is billing's own internals; close lives in actions


# Entry modules (views, the API, the admin, tasks) open no transaction themselves: a write that
# needs one is an `actions` function (or a query helper) they call. Management commands are
# run by hand once (the demo seed) and are left out.
TRANSACTION_FREE = ("views", "api", "admin", "tasks")


def _opens_a_transaction(source: str) -> bool:
    """Whether `source` uses Django's `atomic` (as `transaction.atomic`, or imported alone)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "atomic":
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "django.db.transaction":
            if any(alias.name == "atomic" for alias in node.names):
                return True
    return False


def _is_entry_module(module: str) -> bool:
    _app, *rest = module.split(".")
    return bool(rest) and (rest[0] in TRANSACTION_FREE or rest[0].startswith("views_"))


def test_entry_modules_leave_transactions_to_actions():
    opening = sorted(
        name for name, path in _modules().items() if _is_entry_module(name) and _opens_a_transaction(path.read_text())
    )
    assert opening == []


def test_the_transaction_check_sees_one():
    assert _opens_a_transaction("from django.db import transaction\nwith transaction.atomic():\n    pass\n")
    assert _opens_a_transaction("from django.db.transaction import atomic\n")
    assert not _opens_a_transaction("from django.db import transaction\ntransaction.on_commit(print)\n")
    assert _is_entry_module("console.views.cluster") and _is_entry_module("billing.api.views")
    assert not _is_entry_module("billing.actions") and not _is_entry_module("billing.quotes")
