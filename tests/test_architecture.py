"""The house plan of docs/architecture.md, checked on the real source.

- Every import between two rooms of ``recurrence_ledger`` is one that the
  room map of docs/architecture.md allows (the table between the
  ``room-map`` markers is parsed here, so the doc and this test cannot
  drift apart).
- No room imports the third-party packages its row forbids (the runtime no
  Redis or HTTP, the read side no HTTP framework, the core none of them).
- The modules of the package form no import cycle, not even two files of
  one room, at module level or inside functions.
- No module imports another module's private (``_name``) name: a name
  another module uses is public.
- The read side, the API and what-if import nothing of the worker's
  runtime (their Kafka comes from ``kafka``).
- No file of the package is longer than :data:`MAX_LINES`.
- Path = import path: every module's import name is its path under
  ``processors/``.
"""

from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "recurrence_ledger"
PACKAGE_DIR = REPO / "processors" / PACKAGE
ARCHITECTURE = REPO / "docs" / "architecture.md"
#: Longest source file of the package (lines).
MAX_LINES = 600


def room_map() -> dict[str, tuple[set[str], set[str]]]:
    """``room -> (rooms it may import, third-party packages it must not
    import)`` from the table of docs/architecture.md between
    ``<!-- room-map -->`` and ``<!-- /room-map -->``; cells list names in
    backquotes, "—" for none."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    table = text.split("<!-- room-map -->", 1)[1].split("<!-- /room-map -->", 1)[0]
    rooms: dict[str, tuple[set[str], set[str]]] = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        names = [set(re.findall(r"`([^`]+)`", cell)) for cell in cells]
        (room,) = names[0]
        rooms[room.rstrip("/")] = ({name.rstrip("/") for name in names[2]}, names[3])
    return rooms


def modules() -> dict[str, Path]:
    """Every module of the package → its file (``a/b/__init__.py`` is ``a.b``)."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = [part for part in path.relative_to(PACKAGE_DIR).with_suffix("").parts if part != "__init__"]
        found[".".join([PACKAGE, *parts])] = path
    return found


def room(module: str) -> str:
    """The room of a module: its first name below the package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path, known: dict[str, Path]) -> tuple[set[str], set[str]]:
    """(modules of the package, top-level third-party names) that ``path``
    imports anywhere in the file (function-level imports included).
    ``from a import b`` names ``a.b`` when that is a module, else ``a``."""
    inside: set[str] = set()
    outside: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] == PACKAGE:
                while name not in known and "." in name:
                    name = name.rsplit(".", 1)[0]
                if name != PACKAGE:
                    inside.add(name)
            else:
                outside.add(name.split(".")[0])
    return inside, outside


def test_the_room_map_names_every_room_of_the_package():
    rooms = room_map()
    assert {"ledger", "serde", "store", "kafka", "embedded", "runtime", "read", "api", "whatif", "cli", "catalogue", "policy", "errors"} <= set(rooms)
    present = {room(name) for name in modules()} - {"__init__"}
    assert present - set(rooms) == set(), "rooms missing from docs/architecture.md's map"
    assert set(rooms) - present == set(), "the map lists rooms that do not exist"


def test_every_import_between_rooms_is_one_the_map_allows():
    rooms = room_map()
    known = modules()
    crossings = []
    for name, path in known.items():
        allowed, _ = rooms.get(room(name), (set(), set()))
        for target in imports(path, known)[0]:
            if room(target) != room(name) and room(target) not in allowed:
                crossings.append(f"{path.relative_to(REPO)} imports {target} ({room(name)} -> {room(target)})")
    assert crossings == []


def test_no_room_imports_the_libraries_its_row_forbids():
    rooms = room_map()
    known = modules()
    offenders = []
    for name, path in known.items():
        _, forbidden = rooms.get(room(name), (set(), set()))
        bad = imports(path, known)[1] & forbidden
        if bad:
            offenders.append(f"{path.relative_to(REPO)}: {sorted(bad)}")
    assert offenders == []


def private_imports(path: Path, known: dict[str, Path]) -> list[str]:
    """``module._name`` for every ``from module import _name`` in ``path``
    where ``module`` is another module of the package (dunder names aside)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.split(".")[0] == PACKAGE:
            if known.get(node.module) == path:
                continue
            found += [f"{node.module}.{alias.name}" for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def test_no_module_imports_a_private_name_of_another_module():
    known = modules()
    offenders = {str(path.relative_to(REPO)): names for path in known.values() if (names := private_imports(path, known))}
    assert offenders == {}, "a name another module uses is public: drop its leading underscore"


def test_the_read_side_the_api_and_whatif_import_nothing_of_the_runtime():
    known = modules()
    offenders = [
        f"{path.relative_to(REPO)} imports {target}"
        for name, path in known.items() if room(name) in {"read", "api", "whatif"}
        for target in imports(path, known)[0] if room(target) == "runtime"
    ]
    assert offenders == []


def test_the_modules_of_the_package_form_no_import_cycle():
    known = modules()
    graph = {name: {target for target in imports(path, known)[0] if target != name} for name, path in known.items()}
    # A package's __init__ re-exporting a submodule is not a cycle of the code.
    for name in graph:
        graph[name] = {target for target in graph[name] if not name.startswith(f"{target}.")}
    list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError naming the cycle


def test_no_file_of_the_package_is_longer_than_the_limit():
    long_files = {
        str(path.relative_to(REPO)): count
        for path in PACKAGE_DIR.rglob("*")
        if path.is_file() and path.suffix in {".py", ".lua"} and (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long_files == {}


def test_path_is_import_path():
    import importlib.util

    for name in ("recurrence_ledger.ledger.processor", "recurrence_ledger.read.keys", "recurrence_ledger.cli"):
        spec = importlib.util.find_spec(name)
        expected = PACKAGE_DIR.joinpath(*name.split(".")[1:])
        origin = Path(spec.origin).resolve()
        assert origin in {expected.with_suffix(".py"), expected / "__init__.py"}, origin
