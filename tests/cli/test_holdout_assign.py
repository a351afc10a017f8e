"""``recurrence-ledger holdout assign``: the same arm as the library (§21.5)."""

from __future__ import annotations

import json
from fractions import Fraction

from recurrence_ledger.holdout import assign
from tests.plugins.processes import run_cli


def test_holdout_assign_prints_one_line_per_lesson_like_the_library():
    result = run_cli("holdout", "assign", "s1", "H1", "E7", "E8", "--holdout-salt", "salt-1", "--holdout-rate", "1/2")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines == [
        {"scope_id": "s1", "handoff_artifact_id": "H1", "experience_artifact_id": "E7", "rate": "1/2", "hash": "61e9c42dbe7f0d51", "withheld": True},
        {"scope_id": "s1", "handoff_artifact_id": "H1", "experience_artifact_id": "E8", "rate": "1/2", "hash": "df9d1218ac91f78f", "withheld": False},
    ]
    assert [line["withheld"] for line in lines] == [assign("salt-1", Fraction(1, 2), "s1", "H1", e) for e in ("E7", "E8")]
    assert int("61e9c42dbe7f0d51", 16) == 7055385992001162577


def test_holdout_assign_takes_the_policy_variables_and_refuses_a_rate_above_one_half():
    from_env = run_cli("holdout", "assign", "s1", "H2", "E7", env={"RL_HOLDOUT_SALT": "salt-1", "RL_HOLDOUT_RATE": "0.02"})
    assert from_env.returncode == 0, from_env.stderr
    assert json.loads(from_env.stdout)["withheld"] is True
    refused = run_cli("holdout", "assign", "s1", "H2", "E7", "--holdout-salt", "x", "--holdout-rate", "3/4")
    assert refused.returncode == 2 and "must be ≤ 1/2" in refused.stderr
