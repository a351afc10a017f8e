"""CONTRACT §8: the ScopeStatistics record (RFC RecurrenceStatistics plus
``as_of_position`` and the gauges ``pending_outcomes`` and ``late_revisions``).
"""

from __future__ import annotations

from processors.ledger.state import LedgerState


def scope_statistics(state: LedgerState, scope: dict, scope_id: str, top_limit: int) -> dict:
    """The statistics record of one scope.

    ``unknown`` = selected − terminal verdicts on linked outcomes (§7).
    ``top_revisions``: revisions with streak ≥ 1, by streak descending, then
    ArtifactRef order, then signature_key; the first ``top_limit``. Taken
    from the sorted ranking (cached between streak changes), so the cost is
    O(top_limit), not O(revisions).
    """
    return {
        "scope_id": scope_id,
        "as_of_position": scope["as_of_position"],
        "selected": scope["selected"],
        "recurred": scope["recurred"],
        "avoided": scope["avoided"],
        "unknown": scope["selected"] - scope["linked_verdicts"],
        "unlinked_handoff_citations": scope["unlinked_handoff_citations"],
        "needing_review": scope["needing_review"],
        "top_revisions": state.top_revisions(scope_id, top_limit),
        "pending_outcomes": scope["pending_outcomes"],
        "late_revisions": scope["late_revisions"],
    }
