"""Architecture checks on the real import graph (docs/architecture.md).

- The pure core (``recurrence_ledger.ledger``) imports no broker, Redis,
  Avro or file I/O library (functional core, thin shell), checked in a fresh
  interpreter, and no module of the package outside the core except the
  leaves it is allowed: ``recurrence_ledger.errors`` and
  ``recurrence_ledger.topics`` (names of topics and limits, pure data).
- The package's parts form a layered graph with no import cycle: the core
  owns the pydantic models, so ``recurrence_ledger.schemas`` (Avro codecs)
  and the runtime import the core and never the reverse.
- Installed code lives under one import package: no module of the
  repository imports the old top-level names ``processors``, ``schemas`` or
  ``topics``.
"""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "recurrence_ledger"
#: The import package's folder (path = import path, the source root processors/).
PACKAGE_DIR = REPO / "processors" / PACKAGE
CORE = PACKAGE_DIR / "ledger"
FORBIDDEN = ("faust", "aiokafka", "confluent_kafka", "kafka", "redis", "fastavro", "rocksdict", "mode", "aiohttp", "fastapi", "uvicorn")
CORE_MODULES = sorted(f"{PACKAGE}.ledger.{p.stem}" for p in CORE.glob("*.py") if p.stem != "__init__")
#: What the core may import from the rest of the package.
CORE_MAY_IMPORT = {"errors", "catalogue", "policy", "holdout", "wording"}


def package_modules() -> dict[str, Path]:
    """Every module of the import package → its source file."""
    modules: dict[str, Path] = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        relative = path.relative_to(PACKAGE_DIR).with_suffix("")
        parts = [p for p in relative.parts if p != "__init__"]
        modules[".".join([PACKAGE, *parts])] = path
    return modules


def unit(module: str) -> str:
    """The part of the package a module belongs to: its first name below
    ``recurrence_ledger`` (``ledger``, ``runtime``, ``schemas``, ``cli``…)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imported_modules(path: Path) -> set[str]:
    """Absolute module names a source file imports (``from a.b import c``
    counts as ``a.b`` and, when it exists, ``a.b.c``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def unit_graph() -> dict[str, set[str]]:
    """Part → the parts of the package it imports (itself excluded)."""
    modules = package_modules()
    graph: dict[str, set[str]] = {unit(name): set() for name in modules}
    for name, path in modules.items():
        for target in imported_modules(path):
            if target in modules and target != PACKAGE and unit(target) != unit(name):
                graph[unit(name)].add(unit(target))
    return graph


def test_core_modules_do_not_load_forbidden_packages():
    code = (
        "import sys\n"
        f"for name in {CORE_MODULES!r}: __import__(name)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert result.stdout.strip() == ""
    assert len(CORE_MODULES) >= 10


def test_core_source_does_no_file_or_network_io():
    io_calls = {"open", "socket", "urlopen"}
    io_modules = {"os", "pathlib", "io", "socket", "shutil", "subprocess", "tempfile"}
    for path in CORE.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in io_calls, f"{path.name} calls {node.func.id}()"
            if isinstance(node, ast.Import):
                assert not {a.name.split(".")[0] for a in node.names} & io_modules, f"{path.name} imports I/O"
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] not in io_modules, f"{path.name} imports {node.module}"


def test_the_core_imports_only_itself_and_its_leaves():
    graph = unit_graph()
    assert graph["ledger"] <= CORE_MAY_IMPORT, graph["ledger"]
    assert graph["errors"] == set() and graph["catalogue"] <= {"errors", "wording"} and graph["wording"] == set()
    # The codecs import the core (it owns the models), never the reverse.
    assert "ledger" in graph["serde"]


def test_the_parts_of_the_package_form_no_import_cycle():
    graph = unit_graph()
    assert {"ledger", "runtime", "serde", "catalogue", "errors", "settings", "cli", "api", "read", "embedded"} <= set(graph)
    order = list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError on a cycle
    assert order.index("ledger") < order.index("serde") < order.index("runtime")


def test_nothing_imports_the_old_top_level_names():
    offenders = []
    for path in REPO.rglob("*.py"):
        if ".git" in path.parts or "node_modules" in path.parts:
            continue
        for name in imported_modules(path):
            if name.split(".")[0] in {"processors", "schemas", "topics"}:
                offenders.append(f"{path.relative_to(REPO)}: {name}")
    assert offenders == []
