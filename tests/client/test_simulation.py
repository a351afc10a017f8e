"""The simulated platform (``recurrence_ledger.client.simulation``): its
seeded stream is the same for the same seed (with a holdout, its handoffs
withhold exactly what the assignment says), and through the embedded
runner every event is accepted (nothing dead-lettered: the review decisions
name candidates the ledger did publish), the reviewers' decisions are
applied (approved with a fix that repairs, rejected with a reason code),
the silent lessons are binding suspects and the critical ones recur."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import pytest

from recurrence_ledger.client.events import kind_of
from recurrence_ledger.client.simulation import SimulatedPlatform, parse_rate
from recurrence_ledger.holdout import assign
from tests.conftest import read_jsonl
from tests.plugins.processes import run_cli


def journal(seed: int, count: int) -> list[dict]:
    return [{"topic": kind_of(value), "value": value.model_dump(mode="json")} for value in itertools.islice(SimulatedPlatform(seed=seed).events(), count)]


def test_the_same_seed_gives_the_same_stream_and_another_seed_other_scopes():
    assert journal(7, 400) == journal(7, 400)
    assert {line["value"]["scope_id"] for line in journal(8, 50)}.isdisjoint({line["value"]["scope_id"] for line in journal(7, 50)})


def test_the_stream_is_accepted_whole_and_its_reviews_are_decided(tmp_path: Path):
    path = tmp_path / "sim.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in journal(7, 3000)))
    result = run_cli("run-journal", path, "--out", tmp_path / "out", "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    assert read_jsonl(tmp_path / "out" / "dead-letter.jsonl") == []
    last = {record["scope_id"]: record for record in read_jsonl(tmp_path / "out" / "recurrence-statistics.jsonl")}
    assert sorted(last) == ["sim7-billing-api", "sim7-checkout-web", "sim7-mobile-sync", "sim7-search-indexer"]
    total = lambda name, part=None: sum(record[name][part] if part else record[name] for record in last.values())  # noqa: E731
    assert total("reviews", "approved") >= 4 and total("reviews", "rejected") >= 1
    assert total("repairs", "held") >= 1
    assert total("binding_suspects") >= 1
    assert total("recurred_by_severity", "critical") >= 1
    assert total("avoided") > 0 and total("recurred") > 0
    kinds = {line["topic"] for line in journal(7, 3000)}
    assert kinds == {"experience-revisions", "handoff-revisions", "handoff-receipts", "task-outcomes", "experience-candidates", "review-decisions"}


@pytest.mark.parametrize(("text", "rate"), [("200", 200.0), ("200/s", 200.0), ("12000/min", 200.0), ("max", None), ("0", None)])
def test_a_rate_is_per_second_or_per_minute(text, rate):
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["fast", "-3/s", "10/h"])
def test_a_bad_rate_is_refused(text):
    with pytest.raises(ValueError, match="a rate is N"):
        parse_rate(text)


def test_with_a_holdout_the_handoffs_withhold_what_the_assignment_says_and_the_ledger_measures_effects(tmp_path: Path):
    holdout = ("trial-salt", Fraction(1, 2))
    lines = [{"topic": kind_of(value), "value": value.model_dump(mode="json")}
             for value in itertools.islice(SimulatedPlatform(seed=7, holdout=holdout).events(), 2000)]
    handoffs = [line["value"] for line in lines if line["topic"] == "handoff-revisions"]
    assert any(handoff.get("withheld_citations") for handoff in handoffs)
    for handoff in handoffs:  # every withheld lesson is the assignment's, never a cited one
        for citation in handoff.get("withheld_citations", []):
            assert assign(*holdout, handoff["scope_id"], handoff["artifact_ref"]["artifact_id"], citation["artifact_ref"]["artifact_id"])
    path = tmp_path / "sim.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = run_cli("run-journal", path, "--out", tmp_path / "out", "--quiet", "--holdout-salt", holdout[0], "--holdout-rate", "1/2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert read_jsonl(tmp_path / "out" / "dead-letter.jsonl") == []
    last = {record["scope_id"]: record for record in read_jsonl(tmp_path / "out" / "recurrence-statistics.jsonl")}
    assert sum(record["withheld"] for record in last.values()) > 0
    effects = [row["effect"] for row in read_jsonl(tmp_path / "out" / "revision-statistics.jsonl") if row.get("effect")]
    assert effects and all(effect["assignment_mismatches"] == 0 for effect in effects)
    assert any(effect["verdict"] == "helps" for effect in effects)
