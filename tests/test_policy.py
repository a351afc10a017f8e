"""The policy is defined once (``recurrence_ledger.policy``): no default of
a tunable is written as a number anywhere else in the package, the command
line shows each policy option once with its environment variable, and the
docs' table of settings is the one the policy prints."""

from __future__ import annotations

import ast
import re

import pytest

from recurrence_ledger import policy
from tests.conftest import REPO
from tests.plugins.processes import run_cli

PACKAGE = REPO / "processors" / "recurrence_ledger"

#: The names a policy default goes by in the package (parameters, fields).
POLICY_NAMES = frozenset({
    "review_threshold", "top_revisions", "top_revisions_limit", "top_limit", "provenance_horizon",
    "commit_interval_ms", "max_batch", "max_pending_candidates",
})
#: The settings each command takes as options.
CLI_SETTINGS = {"worker": policy.LEDGER_SETTINGS + policy.RUNTIME_SETTINGS + (policy.WORKER_PROCESSES,),
                "run": policy.LEDGER_SETTINGS + policy.RUNTIME_SETTINGS,
                "serve": policy.SERVE_SETTINGS, "run-journal": (policy.JOBS,), "what-if": (policy.JOBS,)}


def is_number(node: ast.expr | None) -> bool:
    """Whether ``node`` is a number written out (``3``, ``10_000``, ``-1``, ``0.8``)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float, complex)) and not isinstance(node.value, bool)


def field_default(value: ast.expr) -> ast.expr | None:
    """The default of a class attribute's value: the value itself, or the
    ``default`` of ``field(default=…)`` / ``Field(…)``."""
    if isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", None)) in ("field", "Field"):
        given = [keyword.value for keyword in value.keywords if keyword.arg == "default"]
        return given[0] if given else (value.args[0] if value.args else None)
    return value


def literal_policy_defaults(source: str) -> list[tuple[int, str, str]]:
    """``(line, name, default)`` of every function parameter default and
    class attribute (dataclass field) default in ``source`` that is named
    after a policy setting and written as a number."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            arguments = node.args
            positional = arguments.posonlyargs + arguments.args
            pairs = [*zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults), *zip(arguments.kwonlyargs, arguments.kw_defaults)]
            found += [(node.lineno, argument.arg, ast.unparse(default)) for argument, default in pairs
                      if argument.arg in POLICY_NAMES and is_number(default)]
        elif isinstance(node, ast.ClassDef):
            for statement in node.body:
                if isinstance(statement, ast.AnnAssign) and statement.value is not None:
                    targets = [statement.target]
                elif isinstance(statement, ast.Assign):
                    targets = statement.targets
                else:
                    continue
                default = field_default(statement.value)
                found += [(statement.lineno, target.id, ast.unparse(default)) for target in targets
                          if isinstance(target, ast.Name) and target.id in POLICY_NAMES and is_number(default)]
    return found


def test_the_scan_finds_literal_policy_defaults():
    source = (
        "from dataclasses import dataclass, field\n"
        "def f(review_threshold=3, *, max_batch: int = -1, other=2): pass\n"
        "g = lambda top_limit=10: top_limit\n"
        "@dataclass\nclass C:\n    commit_interval_ms: int = 100\n    top_revisions_limit: int = field(default=10)\n"
        "    provenance_horizon = Field(10_000, description='x')\n    max_pending_candidates: int = policy.MAX_PENDING_CANDIDATES.default\n"
    )
    assert [name for _, name, _ in literal_policy_defaults(source)] == [
        "review_threshold", "max_batch", "commit_interval_ms", "top_revisions_limit", "provenance_horizon", "top_limit"]


def test_no_policy_default_is_a_literal_number_in_the_package():
    paths = sorted(PACKAGE.rglob("*.py"))
    assert len(paths) > 20 and PACKAGE / "cli" / "options.py" in paths
    found = [f"{path.relative_to(REPO)}:{line}: {name} = {default}"
             for path in paths
             for line, name, default in literal_policy_defaults(path.read_text(encoding="utf-8"))]
    assert found == [], "take these defaults from recurrence_ledger.policy:\n" + "\n".join(found)


@pytest.mark.parametrize("command", sorted(CLI_SETTINGS))
def test_the_help_shows_each_policy_option_once_with_its_variable(command):
    result = run_cli(command, "--help", env={"COLUMNS": "250"})
    assert result.returncode == 0, result.stderr
    for setting in CLI_SETTINGS[command]:
        lines = [line for line in result.stdout.splitlines() if re.search(rf"(?<![\w-]){re.escape(setting.option)}(?![\w-])", line)]
        assert len(lines) == 1, (command, setting.option, lines)
        assert f"[env var: {setting.env}]" in lines[0], (command, lines[0])
        if setting.default is None:  # unset by default (the pattern group separator, the holdout salt and rate): no default shown
            assert "[default:" not in lines[0], (command, lines[0])
        else:
            assert f"[default: {setting.default}]" in lines[0], (command, lines[0])


def test_a_policy_variable_sets_its_option(tmp_path):
    from tests.conftest import case, read_outputs

    journal, _ = case("worked_example")
    result = run_cli("run-journal", str(journal), "--out", str(tmp_path), "--quiet", env={policy.REVIEW_THRESHOLD.env: "5"})
    assert result.returncode == 0, result.stderr
    assert read_outputs(tmp_path)["review-candidates"] == []  # threshold 3 gives review candidates on this journal
    below = run_cli("run-journal", str(journal), "--out", str(tmp_path), "--quiet", env={policy.REVIEW_THRESHOLD.env: "0"})
    assert below.returncode == 2 and policy.REVIEW_THRESHOLD.option in below.stderr


def test_the_operating_guide_holds_the_settings_table():
    guide = (REPO / "docs" / "operating.md").read_text(encoding="utf-8")
    section = guide.split("\n## Settings\n", 1)
    assert len(section) == 2, "docs/operating.md has no '## Settings' section"
    assert "\n" + policy.markdown_table() in section[1].split("\n## ", 1)[0]


def test_counts_above_an_avro_long_and_processes_above_the_cap_are_usage_errors(tmp_path):
    """A threshold of 2**63 was written into the records (no Avro long can
    carry it) and 2**64 ended in a traceback; --jobs had no bound (10,000
    forked processes took the machine's memory)."""
    from tests.conftest import case

    journal, _ = case("minimum_case")
    too_big = str(policy.MAX_COUNT + 1)
    for args, named in (
        (("run-journal", str(journal), "--out", str(tmp_path / "a"), "--review-threshold", too_big), "--review-threshold"),
        (("run-journal", str(journal), "--out", str(tmp_path / "b"), "--pattern-threshold", str(2**64)), "--pattern-threshold"),
        (("run-journal", str(journal), "--out", str(tmp_path / "c"), "--jobs", str(policy.MAX_PROCESSES + 1)), "--jobs"),
        (("what-if", str(journal), "--out", str(tmp_path / "d"), "--review-threshold", too_big), "the alternative policy"),
        (("what-if", str(journal), "--out", str(tmp_path / "e"), "--sweep", "review-threshold=1..2", "--baseline-review-threshold", too_big),
         "the baseline policy"),
    ):
        result = run_cli(*args, env={"COLUMNS": "300"})
        assert result.returncode == 2 and "Traceback" not in result.stderr, (args, result.stderr[-500:])
        assert named in result.stderr, (args, result.stderr[-500:])
    result = run_cli("run-journal", str(journal), "--out", str(tmp_path / "f"), "--quiet", "--review-threshold", str(policy.MAX_COUNT))
    assert result.returncode == 0, result.stderr
