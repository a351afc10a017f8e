"""contract §2 (rev. 2): an exact evidence item whose ``ref`` is blank
(rev. 3, §19.1: only White_Space, controls and format characters such as
zero-width spaces, word joiners and BOMs) counts as no evidence — for a
failure item, for the avoided condition and for the bound check — while the
event itself is accepted and stored, never dead-lettered."""

from __future__ import annotations

import pytest

from tests.journal import Ledger, check, claim, experience, handoff, outcome, receipt

S = "scope"
CUE = "port already bound"
CONDITION = "tests started in sandbox"
SUBJECT = "ports free before pytest"
BLANKS = [
    "", "   ", "\t\n", "\u00a0\u3000",  # no-break space and ideographic space are whitespace too
    "\u200b\u200b", "\u2060", "\ufeff", "\u200b\u2060\ufeff \u200b",  # rev. 3: zero-width spaces, word joiners, BOMs
    "\x00\x7f", "\u200e\u00ad",  # rev. 3: controls, a left-to-right mark and a soft hyphen
]


def blank(ref: str) -> list[dict]:
    return [{"kind": "exact", "ref": ref}]


def linked(*records):
    return Ledger().feed(
        experience(S, 1, "E1"), handoff(S, 2, "H1", [("E1", 1)]), receipt(S, 3, "R1", "H1"), *records,
    )


@pytest.mark.parametrize("ref", BLANKS)
def test_a_failure_item_with_a_blank_locator_is_no_failure_item(ref):
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        outcome(S, 2, "O-check", checks=[check(CUE, evidence=blank(ref))]),
        outcome(S, 3, "O-claim", status="failed", observations=[claim(CUE, evidence=blank(ref))]),
    )
    assert ledger.matches() == []
    assert ledger.observations() == []
    assert ledger.reasons() == []  # accepted, not dead-lettered
    assert ledger.stats(S)["as_of_position"] == 3


@pytest.mark.parametrize("ref", BLANKS)
def test_a_condition_with_a_blank_locator_binds_nothing(ref):
    ledger = linked(outcome(S, 10, "O1", status="completed", receipt_id="R1",
                            observations=[claim(CONDITION, evidence=blank(ref))],
                            checks=[check(SUBJECT, status="passed")]))
    assert ledger.observations() == ["selected E1r1 O1"]  # no avoided: the selection stays unknown
    assert (ledger.stats(S)["avoided"], ledger.stats(S)["unknown"]) == (0, 1)
    assert ledger.reasons() == []


@pytest.mark.parametrize("ref", BLANKS)
def test_a_bound_check_with_a_blank_locator_binds_nothing(ref):
    ledger = linked(outcome(S, 10, "O1", status="completed", receipt_id="R1",
                            observations=[claim(CONDITION)],
                            checks=[check(SUBJECT, status="passed", evidence=blank(ref))]))
    assert ledger.observations() == ["selected E1r1 O1"]
    assert (ledger.stats(S)["avoided"], ledger.stats(S)["unknown"]) == (0, 1)
    assert ledger.reasons() == []


def test_one_non_blank_exact_item_is_enough_and_the_blank_one_stays_in_the_event():
    evidence = [{"kind": "exact", "ref": "  "}, {"kind": "exact", "ref": "ci:run/7"}]
    ledger = Ledger().feed(experience(S, 1, "E1"), outcome(S, 2, "O1", checks=[check(CUE, evidence=evidence)]))
    assert ledger.matches() == [("O1", "check", 0, "scope_heads", "matched", "E1r1")]
    [match] = ledger.out["recurrence-matches"]
    # item_digest covers the item as sent, blank locator included.
    from recurrence_ledger.ledger.normalize import digest

    assert match["failure_ref"]["item_digest"] == digest(check(CUE, evidence=evidence))


def test_an_outcome_with_only_blank_locators_is_stored_like_any_other():
    record = outcome(S, 2, "O1", checks=[check(CUE, evidence=blank(" "))])
    ledger = Ledger().feed(experience(S, 1, "E1"), record, record)
    assert ledger.reasons() == []  # the second copy is a duplicate of a stored event
    changed = outcome(S, 2, "O1", checks=[check(CUE, evidence=blank("  "))])
    ledger.feed(changed)
    assert ledger.reasons() == ["identity_conflict"]  # the first version stands


@pytest.mark.parametrize("ref", ["\u200b.\u200b", "\u3164", "\u2800"])
def test_a_locator_with_one_visible_character_is_evidence(ref):
    """Hangul filler (Lo) and braille blank (So) look empty but are neither
    White_Space nor Cc/Cf: they are locators."""
    ledger = Ledger().feed(experience(S, 1, "E1"), outcome(S, 2, "O1", checks=[check(CUE, evidence=blank(ref))]))
    assert ledger.matches() == [("O1", "check", 0, "scope_heads", "matched", "E1r1")]
