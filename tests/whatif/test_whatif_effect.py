"""What-if of the effect policy (contract §21.6): another effect minimum or
probability changes verdicts computed from the same final arms (one pass);
another holdout salt and rate changes which pairs are mismatches (a pass of
its own). Expected values come from the fixture's arms
(tests/cases/holdout_effects.expected.json) and §21.4's Beta formula,
evaluated here by its definition with factorials, not by the code under
test."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from recurrence_ledger import policy
from recurrence_ledger.catalogue import REVISION_STATISTICS
from recurrence_ledger.cli import app
from recurrence_ledger.embedded import run_journal
from recurrence_ledger.holdout import assign
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.whatif.policies import Policy, Sweep, passes
from recurrence_ledger.whatif.replay import JournalInput, replay
from recurrence_ledger.whatif.report import build_report, markdown
from tests.conftest import case, read_jsonl

SCOPE = "holdout-effects"


def beta(x: int, y: int) -> Fraction:
    """B(x, y) of positive integers: (x−1)!(y−1)!/(x+y−1)!."""
    return Fraction(math.factorial(x - 1) * math.factorial(y - 1), math.factorial(x + y - 1))


def probability_helps(treated: dict, withheld: dict) -> Fraction:
    """§21.4: P = Σ_{i<a_w} B(a_t+i, b_t+b_w) / ((b_w+i) B(1+i, b_w) B(a_t, b_t)), a = 1+f, b = 1+n−f."""
    a_t, b_t = 1 + treated["recurred"], 1 + treated["resolved"] - treated["recurred"]
    a_w, b_w = 1 + withheld["recurred"], 1 + withheld["resolved"] - withheld["recurred"]
    return sum((beta(a_t + i, b_t + b_w) / ((b_w + i) * beta(1 + i, b_w) * beta(a_t, b_t)) for i in range(a_w)), Fraction(0))


def verdict(treated: dict, withheld: dict, min_resolved: int, threshold: Fraction) -> str:
    """§21.4's verdict, by its definition."""
    if treated["resolved"] < min_resolved or withheld["resolved"] < min_resolved:
        return "insufficient"
    p = probability_helps(treated, withheld)
    return "helps" if p >= threshold else "harms" if p <= 1 - threshold else "undecided"


@pytest.fixture(scope="module")
def arms() -> dict[str, tuple[dict, dict]]:
    """(treated, withheld) of each revision of the fixture, from its expected file."""
    _, expected = case("holdout_effects")
    revisions = expected["scopes"][SCOPE]["revisions"]
    return {name: (row["effect"]["treated"], row["effect"]["withheld"]) for name, row in revisions.items() if row.get("effect")}


def outcome_of(policies: list[Policy], tmp_path: Path):
    source = JournalInput(case("holdout_effects")[0]).open()
    try:
        return replay(source, policies, out_dir=tmp_path, show_progress=False)
    finally:
        source.close()


def changes(baseline: Policy, alternative: Policy, tmp_path: Path) -> tuple[dict, list[dict]]:
    outcome = outcome_of([baseline, alternative], tmp_path)
    document = build_report(outcome, baseline, {}, [alternative])
    comparison = document["comparisons"][0]
    return document, comparison["scopes"].get(SCOPE, {}).get("effect_verdicts_changed", [])


def row(name: str, base: tuple[str, float | None] | None, alt: tuple[str, float | None] | None) -> dict:
    side = lambda v: None if v is None else {"verdict": v[0], "probability_helps": v[1]}  # noqa: E731
    return {"artifact_ref": {"artifact_id": name[:-2], "revision": int(name[-1])}, "baseline": side(base), "alternative": side(alt)}


def test_the_formula_here_gives_the_contract_s_worked_values(arms):
    assert probability_helps(*arms["EHr1"]) == Fraction(887, 924)
    assert probability_helps(*arms["EUr1"]) == Fraction(1, 2)
    assert probability_helps(*arms["EXr1"]) == Fraction(2531, 58786)


def test_a_higher_effect_probability_turns_helps_and_harms_into_undecided(arms, tmp_path):
    high = Fraction(99, 100)
    expected = {name: verdict(*pair, 5, high) for name, pair in arms.items()}
    assert expected == {"EHr1": "undecided", "EUr1": "undecided", "EXr1": "undecided"}
    document, rows = changes(Policy(), Policy(effect_probability=high), tmp_path)
    assert rows == [row("EHr1", ("helps", 0.96), ("undecided", 0.96)), row("EXr1", ("harms", 0.0431), ("undecided", 0.0431))]
    assert document["passes"] == 1 and document["comparisons"][0]["totals"]["effect_verdicts_changed"] == 2
    assert document["comparisons"][0]["changed_settings"] == ["effect_probability"]
    text = markdown(document)
    assert "Revisions whose effect verdict changes (contract §21.6):" in text
    assert "| EH r1 | helps | 0.9600 | undecided | 0.9600 |" in text
    assert "| EX r1 | harms | 0.0431 | undecided | 0.0431 |" in text


def test_a_lower_effect_minimum_decides_what_was_insufficient(arms, tmp_path):
    # Every arm has 5 or 10 resolved observations: at 11 all are insufficient, at 10 only EX is decided.
    assert {name: verdict(*pair, 10, Fraction(19, 20)) for name, pair in arms.items()} == {
        "EHr1": "insufficient", "EUr1": "insufficient", "EXr1": "harms"}
    _, rows = changes(Policy(effect_min_resolved=11), Policy(effect_min_resolved=10), tmp_path)
    assert rows == [row("EXr1", ("insufficient", 0.0431), ("harms", 0.0431))]
    _, rows = changes(Policy(effect_min_resolved=11), Policy(effect_min_resolved=5), tmp_path)
    assert rows == [row("EHr1", ("insufficient", 0.96), ("helps", 0.96)), row("EUr1", ("insufficient", 0.5), ("undecided", 0.5)),
                    row("EXr1", ("insufficient", 0.0431), ("harms", 0.0431))]


def test_a_sweep_of_the_effect_settings_is_one_pass(arms, tmp_path):
    values = (Fraction(19, 20), Fraction(24, 25), Fraction(99, 100))
    sweep = Sweep(policy.EFFECT_PROBABILITY, values)
    baseline = Policy()
    alternatives = list(sweep.policies(baseline))
    assert len(passes([baseline, *alternatives])) == 1
    document = build_report(outcome_of([baseline, *alternatives], tmp_path), baseline, {}, alternatives, sweep)
    base = {name: verdict(*pair, 5, Fraction(19, 20)) for name, pair in arms.items()}
    expected = [sum(verdict(*pair, 5, value) != base[name] for name, pair in arms.items()) for value in values]
    # 887/924 ≈ 0.95996 and 2531/58786 ≈ 0.04305 both fall to undecided at 24/25.
    assert expected == [0, 2, 2]
    assert [r["effect_verdicts_changed"] for r in document["sweep"]["rows"]] == expected


@pytest.mark.parametrize("salt", ["s0", "s1"])
def test_a_holdout_policy_is_a_pass_of_its_own_and_its_mismatches_leave_the_arms(salt, arms, tmp_path):
    rate = Fraction(1, 2)
    alternative = Policy(holdout_salt=salt, holdout_rate=rate)
    assert len(passes([Policy(), alternative])) == 2
    expected = []
    for name, (treated, withheld) in sorted(arms.items()):
        lesson = name[:-2]
        # Each lesson is cited by one Handoff (HT-…) and withheld by another (HW-…) of the fixture.
        treated_mismatch = assign(salt, rate, SCOPE, f"HT-{lesson}", lesson)
        withheld_mismatch = not assign(salt, rate, SCOPE, f"HW-{lesson}", lesson)
        if treated_mismatch or withheld_mismatch:
            base = verdict(treated, withheld, 5, Fraction(19, 20))
            expected.append((lesson, base))
    _, rows = changes(Policy(), alternative, tmp_path)
    assert [(r["artifact_ref"]["artifact_id"], r["baseline"]["verdict"]) for r in rows] == expected
    assert all(r["alternative"] == {"verdict": "insufficient", "probability_helps": None} for r in rows)
    if salt == "s1":
        assert [lesson for lesson, _ in expected] == ["EH", "EU"]
    # The core run with the same policy publishes the same final verdicts.
    run_journal(case("holdout_effects")[0], tmp_path / "rj", LedgerConfig(holdout_salt=salt, holdout_rate=rate), show_progress=False)
    final = {}
    for record in read_jsonl(tmp_path / "rj" / f"{REVISION_STATISTICS}.jsonl"):
        value = record.get("value", record)
        if value.get("effect"):
            final[value["artifact_ref"]["artifact_id"]] = value["effect"]["verdict"]
    changed = {r["artifact_ref"]["artifact_id"]: r["alternative"]["verdict"] for r in rows}
    assert {lesson: final[lesson] for lesson in changed} == changed


def test_the_command_takes_the_effect_and_holdout_options(tmp_path):
    journal, _ = case("holdout_effects")
    result = CliRunner().invoke(app, ["what-if", str(journal), "--out", str(tmp_path / "a"), "--effect-probability", "0.99", "--quiet"])
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "a" / "report.json").read_text())
    assert document["comparisons"][0]["policy"]["effect_probability"] == "99/100"
    assert document["comparisons"][0]["totals"]["effect_verdicts_changed"] == 2
    result = CliRunner().invoke(app, ["what-if", str(journal), "--out", str(tmp_path / "b"), "--sweep", "effect-min-resolved=5..11",
                                      "--baseline-effect-min-resolved", "11", "--quiet"])
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "b" / "report.json").read_text())["sweep"]["rows"]
    assert [r["effect_verdicts_changed"] for r in rows] == [3, 1, 1, 1, 1, 1, 0]
    for args, message in ((["--holdout-salt", "s1"], "set together"), (["--sweep", "effect-probability=0.4"], "'0.4' is not a value"),
                          (["--baseline-holdout-rate", "1/2"], "given together"), (["--holdout-rate", "3/4"], "3/4")):
        result = CliRunner().invoke(app, ["what-if", str(journal), "--out", str(tmp_path / "c"), *args], env={"COLUMNS": "200"})
        assert result.exit_code == 2 and message in " ".join(result.output.split()), (args, result.output)
