"""contract §8: streaks by journal position, review runs, ReviewCandidates.

For each (scope_id, artifact_ref, signature_key) the terminal verdicts are
ordered by task_outcome_position. Its avoided verdicts cut that history into
*runs*: a run is the recurred verdicts between an opening avoided verdict —
or the start of the revision's history — and the next avoided verdict (or
the end). A run is named by the position of its opening avoided verdict, or
None for the start of history. ``terminal_recurred_streak`` is the length of
the last run (the recurred verdicts after the last avoided one). A late
verdict is inserted by position, never appended: a late recurred lengthens
the run it falls in, a late avoided splits the run it falls in.

Review (rev. 2): every run — the current one or one an avoided verdict has
already closed — reaches the threshold when it holds ≥ threshold recurred
verdicts, whenever they arrive. One ReviewCandidate is published per run
name, ever, when its run first reaches the threshold and the revision's
repair_surface is experience_content, with the failure_refs of the run's
recurred verdicts at publication time. A published candidate is never
withdrawn.

A late avoided verdict that splits a run whose candidate is already
published (decision): the run keeps its name for the recurrences before the
avoided verdict, and its candidate stays published; that name is never
published again, even if late recurrences later bring the shortened run back
to the threshold — one run name, one candidate (candidate_id derives from
it, so a second one would repeat an id with other content). The recurrences
after the avoided verdict form a run with a new name, its position, which
has never been published: it gets its own candidate when it holds ≥
threshold recurred verdicts — at once or later — exactly as in position
order, even though some of its failure refs are also in the first
candidate. So the candidates of a history are those of position order, plus
at most the already-published candidates of runs a late avoided verdict
split (the contract's one exception), and no two candidates share a run
name.

State (JSON values, written explicitly, see ``state.py``):

- ``("streak", scope_id, artifact_id, revision)``: signature_key,
  repair_surface, selected / recurred / avoided counts, ``last_avoided``
  (the name of the current run), ``streak`` (its length), ``reached_threshold`` (a run held
  the review threshold's recurred verdicts at some time), ``full_runs``
  (how many runs hold them now, by position: contract §18 rev. 4) and
  ``full_runs_threshold`` (the threshold it counts for); since revision
  3 (contract §17) also
  ``linked_verdicts`` (terminal verdicts on linked outcomes: unknown =
  selected − linked_verdicts), ``unknown_reasons`` (reason → count, the
  reasons that occurred), ``ambiguous`` (ambiguous matches with the
  revision among the eligible candidates) and ``binding_suspect``;
- ``("avoided_at", scope_id, artifact_id, revision)``: the sorted positions
  of the revision's avoided verdicts, i.e. the run names, a sorted set in
  chunks (``ledger.chunks``, state format 3; chunks ``AVOIDED_CHUNKS``);
  read only for a late verdict or an avoided one;
- ``("published_runs", scope_id, artifact_id, revision)``: the names of its
  runs with a candidate (``HISTORY_START`` for None), a sorted set in
  chunks (``PUBLISHED_CHUNKS``). Format 2 kept them in the streak record's
  ``published`` list, moved here at the revision's next candidate check;
- ``("run", scope_id, artifact_id, revision, start)``: one run's recurred
  verdicts, sorted, each ``[position, task outcome source_id, item_kind,
  item_index]``; ``start`` is the run's name, -1 for the start of history;
  absent when the run has none. The full failure_ref (with its item_digest)
  is read back from the Task Outcome's record only to publish a candidate,
  so a verdict keeps some 30 bytes here, not a ~200-byte ref.

So the state of a revision is proportional to its terminal verdicts, and a
verdict rewrites the streak record and one run record (plus a chunk of the
avoided positions for an avoided verdict, of the run names for a
candidate), as before revision 2 it rewrote the streak record holding the
current run.

Records written before revision 2 held only the current run (``run``:
``[position, failure_ref]`` pairs); :func:`revision_record` converts them,
and verdicts before their ``last_avoided`` (``tracked_from``) keep the
revision 1 behaviour — the runs closed before the upgrade were not kept. A
state rebuild (docs/upgrading.md) tracks every run.
"""

from __future__ import annotations

import bisect

from recurrence_ledger.ledger import chunks
from recurrence_ledger.ledger.normalize import digest
from recurrence_ledger.ledger.severity import CRITICAL
from recurrence_ledger.ledger.state import LedgerState
from recurrence_ledger.ledger.verdicts import SUSPECT_REASONS

#: Store key part of the run opened by the start of a revision's history
#: (run name None): positions are ≥ 0.
HISTORY_START = -1
#: Record name of the chunks of a revision's avoided positions (``("avoided_at", …)``).
AVOIDED_CHUNKS = "avoided_chunk"
#: Record name of the chunks of a revision's run names with a candidate (``("published_runs", …)``).
PUBLISHED_CHUNKS = "published_chunk"


def review_candidate_id(scope_id: str, artifact_ref: dict, signature_key: str, run_start_position: int | None) -> str:
    """candidate_id = digest of ``{scope_id, artifact_ref, signature_key,
    run_start_position}`` (contract §8: deterministic from scope, revision,
    signature key and run)."""
    return digest(
        {
            "scope_id": scope_id,
            "artifact_ref": artifact_ref,
            "signature_key": signature_key,
            "run_start_position": run_start_position,
        }
    )


def _parts(scope_id: str, artifact_ref: dict) -> tuple:
    return (scope_id, artifact_ref["artifact_id"], artifact_ref["revision"])


def _run_key(start: int | None) -> int:
    return HISTORY_START if start is None else start


def _entry(position: int, failure_ref: dict) -> list:
    """A run entry: what identifies a recurred verdict's failure item."""
    return [position, failure_ref["task_outcome_ref"]["source_id"], failure_ref["item_kind"], failure_ref["item_index"]]


def revision_record(state: LedgerState, parts: tuple, signature_key: str, repair_surface: str, severity: str | None = None) -> dict:
    """The per-revision record (counts, current run, published runs), new if
    absent; a record written before revision 2 is converted (its current run
    moves to its run record). ``severity`` (contract §22): the revision's,
    kept in the record when it has one (an unrated record is as before
    revision 4)."""
    record = state.get(*parts)
    if record is None:
        record = {
            "signature_key": signature_key,
            "repair_surface": repair_surface,
            "last_avoided": None,
            "streak": 0,
            "selected": 0,
            "recurred": 0,
            "avoided": 0,
            "linked_verdicts": 0,
        }
        if severity is not None:
            record["severity"] = severity
        return record
    if severity is not None and "severity" not in record:
        record["severity"] = severity
    if "linked_verdicts" not in record:
        record["linked_verdicts"] = linked_verdicts(record)
    if "run" in record:  # revision 1 layout: only the current run was kept
        state.forget_full_run_starts(parts[1:])  # its runs change underneath
        legacy = record.pop("run")
        last = record["last_avoided"]
        _put_run(state, parts[1:], last, [_entry(position, ref) for position, ref in legacy])
        if last is not None:
            chunks.insert(state.store, last, AVOIDED_CHUNKS, "avoided_at", *parts[1:])
            record["tracked_from"] = last
        record["streak"] = len(legacy)
    return record


def linked_verdicts(record: dict) -> int:
    """The revision's terminal verdicts on linked outcomes (contract §17:
    its unknown is selected − this). A record written before revision 3
    did not count them: its verdicts are taken as verdicts on linked
    outcomes, as many as it has selections, so its unknown is selected −
    terminal verdicts, never below 0."""
    if "linked_verdicts" in record:
        return record["linked_verdicts"]
    return min(record.get("selected", 0), record.get("recurred", 0) + record.get("avoided", 0))


def runs_at_threshold(state: LedgerState, scope_id: str, artifact_id: str, revision: int, record: dict, threshold: int) -> int:
    """How many runs of the revision hold at least ``threshold`` recurred
    verdicts now, by position (contract §8 "reaches the threshold"; §18
    rev. 4: a fix revision with one has failed). ``record`` is its streak
    record, which keeps the count for the threshold its verdicts were
    recorded with (``full_runs`` at ``full_runs_threshold``); for another
    threshold, or a record written before the count, the runs are read.
    A record of the revision-1 layout (``tracked_from``) did not keep the
    runs closed before the upgrade: its ``reached_threshold`` flag counts
    as one such run."""
    if record.get("full_runs_threshold") == threshold:
        return record["full_runs"]
    count = len(full_run_starts(state, (scope_id, artifact_id, revision), threshold))
    if not count and "tracked_from" in record and record.get("reached_threshold"):
        count = 1
    return count


def runs_reaching_threshold(state: LedgerState, scope_id: str, artifact_id: str, revision: int, record: dict, threshold: int) -> list[int | None]:
    """The names of the revision's runs that hold at least ``threshold``
    recurred verdicts now, by position (contract §8 "reaches the
    threshold"), oldest first; None names the run at the start of its
    history. Published on its RevisionStatistics row so that readers never
    compare a run with a threshold of their own. Reads no run when the
    record counts none (``full_runs`` at ``threshold``), and otherwise
    reads the runs once per revision and threshold (:func:`full_run_starts`)."""
    if record.get("full_runs_threshold") == threshold and not record.get("full_runs"):
        return []
    return list(full_run_starts(state, (scope_id, artifact_id, revision), threshold))


def full_run_starts(state: LedgerState, parts: tuple, threshold: int) -> list[int | None]:
    """The names of the runs of revision ``parts`` (scope_id, artifact_id,
    revision) holding ≥ ``threshold`` recurred verdicts, oldest first (None:
    the start of history). Read from the run records once, then kept in
    ``LedgerState``'s cache, which :func:`record_verdict` keeps in step with
    every verdict (so a RevisionStatistics row of a revision with a long
    history reads no run: before, each row read them all). Do not mutate."""
    starts = state.cached_full_run_starts(parts, threshold)
    if starts is None:
        names = [None, *chunks.values(state.store, AVOIDED_CHUNKS, "avoided_at", *parts)]
        starts = [start for start in names if len(_get_run(state, parts, start)) >= threshold]
        state.cache_full_run_starts(parts, threshold, starts)
    return starts


def _set_full(state: LedgerState, parts: tuple, threshold: int, start: int | None, full: bool) -> None:
    """Run ``start`` of revision ``parts`` now holds ≥ ``threshold``
    recurred verdicts (``full``) or not: kept in the cached names of
    :func:`full_run_starts`, in run order, when they are cached."""
    starts = state.cached_full_run_starts(parts, threshold)
    if starts is None:
        return
    at = bisect.bisect_left(starts, _run_key(start), key=_run_key)
    present = at < len(starts) and starts[at] == start
    if full and not present:
        starts.insert(at, start)
    elif present and not full:
        del starts[at]


def run_name_at(state: LedgerState, parts: tuple, position: int, last: int | None) -> int | None:
    """The name of the run a verdict at ``position`` of revision ``parts``
    (scope_id, artifact_id, revision) falls in: the position of the avoided
    verdict before it, None when there is none; ``last`` is the name of the
    current run (the streak record's ``last_avoided``), so a verdict after
    it reads nothing."""
    if last is None or position > last:
        return last
    return chunks.before(state.store, position, AVOIDED_CHUNKS, "avoided_at", *parts)


def _first_candidate(state: LedgerState, parts: tuple, record: dict, run_name: int | None) -> bool:
    """Whether run ``run_name`` of revision ``parts`` has no candidate yet;
    if so it is recorded as having one. A streak record of format 2 keeps
    the names in its ``published`` list: moved to the chunked set first."""
    names = ("published_runs", *parts)
    for name in record.pop("published", ()):
        chunks.insert(state.store, _run_key(name), PUBLISHED_CHUNKS, *names)
    return chunks.insert(state.store, _run_key(run_name), PUBLISHED_CHUNKS, *names)


def streak_length(record: dict) -> int:
    """``terminal_recurred_streak`` of a revision record."""
    return record["streak"] if "streak" in record else len(record["run"])


def _get_run(state: LedgerState, parts: tuple, start: int | None) -> list:
    return state.get("run", *parts, _run_key(start), default=[])


def _put_run(state: LedgerState, parts: tuple, start: int | None, entries: list) -> None:
    state.put_nonempty(entries, "run", *parts, _run_key(start))


def count_selected(
    state: LedgerState, scope_id: str, artifact_ref: dict, signature_key: str, repair_surface: str,
    unknown_reason: str | None = None, scope: dict | None = None, threshold: int = 0, severity: str | None = None,
) -> None:
    """One more selected event for a revision (its yield figures, contract
    §14; the streak is unaffected). ``unknown_reason``: the selection gets
    no terminal verdict, for this reason (contract §17): it is counted for
    the revision and in ``scope``'s ``unknown_reasons``, and the revision's
    ``binding_suspect`` is re-decided with the review ``threshold``.
    ``severity``: the revision's (contract §22), kept in its record."""
    parts = ("streak", *_parts(scope_id, artifact_ref))
    record = revision_record(state, parts, signature_key, repair_surface, severity)
    record["selected"] = record.get("selected", 0) + 1
    if unknown_reason is not None:
        _count(record.setdefault("unknown_reasons", {}), unknown_reason)
        _count(scope.setdefault("unknown_reasons", {}), unknown_reason)
        _decide_suspect(record, scope, threshold)
    state.put(record, *parts)
    state.forget_top(scope_id, artifact_ref)


def count_ambiguous(
    state: LedgerState, scope_id: str, artifact_ref: dict, signature_key: str, repair_surface: str, severity: str | None = None,
) -> None:
    """One more ambiguous RecurrenceMatch with the revision among its
    eligible candidates (contract §17); the revision gets a row in the
    revisions view even without a selection or a verdict."""
    parts = ("streak", *_parts(scope_id, artifact_ref))
    record = revision_record(state, parts, signature_key, repair_surface, severity)
    _count(record, "ambiguous")
    state.put(record, *parts)
    state.forget_top(scope_id, artifact_ref)


def _count(counts: dict, name: str) -> None:
    counts[name] = counts.get(name, 0) + 1


def suspect_unknowns(unknown_reasons: dict) -> int:
    """How many of a revision's unknown selections (``unknown_reasons``:
    reason → count) say its verification binding proves nothing: an empty
    condition or a ``check_…`` reason (contract §17)."""
    return sum(count for reason, count in unknown_reasons.items() if reason in SUSPECT_REASONS)


def is_binding_suspect(record: dict, threshold: int) -> bool:
    """contract §17: the revision has no terminal verdict at all and at
    least ``threshold`` (the review threshold) of its unknown selections
    have a suspect reason (:func:`suspect_unknowns`)."""
    return (
        record.get("recurred", 0) + record.get("avoided", 0) == 0
        and suspect_unknowns(record.get("unknown_reasons", {})) >= threshold
    )


def _decide_suspect(record: dict, scope: dict, threshold: int) -> None:
    """Keep the revision's ``binding_suspect`` and the scope's
    ``binding_suspects`` count in step with its counts."""
    suspect = is_binding_suspect(record, threshold)
    if suspect != record.get("binding_suspect", False):
        record["binding_suspect"] = suspect
        scope["binding_suspects"] = scope.get("binding_suspects", 0) + (1 if suspect else -1)


def record_verdict(
    state: LedgerState,
    scope: dict,
    scope_id: str,
    artifact_ref: dict,
    signature_key: str,
    repair_surface: str,
    event: str,
    position: int,
    failure_ref: dict | None,
    threshold: int,
    linked: bool = False,
    severity: str | None = None,
    review_at: int | None = None,
) -> list[dict]:
    """Apply one terminal verdict (``event`` is "recurred" or "avoided") at
    ``position`` to the revision's runs; update the ranking and the scope's
    ``needing_review`` count. ``linked``: the verdict is on a linked outcome
    (it settles one of the revision's selections). A revision with a
    terminal verdict is never a binding suspect (contract §17). Returns the
    ReviewCandidate records to publish (zero or one: only the run the
    verdict lengthened, or the run a late avoided verdict split off, can
    newly reach the threshold).

    ``threshold`` is the deployment's review threshold (``binding_suspect``
    keeps it); ``review_at`` the revision's own (contract §22: the critical
    review threshold for a critical revision; ``threshold`` when None),
    which decides ``needing_review``, its candidates and whether a run
    reached it. ``severity``: the revision's, kept in its record.
    """
    parts = _parts(scope_id, artifact_ref)
    record = revision_record(state, ("streak", *parts), signature_key, repair_surface, severity)
    own = threshold if review_at is None else review_at
    if record.get("full_runs_threshold") != own:
        record["full_runs"] = len(full_run_starts(state, parts, own))
        record["full_runs_threshold"] = own
    record[event] = record.get(event, 0) + 1
    if linked:
        record["linked_verdicts"] += 1
    _decide_suspect(record, scope, threshold)
    state.forget_top(scope_id, artifact_ref)
    old = record["streak"]
    last = record["last_avoided"]
    changed: tuple[int | None, list] | None = None  # (run name, its entries) that grew or was split off

    if position < record.get("tracked_from", -1):
        pass  # before a revision-1 record's current run: those runs were not kept
    elif event == "recurred":
        start = run_name_at(state, parts, position, last)
        entries = _get_run(state, parts, start)
        bisect.insort(entries, _entry(position, failure_ref), key=lambda entry: entry[0])
        _put_run(state, parts, start, entries)
        if len(entries) == own:
            record["full_runs"] += 1
            _set_full(state, parts, own, start, True)
        if start == last:
            record["streak"] = len(entries)
        changed = (start, entries)
    else:
        start = chunks.before(state.store, position, AVOIDED_CHUNKS, "avoided_at", *parts)  # the run this verdict splits
        chunks.insert(state.store, position, AVOIDED_CHUNKS, "avoided_at", *parts)
        entries = _get_run(state, parts, start)
        cut = bisect.bisect_left(entries, position, key=lambda entry: entry[0])
        if cut < len(entries):  # recurrences after it (arrived earlier) move to the new run
            _put_run(state, parts, start, entries[:cut])
            _put_run(state, parts, position, entries[cut:])
            full = (cut >= own) + (len(entries) - cut >= own)
            record["full_runs"] += full - (len(entries) >= own)
            _set_full(state, parts, own, start, cut >= own)
            _set_full(state, parts, own, position, len(entries) - cut >= own)
        if last is None or position > last:
            record["last_avoided"] = position
            record["streak"] = len(entries) - cut
        changed = (position, entries[cut:])
    new = record["streak"]

    state.set_streak_rank(scope, scope_id, artifact_ref, signature_key, old, new)
    if old < own <= new:
        scope["needing_review"] += 1
    elif new < own <= old:
        scope["needing_review"] -= 1

    candidates = []
    if changed is not None and len(changed[1]) >= own:
        record["reached_threshold"] = True  # read only for a revision-1 layout record (runs_at_threshold)
    if changed is not None and repair_surface == "experience_content":
        run_name, entries = changed
        if len(entries) >= own and _first_candidate(state, parts, record, run_name):
            candidates.append(review_candidate(
                state, scope_id, artifact_ref, signature_key, repair_surface, run_name, entries, own, record.get("severity") == CRITICAL,
            ))
    state.put(record, "streak", *parts)
    return candidates


def review_candidate(
    state: LedgerState, scope_id: str, artifact_ref: dict, signature_key: str, repair_surface: str,
    run_name: int | None, entries: list, threshold: int, critical: bool = False,
) -> dict:
    """The ReviewCandidate of run ``run_name`` whose recurred verdicts are
    ``entries`` (contract §8); ``critical``: ``threshold`` is the critical
    review threshold (§22), which the reason names: a critical revision's
    candidate says so whatever the two thresholds are."""
    count = len(entries)
    which = "critical review threshold" if critical else "review threshold"
    return {
        "candidate_id": review_candidate_id(scope_id, artifact_ref, signature_key, run_name),
        "scope_id": scope_id,
        "artifact_ref": artifact_ref,
        "signature_key": signature_key,
        "repair_surface": repair_surface,
        "streak": count,
        "run_start_position": run_name,
        "reason": (
            f"recurred {count} times in a row with no avoided verdict in between "
            f"({which} {threshold}) for signature '{signature_key}'"
        ),
        "failure_refs": [_failure_ref(state, scope_id, entry) for entry in entries],
    }


def _failure_ref(state: LedgerState, scope_id: str, entry: list) -> dict:
    """The TaskOutcomeItemRef of a run entry, from its Task Outcome's record
    (which keeps the refs of its failure items, ``processor.apply``)."""
    _, source_id, item_kind, item_index = entry
    for ref in state.get("outcome", scope_id, source_id)["failure_refs"]:
        if ref["item_kind"] == item_kind and ref["item_index"] == item_index:
            return ref
    raise LookupError(f"no failure item {item_kind}[{item_index}] recorded for Task Outcome {source_id!r} in {scope_id!r}")
