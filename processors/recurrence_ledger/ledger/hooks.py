"""The core's public policy hook: what a policy replay (contract §20) watches
in ``LedgerProcessor`` without changing it.

A :class:`PolicyHook` given to ``LedgerProcessor(hook=...)`` is told of four
steps of the core, after the core took them: a terminal verdict recorded
(§7/§8), an admission decision made (§12), a pending Task Outcome decided as
unlinked because it waited too long (§5), a review decision taken (§18). The hook reads the state it is
handed and must not write it, nor touch the emits: the core's records stay
byte for byte what they are without a hook. Every method does nothing here;
a hook overrides the ones it needs (``whatif.shadow.WhatIfProcessor``).

Part of the pure core: imports nothing outside the ledger.
"""

from __future__ import annotations

from recurrence_ledger.ledger.state import LedgerState


class PolicyHook:
    """Watches the core's policy decisions (contract §20); no-op methods."""

    def verdict_recorded(self, state: LedgerState, scope_id: str, record: dict, repair_surface: str, published: list[dict]) -> None:
        """A terminal verdict (the RecurrenceObservation ``record``, contract
        §7) was recorded for an outcome in ``repair_surface``; ``published``
        are the ReviewCandidate records it made the core publish (§8), in
        order (the core's own list: do not change it)."""

    def admission_decided(self, state: LedgerState, scope_id: str, candidate: dict, decision: dict) -> None:
        """The experience candidate ``candidate`` was decided (§12 rules 1–6):
        ``decision`` is the AdmissionDecision record the core emitted."""

    def outcome_expired(self, state: LedgerState, scope_id: str, outcome_id: str, journal_position: int, end_of_input: bool) -> None:
        """The pending Task Outcome ``outcome_id`` (at ``journal_position``)
        is about to be decided unlinked (§5): its provenance horizon passed
        (``end_of_input`` False) or the input ended (``flush``, True)."""

    def review_decision_taken(self, state: LedgerState, scope_id: str, decision: dict) -> None:
        """The ReviewDecision ``decision`` (its canonical form, contract §18)
        was applied to its candidate or is held until the candidate is
        published — not dead-lettered when it arrived. A held decision may
        still be dead-lettered later (``unknown_candidate``)."""
