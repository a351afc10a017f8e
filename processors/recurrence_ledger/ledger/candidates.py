"""Admission candidates in the processor (contract §12): a candidate is
decided at once, or held until every Task Outcome it cites is known or the
provenance horizon passes, like a pending outcome (§5). The rules
themselves are :mod:`recurrence_ledger.ledger.admission`.

``CandidateAdmission`` is a part of ``LedgerProcessor`` (a mixin): its
methods read and write the processor's state and publish through its
``_emit``; ``apply`` and ``flush`` call them.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from recurrence_ledger.catalogue import ADMISSION_DECISIONS
from recurrence_ledger.ledger import admission
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.ledger.hooks import PolicyHook
from recurrence_ledger.ledger.results import ApplyResult, Emit, Rejection
from recurrence_ledger.ledger.state import LedgerState


def due(index: list | None, horizon: int | None, as_of_position: int | None, end_of_input: bool = False) -> list[list]:
    """The entries ``[position, id]`` of a waiting index (sorted by
    position) whose provenance horizon has passed: ``as_of_position``
    reached their position plus ``horizon`` (contract §5, §12, §18) — or,
    at ``end_of_input``, all of them. None waits for the end."""
    if not index or (not end_of_input and (horizon is None or as_of_position is None)):
        return []
    if end_of_input:
        return list(index)
    passed = 0
    while passed < len(index) and index[passed][0] + horizon <= as_of_position:
        passed += 1  # sorted: the first entry still waiting ends the run
    return index[:passed]


class CandidateAdmission:
    """The admission part of ``LedgerProcessor``: held candidates
    (``candidate_pending``, ``candidate_index`` and ``candidate_wait``
    records of the state) and their decisions."""

    state: LedgerState
    config: LedgerConfig
    hook: PolicyHook | None
    #: Scopes that received a candidate: ``flush`` decides what they still hold.
    _candidate_scopes: dict[str, None]
    _emit: Callable[[list[Emit], str, str, dict], None]

    def _on_candidate(self, scope_id: str, candidate: dict, content_digest: str) -> ApplyResult:
        """Decide a new candidate now, or hold it until every Task Outcome it
        cites is known (like a pending outcome, contract §5). A candidate is
        not a source event: it uses no journal position and moves no
        watermark. Rejected (``too_many_pending``, nothing recorded) when it
        would wait in a scope already holding ``max_pending_candidates``."""
        state = self.state
        candidate_id = candidate["candidate_id"]
        waiting = [source_id for source_id in admission.cited_outcome_ids(candidate) if state.get("outcome", scope_id, source_id) is None]
        index = state.get("candidate_index", scope_id, default=[])
        if waiting and len(index) >= self.config.max_pending_candidates:
            return ApplyResult(rejection=Rejection(
                "too_many_pending",
                f"scope {scope_id!r} already holds {len(index)} candidates waiting for Task Outcomes "
                f"(max_pending_candidates); publish it again once its cited outcomes are in",
            ))
        state.put({"digest": content_digest, "position": candidate["journal_position"]}, "candidate", scope_id, candidate_id)
        self._candidate_scopes[scope_id] = None
        emits: list[Emit] = []
        if not waiting:
            self._decide_candidate(scope_id, candidate, emits)
            return ApplyResult(emits)
        state.put({"candidate": candidate, "waiting_on": waiting}, "candidate_pending", scope_id, candidate_id)
        for source_id in waiting:
            state.append(candidate_id, "candidate_wait", scope_id, source_id)
        bisect.insort(index, [candidate["journal_position"], candidate_id])
        state.put(index, "candidate_index", scope_id)
        self._expire_candidates(scope_id, state.scope(scope_id)["as_of_position"], emits)
        return ApplyResult(emits)

    def _wake_candidates(self, scope_id: str, outcome_id: str, emits: list[Emit]) -> None:
        """The Task Outcome ``outcome_id`` is now known: decide the candidates
        that were waiting for nothing else."""
        state = self.state
        for candidate_id in state.pop_list("candidate_wait", scope_id, outcome_id):
            pending = state.get("candidate_pending", scope_id, candidate_id)
            if pending is None:
                continue
            pending["waiting_on"] = [other for other in pending["waiting_on"] if other != outcome_id]
            if pending["waiting_on"]:
                state.put(pending, "candidate_pending", scope_id, candidate_id)
            else:
                self._decide_candidate(scope_id, self._forget_candidate(scope_id, candidate_id)["candidate"], emits)

    def _forget_candidate(self, scope_id: str, candidate_id: str) -> dict:
        state = self.state
        pending = state.get("candidate_pending", scope_id, candidate_id)
        state.delete("candidate_pending", scope_id, candidate_id)
        state.remove_entries(candidate_id, "candidate_index", scope_id, at=1)
        for source_id in pending["waiting_on"]:
            state.remove_entries(candidate_id, "candidate_wait", scope_id, source_id)
        return pending

    def _expire_candidates(self, scope_id: str, as_of_position: int | None, emits: list[Emit], end_of_input: bool = False) -> None:
        """Decide held candidates whose horizon has passed: the provenance
        horizon counted from the candidate's journal_position on the scope's
        ``as_of_position`` — or, at ``end_of_input`` (``flush``), every held
        candidate."""
        index = self.state.get("candidate_index", scope_id)
        for _, candidate_id in due(index, self.config.provenance_horizon, as_of_position, end_of_input):
            self._decide_candidate(scope_id, self._forget_candidate(scope_id, candidate_id)["candidate"], emits)

    def _decide_candidate(self, scope_id: str, candidate: dict, emits: list[Emit]) -> None:
        """Rules 1–6 on what the ledger knows now; the decision is final."""
        state = self.state
        failure_refs: list[dict] = []
        missing: list[str] = []
        for source_id in admission.cited_outcome_ids(candidate):
            record = state.get("outcome", scope_id, source_id)
            if record is None:
                missing.append(source_id)
            else:
                failure_refs += record.get("failure_refs", [])
        key = admission.signature_key(candidate["content"])
        near = admission.near_duplicates(state, scope_id, key, candidate["artifact_id"], self.config.near_duplicate_threshold) if key else []
        self._emit(emits, ADMISSION_DECISIONS, scope_id, admission.decision(candidate, failure_refs, missing, near))
        if self.hook is not None:
            self.hook.admission_decided(state, scope_id, candidate, emits[-1].value)
