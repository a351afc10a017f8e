"""``recurrence-ledger explain-effect``: why a lesson's effect verdict is
what it is (contract §21.4) — the published effect, the rule of §21.4 it
meets under the policy given, both arms' outcomes and the mismatches —
from the journal of tests/cases/holdout_effects (the contract's three
worked probabilities)."""

from __future__ import annotations

import json
from fractions import Fraction

from recurrence_ledger.ledger.explain import effect_rule
from tests.conftest import CASES
from tests.plugins.processes import run_cli

JOURNAL = CASES / "holdout_effects.jsonl"


def test_a_lesson_that_harms_is_explained_by_its_arms():
    result = run_cli("explain-effect", "holdout-effects", "EX", "1", "--journal", JOURNAL, "--json")
    assert result.returncode == 0, result.stderr
    explanation = json.loads(result.stdout)
    assert explanation["effect"]["verdict"] == "harms" and explanation["effect"]["probability_helps"] == 0.0431
    assert explanation["rule"] == "harms: both arms have ≥ 5 resolved; probability_helps 0.0431 ≤ 1 − effect_probability = 1/20"
    assert [row["verdict"] for row in explanation["treated"]] == ["recurred"] * 7 + ["avoided"] * 3
    assert [row["verdict"] for row in explanation["withheld"]] == ["recurred"] * 3 + ["avoided"] * 7
    assert {row["assignment"] for row in explanation["withheld"]} == {"unverified"} and explanation["mismatched"] == []
    text = run_cli("explain-effect", "holdout-effects", "EX", "1", "--journal", JOURNAL, columns=160).stdout
    assert "verdict harms, probability_helps 0.0431" in text and "withheld arm: 3 of 10 resolved recurred (10 withheld)" in text


def test_the_policy_given_decides_the_verdict_of_a_journal_run():
    # 887/924 ≈ 0.95996: helps at the default 19/20, undecided at 99/100
    helps = json.loads(run_cli("explain-effect", "holdout-effects", "EH", "1", "--journal", JOURNAL, "--json").stdout)
    assert (helps["effect"]["verdict"], helps["rule"].split(":")[0]) == ("helps", "helps")
    strict = json.loads(run_cli("explain-effect", "holdout-effects", "EH", "1", "--journal", JOURNAL, "--json", "--effect-probability", "99/100").stdout)
    assert strict["effect"]["verdict"] == "undecided"
    assert strict["rule"] == "undecided: both arms have ≥ 5 resolved; probability_helps 0.9600 between 1/100 and 99/100"


def test_an_unknown_revision_exits_1_and_insufficient_names_the_short_arm():
    missing = run_cli("explain-effect", "holdout-effects", "NOPE", "1", "--journal", JOURNAL)
    assert missing.returncode == 1 and "no revision-statistics row for NOPE r1" in missing.stdout + missing.stderr
    effect = {"treated": {"resolved": 0, "recurred": 0}, "withheld": {"withheld": 11, "resolved": 2, "recurred": 1},
              "assignment_mismatches": 0, "probability_helps": None, "verdict": "insufficient"}
    assert effect_rule(effect, 5, Fraction(19, 20)) == (
        "insufficient: an arm has fewer than effect_min_resolved resolved observations (treated 0 < 5, withheld 2 < 5)")
