"""contract §16 (rev. 3): every reference of the linked chain points
backwards in the journal; a forward reference links nothing, is final, and
is counted once both of its events are known."""

from __future__ import annotations

from recurrence_ledger.ledger.processor import LedgerConfig
from tests.journal import Ledger, check, claim, experience, handoff, outcome, receipt

S = "scope"
CUE = "port already bound"
COND, SUBJECT = "tests started in sandbox", "ports free before pytest"


def failing(position, source_id, receipt_id=None):
    return outcome(S, position, source_id, receipt_id=receipt_id, checks=[check(CUE)])


def test_a_receipt_at_a_later_position_links_nothing_and_decides_the_outcome_at_once():
    forward = Ledger().feed(experience(S, 1, "E1"), handoff(S, 2, "H1", [("E1", 1)]), failing(3, "O", "R1"))
    assert forward.stats(S)["pending_outcomes"] == 1  # unseen: it waits (§5)
    forward.feed(receipt(S, 4, "R1", "H1"))  # it arrives at a later position: decided now, unlinked
    assert forward.stats(S)["pending_outcomes"] == 0
    assert forward.matches() == [("O", "check", 0, "scope_heads", "matched", "E1r1")]
    assert forward.observations() == ["recurred E1r1 O"]
    assert forward.stats(S)["forward_references"] == 1
    # exactly as if its horizon had passed: the same match as a receipt that never came
    never = Ledger().feed(experience(S, 1, "E1"), handoff(S, 2, "H1", [("E1", 1)]), failing(3, "O", "R1"), receipt(S, 4, "R9", "H1"))
    never.flush()
    assert never.out["recurrence-matches"] == forward.out["recurrence-matches"]
    assert never.out["recurrence-observations"] == forward.out["recurrence-observations"]


def test_a_known_forward_receipt_decides_the_outcome_on_arrival_and_it_stays_decided():
    ledger = Ledger(LedgerConfig(provenance_horizon=None)).feed(
        experience(S, 1, "E1"), handoff(S, 2, "H1", [("E1", 1)]), receipt(S, 9, "R1", "H1"), failing(3, "O", "R1"),
    )
    assert ledger.stats(S)["pending_outcomes"] == 0
    assert ledger.observations() == ["recurred E1r1 O"]
    ledger.feed(outcome(S, 10, "O2", receipt_id="R1", checks=[check(CUE)]))  # a later outcome links through it
    assert ledger.observations() == ["recurred E1r1 O", "selected E1r1 O2", "recurred E1r1 O2"]
    assert ledger.stats(S)["forward_references"] == 1


def test_a_handoff_at_a_later_position_than_its_receipt_links_nothing():
    ledger = Ledger().feed(experience(S, 1, "E1"), receipt(S, 2, "R1", "H1"), failing(3, "O", "R1"))
    assert ledger.stats(S)["pending_outcomes"] == 1
    ledger.feed(handoff(S, 4, "H1", [("E1", 1)]))
    assert ledger.matches() == [("O", "check", 0, "scope_heads", "matched", "E1r1")]
    stats = ledger.stats(S)
    assert (stats["pending_outcomes"], stats["forward_references"], stats["selected"]) == (0, 1, 0)
    assert stats["unlinked_handoff_citations"] == 1  # nothing ever linked through H1


def test_a_forward_citation_is_no_member_no_unlinked_citation_and_no_stale_selection():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        handoff(S, 2, "H1", [("E1", 1), ("E9", 1)]),
        receipt(S, 3, "R1", "H1"),
        outcome(S, 4, "O", status="completed", receipt_id="R1", observations=[claim(COND)], checks=[check(SUBJECT, status="passed")]),
    )
    assert ledger.stats(S)["pending_outcomes"] == 1  # E9 unseen: it might precede the Handoff
    assert ledger.stats(S)["unlinked_handoff_citations"] == 1
    ledger.feed(experience(S, 20, "E9", cue="another cue"))  # published after the Handoff
    assert ledger.observations() == ["selected E1r1 O", "avoided E1r1 O"]
    stats = ledger.stats(S)
    assert (stats["forward_references"], stats["unlinked_handoff_citations"], stats["stale_revision_selections"]) == (1, 0, 0)


def test_a_known_forward_citation_never_makes_an_outcome_wait():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        experience(S, 5, "E9", cue="another cue"),
        handoff(S, 2, "H1", [("E1", 1), ("E9", 1)]),
        receipt(S, 3, "R1", "H1"),
        outcome(S, 4, "O", status="completed", receipt_id="R1"),
    )
    stats = ledger.stats(S)
    assert (stats["pending_outcomes"], stats["selected"], stats["unlinked_handoff_citations"], stats["forward_references"]) == (0, 1, 0, 1)
    assert ledger.observations() == ["selected E1r1 O"]


def test_each_forward_pair_counts_once_whatever_arrives_first():
    records = [
        experience(S, 1, "E1"),
        handoff(S, 2, "H1", [("E1", 1), ("E7", 1), ("E7", 1)]),  # E7 cited twice: one pair
        failing(3, "O1", "R1"), failing(4, "O2", "R1"),  # two outcomes, one forward receipt: two pairs
        receipt(S, 5, "R1", "H1"),
        experience(S, 6, "E7", failure=False),  # no failure block: still a forward citation
        receipt(S, 7, "R2", "H1", status="rejected"),  # resolves to nothing: no pair to H1 (backward anyway)
        receipt(S, 8, "R3", "H2", status="rejected"),  # does not resolve: its forward selected_revision is no pair
        handoff(S, 9, "H2", [("E1", 1)]),
    ]
    for order in (records, records[::-1], records[3:] + records[:3]):
        ledger = Ledger().feed(*order, *order).flush()  # every record twice: duplicates count nothing
        assert ledger.stats(S)["forward_references"] == 3, order


def test_a_pair_whose_outcome_was_already_decided_by_the_horizon_is_still_counted():
    ledger = Ledger(LedgerConfig(provenance_horizon=2)).feed(
        experience(S, 1, "E1"), failing(2, "O", "R1"), experience(S, 4, "E2", cue="other"),
    )
    assert ledger.observations() == ["recurred E1r1 O"]  # decided as unlinked when the horizon passed
    ledger.feed(handoff(S, 5, "H1", [("E1", 1)]), receipt(S, 6, "R1", "H1"))
    assert ledger.stats(S)["forward_references"] == 1
    assert ledger.observations() == ["recurred E1r1 O"]  # final: nothing reopens
