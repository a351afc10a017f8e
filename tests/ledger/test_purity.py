"""The core imports no broker, Redis, Avro or file I/O (functional core,
thin shell; docs/architecture.md). Checked on the real import graph in a fresh interpreter."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "processors" / "ledger"
FORBIDDEN = ("faust", "aiokafka", "confluent_kafka", "kafka", "redis", "fastavro", "rocksdict", "mode", "aiohttp")
CORE_MODULES = sorted(f"recurrence_ledger.ledger.{p.stem}" for p in CORE.glob("*.py") if p.stem != "__init__")


def test_core_modules_do_not_load_forbidden_packages():
    code = (
        "import sys\n"
        f"for name in {CORE_MODULES!r}: __import__(name)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=CORE.parents[1])
    assert result.stdout.strip() == ""
    assert len(CORE_MODULES) >= 8


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
