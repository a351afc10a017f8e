"""contract §18 (rev. 3): review decisions and the repair effect.

A **ReviewDecision** (``review-decisions``) records a human decision on a
ReviewCandidate (§8). It is applied to its candidate, waits for a candidate
not yet published, or goes to dead-letter; it never changes a ledger fact
(matches, observations, verdicts, streaks, candidates) and, like an
ExperienceCandidate, uses up no journal position and moves no
``as_of_position``.

A **ReviewStatus** (the ``review-status`` view, one row per candidate) says
where each candidate stands — open, superseded, approved or rejected — and,
for an approved or superseded one, how its fix revision F fares: pending,
held, recurring or failed, with F's figures. Rows are published like the
other views (§8): at the end of a batch, once per changed key.

``ReviewLoop`` is a part of ``LedgerProcessor`` (a mixin, like
``OutcomeDecisions`` and ``CandidateAdmission``): its methods read and write
the processor's state and publish through its ``_emit``. State (JSON values,
written explicitly, see ``state.py``):

- ``("review", scope_id, candidate_id)``: a published candidate — its
  revision, signature_key, streak, ``position`` (the journal position of
  the Task Outcome whose verdict published it), the applied ``decision``
  and named ``fix`` (or None), what its row counts in the scope's
  ``reviews`` and ``repairs`` (``counted``; a rejected row with a reason
  code counts it in ``rejected_by_reason`` too, contract §24: a third
  entry, the code kept as ``reason_code``) and the digest of its last
  published row (``published``);
- ``("reviews", scope_id, artifact_id)``: the candidate ids of an artifact,
  in publication order (whose rows a new revision or a revision's new
  figures may change), an appended list in chunks (``ledger.chunks``,
  state format 3) whose full chunks are ``("review_ids", scope_id,
  artifact_id, number)`` records;
- ``("review_decision", scope_id, decision_id)``: the identity of an
  applied or waiting decision (``digest``, ``position``), for duplicates
  and identity conflicts (§3); a decision dead-lettered leaves none;
- ``("review_pending", scope_id, decision_id)``: a waiting decision and
  where it was read (``intake.origin``: coordinates and bytes, to
  dead-letter it with its own), ``("review_pending_index", scope_id)`` its
  ``[position, decision_id]`` in order and ``("review_wait", scope_id,
  candidate_id)`` the decisions waiting for a candidate, in arrival order.

The scope record counts the rows by status (``reviews``) and by repair
status (``repairs``): ScopeStatistics' figures of §18.
"""

from __future__ import annotations

import base64
import bisect
from collections.abc import Callable, Iterable

from recurrence_ledger.catalogue import REVIEW_DECISIONS, REVIEW_STATUS
from recurrence_ledger.ledger import chunks, withheld
from recurrence_ledger.ledger.candidates import due
from recurrence_ledger.ledger.config import LedgerConfig, review_threshold_of
from recurrence_ledger.ledger.deadletter import Coordinates, dead_letter
from recurrence_ledger.ledger.hooks import PolicyHook
from recurrence_ledger.ledger.normalize import canonical_json, digest
from recurrence_ledger.ledger.results import ApplyResult, Emit, Rejection
from recurrence_ledger.ledger.state import LedgerState, experience_ref
from recurrence_ledger.ledger.statistics import figures
from recurrence_ledger.ledger.streaks import runs_at_threshold, streak_length

#: Record name of the full chunks of an artifact's candidate ids (``("reviews", …)``).
REVIEW_IDS = "review_ids"
#: The fields of an applied decision a ReviewStatus shows (``decision``).
APPLIED_FIELDS: tuple[str, ...] = ("decision_id", "decision", "reason", "reviewer", "decided_at", "journal_position")


def review_status_key(scope_id: str, candidate_id: str) -> str:
    """Record key of a ``review-status`` row: the canonical JSON of
    ``{"candidate_id": …, "scope_id": …}`` — one key per candidate, so the
    compacted topic keeps each candidate's latest row (contract §18)."""
    return canonical_json({"candidate_id": candidate_id, "scope_id": scope_id}).decode("utf-8")


def repair_state(record: dict | None, full_runs: int) -> str:
    """The repair status of a fix revision F (contract §18, "Repair status
    by position", rev. 4) from its streak record (None: unknown, or no
    selection nor verdict yet) and ``full_runs``, how many runs of F hold
    F's review threshold now (``streaks.runs_at_threshold``): ``failed``
    with one, else ``pending`` without a terminal verdict, ``held`` when
    the latest terminal verdict by position is avoided (streak 0),
    ``recurring`` otherwise (streak ≥ 1). Every figure is by position, so
    the final status is the same in every arrival order."""
    if record is None:
        return "pending"
    if full_runs:
        return "failed"
    if record.get("recurred", 0) + record.get("avoided", 0) == 0:
        return "pending"
    return "held" if streak_length(record) == 0 else "recurring"


def review_status(state: LedgerState, scope_id: str, candidate_id: str, record: dict, config: LedgerConfig) -> dict:
    """The ReviewStatus row of a published candidate (its ``review``
    record), from what the state knows now: the artifact's known revisions
    (its ``history``), the applied decision and the fix revision F's streak
    record, its runs measured against F's review threshold
    (``review_threshold_of``). ``fix_revision`` without a named one is the lowest known
    revision above the candidate's, so its final value does not depend on
    the order in which the revisions arrived."""
    artifact_id, revision = record["artifact_id"], record["revision"]
    higher = [known for known, _ in state.get("history", scope_id, artifact_id, default=[]) if known > revision]
    lowest_higher = experience_ref(artifact_id, min(higher)) if higher else None
    decision = record["decision"]
    if decision is not None:
        status = decision["decision"]
    else:
        status = "superseded" if lowest_higher is not None else "open"
    fix = None
    if status == "approved":
        fix = record["fix"] or lowest_higher
    elif status == "superseded":
        fix = lowest_higher
    repair = None
    if status in ("approved", "superseded"):
        streak_record = state.get("streak", scope_id, fix["artifact_id"], fix["revision"]) if fix is not None else None
        numbers = figures(state, scope_id, fix["artifact_id"], fix["revision"]) if streak_record is not None else {}
        full_runs = 0
        if streak_record is not None:
            experience = state.get("experience", scope_id, fix["artifact_id"], fix["revision"])
            threshold = review_threshold_of(config, experience["failure"] if experience is not None else None)
            full_runs = runs_at_threshold(state, scope_id, fix["artifact_id"], fix["revision"], streak_record, threshold)
        repair = {
            "status": repair_state(streak_record, full_runs),
            "selected": numbers.get("selected", 0),
            "recurred": numbers.get("recurred", 0),
            "avoided": numbers.get("avoided", 0),
            "unknown": numbers.get("unknown", 0),
            "terminal_recurred_streak": streak_length(streak_record) if streak_record is not None else 0,
            # contract §21.4: the fix revision's effect verdict
            "effect": withheld.effect_verdict(state, scope_id, fix["artifact_id"], fix["revision"]) if fix is not None else None,
        }
    return {
        "scope_id": scope_id,
        "candidate_id": candidate_id,
        "artifact_ref": experience_ref(artifact_id, revision),
        "signature_key": record["signature_key"],
        "streak": record["streak"],
        "status": status,
        "decision": decision,
        "fix_revision": fix,
        "repair": repair,
        "reason_code": record.get("reason_code") if status == "rejected" else None,  # contract §24: the decision's
    }


def candidates_by_revision(state: LedgerState, scope_id: str, artifact_id: str) -> dict[int, list[str]]:
    """The candidate ids of an artifact by the revision they were published
    for: read from their ``review`` records once, then kept in
    ``LedgerState``'s cache (``_on_review_candidate`` adds each new one).
    Do not mutate."""
    known = state.cached_candidate_revisions(scope_id, artifact_id)
    if known is None:
        known = {}
        for candidate_id in chunks.entries(state.store, REVIEW_IDS, "reviews", scope_id, artifact_id):
            known.setdefault(state.get("review", scope_id, candidate_id)["revision"], []).append(candidate_id)
        state.cache_candidate_revisions(scope_id, artifact_id, known)
    return known


class ReviewLoop:
    """The review part of ``LedgerProcessor``: published candidates, the
    decisions applied to them or waiting for them, and the ReviewStatus
    rows (module docstring)."""

    state: LedgerState
    config: LedgerConfig
    hook: PolicyHook | None
    #: Scopes that received a waiting decision: ``flush`` dead-letters what they still hold.
    _decision_scopes: dict[str, None]
    #: The batch's artifacts whose candidates' rows may have changed: scope_id → artifact ids.
    _review_dirty: dict[str, dict[str, None]]
    #: The batch's candidates whose own row may have changed: scope_id → candidate ids.
    _candidates_dirty: dict[str, dict[str, None]]
    _emit: Callable[[list[Emit], str, str, dict], None]

    # -- candidates ---------------------------------------------------------
    def _on_review_candidate(self, scope_id: str, candidate: dict, position: int, emits: list[Emit]) -> None:
        """A ReviewCandidate was just published by the verdict of the Task
        Outcome at ``position``: keep what its row needs, and apply the
        decisions that waited for it."""
        state = self.state
        ref, candidate_id = candidate["artifact_ref"], candidate["candidate_id"]
        state.put(
            {
                "artifact_id": ref["artifact_id"], "revision": ref["revision"], "signature_key": candidate["signature_key"],
                "streak": candidate["streak"], "position": position, "decision": None, "fix": None, "counted": None,
                "published": None,
            },
            "review", scope_id, candidate_id,
        )
        chunks.append(state.store, candidate_id, REVIEW_IDS, "reviews", scope_id, ref["artifact_id"])
        known = state.cached_candidate_revisions(scope_id, ref["artifact_id"])
        if known is not None:
            known.setdefault(ref["revision"], []).append(candidate_id)
        self._mark_candidate(scope_id, candidate_id)
        for decision_id in state.pop_list("review_wait", scope_id, candidate_id):
            pending = self._forget_decision(scope_id, decision_id)
            rejection = self._apply_decision(scope_id, pending["decision"])
            if rejection is not None:
                state.delete("review_decision", scope_id, decision_id)
                emits.append(self._dead_letter(pending, rejection))

    def _mark_review(self, scope_id: str, artifact_id: str) -> None:
        """The rows of ``artifact_id``'s candidates may change (a revision of
        it arrived: a candidate may be superseded, or its fix revision be
        another): recompute them at the end of the batch."""
        self._review_dirty.setdefault(scope_id, {})[artifact_id] = None

    def _mark_candidate(self, scope_id: str, candidate_id: str) -> None:
        """The row of one candidate may change (it was just published, or a
        decision was applied to it): compute it at the end of the batch."""
        self._candidates_dirty.setdefault(scope_id, {})[candidate_id] = None

    # -- decisions ------------------------------------------------------------
    def _on_decision(self, scope_id: str, decision: dict, content_digest: str, origin: dict | None) -> ApplyResult:
        """A new ReviewDecision (its identity is new): apply it to its
        candidate, hold it until the candidate is published, or reject it
        (contract §18). Nothing is recorded for a rejected one. ``origin``:
        where it was read (``intake.origin``), kept while it waits; None
        (a direct call) keeps the topic, the scope as key and the decision's
        canonical JSON as its bytes."""
        state = self.state
        candidate_id, position = decision["candidate_id"], decision["journal_position"]
        if state.get("review", scope_id, candidate_id) is not None:
            rejection = self._apply_decision(scope_id, decision)
            if rejection is not None:
                return ApplyResult(rejection=rejection)
            state.put({"digest": content_digest, "position": position}, "review_decision", scope_id, decision["decision_id"])
            self._decision_taken(scope_id, decision)
            return ApplyResult()
        as_of, horizon = state.scope(scope_id)["as_of_position"], self.config.provenance_horizon
        if as_of is not None and horizon is not None and position + horizon <= as_of:
            return ApplyResult(rejection=_not_published(scope_id, candidate_id, _horizon_passed(position, horizon, as_of)))
        index = state.get("review_pending_index", scope_id, default=[])
        if len(index) >= self.config.max_pending_candidates:
            return ApplyResult(rejection=Rejection(
                "too_many_pending",
                f"scope {scope_id!r} already holds {len(index)} review decisions waiting for their candidates "
                f"(max_pending_candidates); publish it again once its candidate is published",
            ))
        state.put({"digest": content_digest, "position": position}, "review_decision", scope_id, decision["decision_id"])
        if origin is None:
            origin = {"topic": REVIEW_DECISIONS, "partition": None, "offset": None, "key": scope_id,
                      "raw": base64.b64encode(canonical_json(decision)).decode("ascii")}
        state.put({"decision": decision, "origin": origin}, "review_pending", scope_id, decision["decision_id"])
        state.append(decision["decision_id"], "review_wait", scope_id, candidate_id)
        bisect.insort(index, [position, decision["decision_id"]])
        state.put(index, "review_pending_index", scope_id)
        self._decision_scopes[scope_id] = None
        self._decision_taken(scope_id, decision)
        return ApplyResult()

    def _decision_taken(self, scope_id: str, decision: dict) -> None:
        """Tell the policy hook (``ledger.hooks``) of a decision applied or held."""
        if self.hook is not None:
            self.hook.review_decision_taken(self.state, scope_id, decision)

    def _apply_decision(self, scope_id: str, decision: dict) -> Rejection | None:
        """Apply ``decision`` to its published candidate, or say why not:
        ``unknown_candidate`` when the candidate was published at a later
        position than the decision's (a forward reference, §16),
        ``already_decided`` when it has a decision, ``invalid_value`` when
        ``fix_revision`` is no higher revision of the candidate's artifact."""
        state = self.state
        candidate_id, position = decision["candidate_id"], decision["journal_position"]
        record = state.get("review", scope_id, candidate_id)
        if record["position"] > position:
            return Rejection("unknown_candidate", (
                f"review candidate {candidate_id} of scope {scope_id!r} was published at journal position {record['position']}, "
                f"after the decision's position {position}: a decision cannot refer forward (contract §16, §18)"
            ))
        if record["decision"] is not None:
            first = record["decision"]
            return Rejection("already_decided", (
                f"review candidate {candidate_id} of scope {scope_id!r} was already {first['decision']} by decision "
                f"{first['decision_id']!r}; the first decision stands"
            ))
        fix = decision["fix_revision"]
        if fix is not None and (fix["artifact_id"] != record["artifact_id"] or fix["revision"] <= record["revision"]):
            return Rejection("invalid_value", (
                f"fix_revision {fix['artifact_id']!r} revision {fix['revision']} is not a higher revision of the candidate's "
                f"artifact {record['artifact_id']!r} (revision {record['revision']})"
            ))
        record["decision"] = {name: decision[name] for name in APPLIED_FIELDS}
        record["fix"] = fix
        if decision.get("reason_code") is not None:  # contract §24: counted with the rejected row
            record["reason_code"] = decision["reason_code"]
        state.put(record, "review", scope_id, candidate_id)
        self._mark_candidate(scope_id, candidate_id)
        return None

    def _forget_decision(self, scope_id: str, decision_id: str) -> dict:
        """Remove a waiting decision from the pending records; return it."""
        state = self.state
        pending = state.get("review_pending", scope_id, decision_id)
        state.delete("review_pending", scope_id, decision_id)
        state.remove_entries(decision_id, "review_pending_index", scope_id, at=1)
        state.remove_entries(decision_id, "review_wait", scope_id, pending["decision"]["candidate_id"])
        return pending

    def _expire_decisions(self, scope_id: str, as_of_position: int | None, emits: list[Emit], end_of_input: bool = False) -> None:
        """Dead-letter the waiting decisions whose candidate did not come in
        time (``unknown_candidate``): the scope's ``as_of_position`` reached
        their position plus the provenance horizon — or, at
        ``end_of_input`` (``flush``), every one still waiting."""
        horizon = self.config.provenance_horizon
        for position, decision_id in due(self.state.get("review_pending_index", scope_id), horizon, as_of_position, end_of_input):
            pending = self._forget_decision(scope_id, decision_id)
            self.state.delete("review_decision", scope_id, decision_id)
            why = "the input ended before it was published" if end_of_input else _horizon_passed(position, horizon, as_of_position)
            emits.append(self._dead_letter(pending, _not_published(scope_id, pending["decision"]["candidate_id"], why)))

    @staticmethod
    def _dead_letter(pending: dict, rejection: Rejection) -> Emit:
        """The DeadLetter of a decision that waited, with the coordinates and
        bytes it was read with (``pending["origin"]``)."""
        origin = pending["origin"]
        coordinates = Coordinates(origin["topic"], origin["partition"], origin["offset"], origin["key"])
        return dead_letter(coordinates, base64.b64decode(origin["raw"]), rejection.reason, rejection.message)

    # -- the view -----------------------------------------------------------
    def _review_rows(self, scope: dict, scope_id: str, marked: Iterable[str], candidates: Iterable[str],
                     revisions: Iterable[tuple[str, int]], emits: list[Emit]) -> None:
        """End of a batch (``end_batch``): the ReviewStatus rows that differ
        from the last ones published, in candidate_id order, and the scope's
        ``reviews`` and ``repairs`` counts kept in step (in ``scope``, which
        the caller writes). A row depends on its artifact's known revisions,
        its decision and the figures of its fix revision, always a higher
        revision of its artifact (:func:`review_status`), so only these rows
        are computed again: every candidate of the ``marked`` artifacts (a
        revision of theirs arrived, ``_mark_review``), the ``candidates``
        just published or decided (``_mark_candidate``), and the candidates
        of revisions below one of ``revisions`` (the ``(artifact_id,
        revision)`` whose figures changed) — all of an artifact's candidates
        the first time after the state was read. A revision that keeps
        failing, with a candidate per run, so costs nothing here per verdict
        or new candidate (before, each looked at all of its candidates
        again)."""
        state = self.state
        candidate_ids = {cid for artifact_id in marked for cid in chunks.entries(state.store, REVIEW_IDS, "reviews", scope_id, artifact_id)}
        candidate_ids.update(candidates)
        highest: dict[str, int] = {}
        for artifact_id, revision in revisions:
            if artifact_id not in marked and revision > highest.get(artifact_id, 0):
                highest[artifact_id] = revision
        for artifact_id, top in highest.items():
            # The first look at an artifact since its state was read computes
            # every row of it, as before: a row published by an earlier
            # release (without a field added since) is published again at
            # the next batch that touches its artifact (docs/upgrading.md).
            first = state.cached_candidate_revisions(scope_id, artifact_id) is None
            for revision, below in candidates_by_revision(state, scope_id, artifact_id).items():
                if first or revision < top:
                    candidate_ids.update(below)
        for candidate_id in sorted(candidate_ids):
            record = state.get("review", scope_id, candidate_id)
            row = review_status(state, scope_id, candidate_id, record, self.config)
            published = digest(row)
            if record["published"] == published:
                continue
            counted = [row["status"], row["repair"]["status"] if row["repair"] is not None else None]
            code = record.get("reason_code") if row["status"] == "rejected" else None
            if code is not None:  # contract §24: the third count, kept only when there is one
                counted.append(code)
            before = record["counted"] or [None, None]
            _move(scope, "reviews", before[0], counted[0])
            _move(scope, "repairs", before[1], counted[1])
            _move(scope, "rejected_by_reason", before[2] if len(before) > 2 else None, code)
            record["counted"], record["published"] = counted, published
            state.put(record, "review", scope_id, candidate_id)
            self._emit(emits, REVIEW_STATUS, review_status_key(scope_id, candidate_id), row)


def _move(scope: dict, figure: str, old: str | None, new: str | None) -> None:
    """One row leaves count ``old`` and joins ``new`` of the scope's
    ``figure`` (``reviews`` or ``repairs``); None is no count."""
    if old == new:
        return
    counts = scope.setdefault(figure, {})
    if old is not None:
        counts[old] -= 1
    if new is not None:
        counts[new] = counts.get(new, 0) + 1


def _not_published(scope_id: str, candidate_id: str, why: str) -> Rejection:
    """``unknown_candidate``: the decision's candidate is not published, ``why``."""
    return Rejection("unknown_candidate", f"review candidate {candidate_id} is not known in scope {scope_id!r}: {why}")


def _horizon_passed(position: int, horizon: int, as_of: int) -> str:
    return f"the scope's as_of_position {as_of} reached the decision's position {position} plus the provenance horizon {horizon}"
