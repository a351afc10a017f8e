"""contract §24 on ReviewStatus: a rejected candidate's row carries the
rejecting decision's ``reason_code`` (null without one); open, approved and
superseded rows have none — copied from the ReviewDecision, never decided
again. The row validates against its model and Avro schema."""

from __future__ import annotations

from recurrence_ledger.ledger.records import ReviewStatus
from recurrence_ledger.serde import codec
from tests.journal import Ledger
from tests.ledger.test_review_reasons import candidate, decide, four_candidates


def test_a_rejected_row_carries_the_decision_s_reason_code():
    ledger = Ledger().feed(
        *four_candidates(),
        decide("A", "rejected", reason_code="weak_evidence"),
        decide("B", "rejected"),
        decide("C", "approved"),
    ).flush()
    rows = {row["candidate_id"]: row for row in ledger.out["review-status"]}  # the last row per candidate
    assert [rows[candidate(a)]["reason_code"] for a in ("A", "B", "C", "D")] == ["weak_evidence", None, None, None]
    assert [rows[candidate(a)]["status"] for a in ("A", "B", "C", "D")] == ["rejected", "rejected", "approved", "open"]
    for row in rows.values():
        ReviewStatus.model_validate(row)
        assert codec.decode_value(codec.encode("ReviewStatus", row), ("ReviewStatus",)) == row
