"""``recurrence-ledger --help`` for a new user: the command's modules import
only what their options need (the ledger core, Redis, Kafka and the read
side are imported by the commands that use them), and a flag is shown as a
flag — no ``<bool>`` value placeholder."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.plugins.processes import cli_env, run_cli

#: Modules no command needs to show its help: the ledger core, Redis, Kafka, Avro, the read side, the API.
HEAVY = ("redis", "confluent_kafka", "fastavro", "fastapi", "recurrence_ledger.ledger.processor", "recurrence_ledger.ledger.records",
         "recurrence_ledger.embedded.runner", "recurrence_ledger.read.history", "recurrence_ledger.api.app")
#: Every command and command group with options, as typed after ``recurrence-ledger``.
COMMANDS = ("", "run-journal", "run", "worker", "publish", "export", "replay", "rebuild", "what-if", "explain", "serve", "rank", "stats",
            "topics", "topics create", "view", "view follow", "view rebuild", "review", "review list", "patterns", "patterns export")


def test_importing_the_command_line_imports_none_of_the_heavy_modules():
    code = f"import sys, recurrence_ledger.cli; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == []


@pytest.mark.parametrize("command", COMMANDS)
def test_a_flag_is_shown_without_a_value_placeholder(command):
    result = run_cli(*command.split(), "--help", columns=200)
    assert result.returncode == 0, result.stderr
    assert "<bool>" not in result.stdout and "--help" in result.stdout
    if command == "worker":  # a pair of flags and a single flag, each without a value column
        line = next(line for line in result.stdout.splitlines() if "--static-membership" in line)
        assert "--dynamic-membership" in line and "<" not in line.split("--dynamic-membership", 1)[1].split("Static", 1)[0]
        assert "<int range>" in next(line for line in result.stdout.splitlines() if "--max-batch" in line)
