"""One pass of the core, several review and near-duplicate thresholds
(contract §20): :class:`WhatIfProcessor`.

The processor is the core's ``LedgerProcessor`` at one policy (the pass's
*native* policy, whose ledger facts are the core's own) and computes, beside
it and from the same events, what other thresholds would have published:

- **Review thresholds** (§8). A terminal verdict does not depend on the
  review threshold, so each other threshold gets a :class:`ReviewShadow`:
  its own streak and run records, fed every terminal verdict the core
  records, in the core's order, through the core's own
  ``streaks.record_verdict`` — the same code, so the same candidates, in the
  same order, as a run of the core at that threshold.
- **Near-duplicate thresholds** (§12 rule 5). Admission never changes a
  ledger fact, and a candidate is decided at the same moment whatever the
  threshold; each decision's near-duplicates are looked up again, at that
  moment, at every other threshold (``admission.near_duplicates``).
- **The provenance horizon** (§5) is the pass's own: the outcomes it decided
  unlinked are recorded (``horizon_unlinked``), apart from those the end of
  the inputs decided (``end_unlinked``).

The processor hooks three steps of the core — a terminal verdict, an
admission decision, an outcome decided as unlinked because it waited too
long — and changes none of them: its emits are the core's, byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from recurrence_ledger.ledger import admission
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.ledger.normalize import digest
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.ledger.results import Emit
from recurrence_ledger.ledger.state import LedgerState, Store
from recurrence_ledger.ledger.streaks import record_verdict


class _ShadowState(LedgerState):
    """A review shadow's state: its own streak, run and avoided-position
    records; the Task Outcome records (whose failure refs a candidate lists)
    read from the native state; no ranking (nothing reads it)."""

    def __init__(self, native: Store) -> None:
        super().__init__()
        self._native = native

    def get(self, *parts: object, default: Any = None) -> Any:
        """Record at ``parts``: a Task Outcome's from the native store."""
        if parts[0] == "outcome":
            return self._native.get(parts, default)
        return self.store.get(parts, default)

    def set_streak_rank(self, scope_id: str, ref: dict, signature_key: str, old: int, new: int) -> None:
        """No ranking in a shadow."""

    def forget_top(self, scope_id: str, ref: dict | None = None) -> None:
        """No cached rows in a shadow."""


class ReviewShadow:
    """The review runs and ReviewCandidates (contract §8) of another review
    ``threshold``, fed the native pass's terminal verdicts in order.
    ``candidates``: the ReviewCandidate records that threshold publishes,
    in publication order; ``needing_review``: its per-scope count."""

    def __init__(self, threshold: int, native: Store) -> None:
        self.threshold = threshold
        self.state = _ShadowState(native)
        self.scopes: dict[str, dict] = {}
        self.candidates: list[dict] = []

    def verdict(self, scope_id: str, record: dict, repair_surface: str) -> None:
        """Apply one terminal verdict (a RecurrenceObservation dict with
        event recurred or avoided)."""
        scope = self.scopes.get(scope_id)
        if scope is None:
            scope = self.scopes[scope_id] = {"needing_review": 0}
        self.candidates += record_verdict(
            self.state, scope, scope_id, record["artifact_ref"], record["signature_key"], repair_surface,
            record["event"], record["task_outcome_position"], record["failure_ref"], self.threshold,
        )


def with_near_duplicates(decision: dict, near: list[dict]) -> dict:
    """The AdmissionDecision ``decision`` with another rule-5 list ``near``
    (best first): cut to ``admission.MAX_NEAR_DUPLICATES``, its length in
    ``near_duplicates_total``, the ``decision_digest`` recomputed — the
    record the core decides with ``near`` (``admission.decision``)."""
    record = {name: value for name, value in decision.items() if name != "decision_digest"}
    record["near_duplicates"] = near[: admission.MAX_NEAR_DUPLICATES]
    record["near_duplicates_total"] = len(near)
    record["decision_digest"] = digest(record)
    return record


class WhatIfProcessor(LedgerProcessor):
    """The core at ``config`` (the native policy), plus the review
    thresholds ``review_thresholds`` and near-duplicate thresholds
    ``near_duplicate_thresholds`` computed from the same pass (each may
    include the native one, which the core itself decides).

    After the input (``flush``), per threshold:

    - ``candidates[t]``: the ReviewCandidate records review threshold t
      publishes, in publication order (the native one's are the core's);
    - ``decisions[t]``: ``{(scope_id, candidate_id): AdmissionDecision}``
      near-duplicate threshold t decides, in decision order;
    - ``horizon_unlinked`` / ``end_unlinked``: ``{scope_id: {task outcome
      source_id: journal_position}}`` of the outcomes decided unlinked
      because the provenance horizon passed / the input ended.
    """

    def __init__(self, config: LedgerConfig, review_thresholds: Sequence[int] = (), near_duplicate_thresholds: Sequence[Fraction] = (),
                 validate_outputs: bool = False) -> None:
        super().__init__(config=config, validate_outputs=validate_outputs)
        native_review, native_near = config.review_threshold, config.near_duplicate_threshold
        self.shadows = {t: ReviewShadow(t, self.state.store) for t in dict.fromkeys(review_thresholds) if t != native_review}
        self.candidates: dict[int, list[dict]] = {native_review: []}
        self.decisions: dict[Fraction, dict[tuple[str, str], dict]] = {native_near: {}}
        self._near = [t for t in dict.fromkeys(near_duplicate_thresholds) if t != native_near]
        for threshold in self._near:
            self.decisions[threshold] = {}
        self.horizon_unlinked: dict[str, dict[str, int]] = {}
        self.end_unlinked: dict[str, dict[str, int]] = {}
        self._deciding: dict[str, dict[str, int]] | None = None

    @property
    def scope_ids(self) -> list[str]:
        """The scopes of every source event applied, in order first seen."""
        return list(self._scopes_touched)

    def finish(self) -> None:
        """The shadows' candidates are complete: list them by threshold."""
        for threshold, shadow in self.shadows.items():
            self.candidates[threshold] = shadow.candidates

    # -- the hooks --------------------------------------------------------------
    def _verdict(self, scope: dict, scope_id: str, record: dict, repair_surface: str, emits: list[Emit]) -> list[dict]:
        published = super()._verdict(scope, scope_id, record, repair_surface, emits)
        self.candidates[self.config.review_threshold] += published
        for shadow in self.shadows.values():
            shadow.verdict(scope_id, record, repair_surface)
        return published

    def _decide_candidate(self, scope_id: str, candidate: dict, emits: list[Emit]) -> None:
        super()._decide_candidate(scope_id, candidate, emits)
        decision = emits[-1].value
        key = (scope_id, candidate["candidate_id"])
        self.decisions[self.config.near_duplicate_threshold][key] = decision
        if self._near:
            cue = admission.signature_key(candidate["content"])
            for threshold in self._near:
                near = admission.near_duplicates(self.state, scope_id, cue, candidate["artifact_id"], threshold) if cue else []
                self.decisions[threshold][key] = with_near_duplicates(decision, near)

    def _expire_pending(self, scope: dict, scope_id: str, emits: list[Emit]) -> None:
        self._deciding = self.horizon_unlinked
        try:
            super()._expire_pending(scope, scope_id, emits)
        finally:
            self._deciding = None

    def flush(self) -> list[Emit]:
        """The end of the input (``LedgerProcessor.flush``), recording the
        outcomes it decides unlinked."""
        self._deciding = self.end_unlinked
        try:
            return super().flush()
        finally:
            self._deciding = None

    def _decide_expired(self, scope: dict, scope_id: str, outcome_id: str, emits: list[Emit]) -> None:
        if self._deciding is not None:
            pending = self.state.get("pending", scope_id, outcome_id)
            self._deciding.setdefault(scope_id, {})[outcome_id] = pending["outcome"]["journal_position"]
        super()._decide_expired(scope, scope_id, outcome_id, emits)
