"""contract §23: signature patterns across the scopes of a pattern group.

Two stages, as on Kafka (contract §23.5):

- the **scope stage** is ``LedgerProcessor``: a recurred
  RecurrenceObservation marks its (scope, signature_key), and
  ``LedgerProcessor.contributions`` — called by the runner at the end of a
  batch, like ``end_batch`` — returns, for every marked pair, the scope's
  new absolute count of recurred verdicts with the key as a
  :func:`contribution` (a ``PatternContribution`` keyed by
  :func:`pattern_key`). A HoldoutObservation (§21) is no
  RecurrenceObservation and marks nothing;
- the **pattern stage** is :class:`PatternStage`, keyed by ``{group,
  signature_key}``: it keeps the latest count of each (scope, key),
  publishes a ``PatternCandidate`` fact when a key's ``scope_count`` first
  reaches the pattern threshold, and the ``SignaturePattern`` view of every
  key a batch changed at its end (at most once per batch per key, §8).

A scope's count only grows (verdicts are never withdrawn), so "the latest
count" is the highest one seen: a contribution lower than or equal to the
known count changes nothing, whatever order the counts of different scopes
arrive in — so the final view and the set of candidates are the same in
every arrival order and on any number of partitions (§23.3), which the
embedded runner and the Kafka worker both rely on.

State of the scope stage: ``("pattern_count", scope_id, signature_key)`` →
the scope's recurred verdicts with the key (:func:`count_recurred`).

State of the pattern stage (a ``MutableMapping`` with tuple keys, like the
ledger's, ``state.py``): ``("pattern_scope", group, signature_key,
scope_id)`` → the scope's count; ``("pattern", group, signature_key)`` →
``{scope_count, recurred, scopes, candidate}`` (``scopes``: the first 100
contributing scopes in code point order; ``candidate``: its PatternCandidate
was published). So a key's record stays small however many scopes it has.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from recurrence_ledger import policy
from recurrence_ledger.catalogue import PATTERN_CANDIDATES, PATTERN_REPARTITION, SIGNATURE_PATTERNS
from recurrence_ledger.ledger.normalize import canonical_json, digest
from recurrence_ledger.ledger.records import PatternCandidate, SignaturePattern
from recurrence_ledger.ledger.results import Emit
from recurrence_ledger.ledger.state import LedgerState, Store

#: How many contributing scopes a SignaturePattern names (§23.3).
PATTERN_SCOPES_LIMIT = 100


def pattern_group(scope_id: str, separator: str | None) -> str:
    """The pattern group of ``scope_id`` (contract §23.1): ``""`` without a
    ``separator``; else the scope_id up to the first occurrence of the
    separator, or the whole scope_id when it has none."""
    if separator is None:
        return ""
    return scope_id.split(separator, 1)[0]


def pattern_key(group: str, signature_key: str) -> str:
    """Record key of a pattern (the repartition topic, ``signature-patterns``
    and ``pattern-candidates``): canonical JSON of ``{group,
    signature_key}``."""
    return canonical_json({"group": group, "signature_key": signature_key}).decode("utf-8")


def pattern_rank(row: dict) -> tuple[int, str]:
    """The order of a group's SignaturePattern rows wherever they are
    listed (the skill document, the API, the dashboard): most scopes
    first, then signature_key in code point order."""
    return (-row["scope_count"], row["signature_key"])


def pattern_candidate_id(group: str, signature_key: str, threshold: int) -> str:
    """candidate_id of a PatternCandidate: digest of ``{group,
    signature_key, threshold}`` (contract §23.4)."""
    return digest({"group": group, "signature_key": signature_key, "threshold": threshold})


def contribution(scope_id: str, signature_key: str, recurred: int, separator: str | None) -> Emit:
    """The scope stage's output for (scope, key): S's absolute count
    ``recurred`` (≥ 1) as a PatternContribution on the repartition topic,
    keyed by its pattern (contract §23.5)."""
    group = pattern_group(scope_id, separator)
    value = {"group": group, "signature_key": signature_key, "scope_id": scope_id, "recurred": recurred}
    return Emit(PATTERN_REPARTITION, pattern_key(group, signature_key), value)


def recurred_count(state: LedgerState, scope_id: str, signature_key: str) -> int:
    """Scope ``scope_id``'s recurred verdicts with ``signature_key``
    (contract §23.2), kept as ``("pattern_count", scope_id,
    signature_key)`` by :func:`count_recurred`; a store written before
    contract §23 has none, and the count is then the sum of the recurred
    counts of the scope's revisions with that key (their streak records)."""
    count = state.get("pattern_count", scope_id, signature_key)
    if count is None:
        count = 0
        for artifact_id, revision in state.get("cue", scope_id, signature_key, default=[]):
            record = state.get("streak", scope_id, artifact_id, revision)
            if record is not None:
                count += record.get("recurred", 0)
    return count


def count_recurred(state: LedgerState, scope_id: str, signature_key: str) -> None:
    """One more recurred RecurrenceObservation with ``signature_key`` in
    ``scope_id``, after its revision's streak record counted it (so a
    store written before contract §23 starts from the right count)."""
    known = state.get("pattern_count", scope_id, signature_key)
    state.put(recurred_count(state, scope_id, signature_key) if known is None else known + 1, "pattern_count", scope_id, signature_key)


def candidate_reason(group: str, threshold: int) -> str:
    """The reason of a PatternCandidate: it depends on the group and the
    threshold only, so its bytes are the same whichever scopes crossed it."""
    where = "" if group == "" else f" of pattern group {canonical_json(group).decode('utf-8')}"
    return f"recurred in {threshold} scopes{where} (pattern threshold {threshold})"


class PatternStage:
    """The pattern stage of contract §23.5 over a mapping store (a dict by
    default; the worker's changelog-backed partition store of the
    repartition topic).

    :meth:`apply` takes one PatternContribution (as a JSON dict) and returns
    the facts it causes (zero or one PatternCandidate); :meth:`end_batch`
    returns the SignaturePattern rows of the keys changed since the last
    call, in key order. ``threshold``: the deployment's pattern threshold
    (ValueError below 1). ``validate_outputs``: check each output against
    its pydantic model (tests).
    """

    def __init__(self, store: Store | None = None, threshold: int = policy.PATTERN_THRESHOLD.default, validate_outputs: bool = False):
        policy.PATTERN_THRESHOLD.check(threshold)
        self.store: Store = {} if store is None else store
        self.threshold = threshold
        self.validate_outputs = validate_outputs
        self._dirty: dict[tuple[str, str], None] = {}
        self._dirty_at_mark: dict[tuple[str, str], None] = {}

    def apply(self, value: dict) -> list[Emit]:
        """Apply one contribution ``{group, signature_key, scope_id,
        recurred}``. A count not above the scope's known one changes
        nothing (a retry, a replay, an older record). Returns the
        PatternCandidate emit when the key's scope_count first reaches the
        threshold, else nothing. The state keeps the thresholds the key's
        candidates were published at, so a stage restarted with another
        threshold publishes that threshold's candidate once (when the next
        scope joins the pattern, if the count is already past it) and never
        one twice."""
        group, signature_key, scope_id, recurred = value["group"], value["signature_key"], value["scope_id"], value["recurred"]
        scope_part = ("pattern_scope", group, signature_key, scope_id)
        known = self.store.get(scope_part, 0)
        if recurred <= known:
            return []
        self.store[scope_part] = recurred
        part = ("pattern", group, signature_key)
        record = self.store.get(part) or {"scope_count": 0, "recurred": 0, "scopes": [], "candidates": []}
        if "candidates" not in record:  # kept before the thresholds were: a candidate was at the threshold in force
            record["candidates"] = [self.threshold] if record.pop("candidate") else []
        record["recurred"] += recurred - known
        emits: list[Emit] = []
        if known == 0:
            record["scope_count"] += 1
            scopes = record["scopes"]
            if len(scopes) < PATTERN_SCOPES_LIMIT or scope_id < scopes[-1]:
                bisect.insort(scopes, scope_id)
                del scopes[PATTERN_SCOPES_LIMIT:]
            if self.threshold not in record["candidates"] and record["scope_count"] >= self.threshold:
                record["candidates"].append(self.threshold)
                self._emit(emits, PATTERN_CANDIDATES, pattern_key(group, signature_key), {
                    "candidate_id": pattern_candidate_id(group, signature_key, self.threshold),
                    "group": group,
                    "signature_key": signature_key,
                    "threshold": self.threshold,
                    "reason": candidate_reason(group, self.threshold),
                })
        self.store[part] = record
        self._dirty[(group, signature_key)] = None
        return emits

    def apply_all(self, values: Iterable[dict]) -> list[Emit]:
        """:meth:`apply` of each contribution, in order; their emits."""
        emits: list[Emit] = []
        for value in values:
            emits += self.apply(value)
        return emits

    def end_batch(self) -> list[Emit]:
        """The SignaturePattern rows (contract §23.3) of every key changed
        since the last call, each once with its latest value, in code point
        order of (group, signature_key)."""
        emits: list[Emit] = []
        for group, signature_key in sorted(self._dirty):
            record = self.store[("pattern", group, signature_key)]
            self._emit(emits, SIGNATURE_PATTERNS, pattern_key(group, signature_key), {
                "group": group,
                "signature_key": signature_key,
                "scope_count": record["scope_count"],
                "scopes": list(record["scopes"]),
                "recurred": record["recurred"],
            })
        self._dirty.clear()
        return emits

    def mark(self) -> None:
        """Remember the batch's changed keys as they are now (the runtime
        made the current state its rollback point)."""
        self._dirty_at_mark = dict(self._dirty)

    def rolled_back(self) -> None:
        """The store was returned to its state at the last :meth:`mark`:
        forget the keys changed since."""
        self._dirty = dict(self._dirty_at_mark)

    def _emit(self, emits: list[Emit], topic: str, key: str, value: dict) -> None:
        if self.validate_outputs:
            (PatternCandidate if topic == PATTERN_CANDIDATES else SignaturePattern).model_validate(value)
        emits.append(Emit(topic, key, value))


def patterns_of_counts(
    counts: Iterable[tuple[str, str, int]], separator: str | None, threshold: int,
) -> tuple[dict[tuple[str, str], dict], dict[str, dict]]:
    """The pattern stage over final counts ``(scope_id, signature_key,
    recurred)``, in one batch: ``(rows, candidates)`` — the final
    SignaturePattern row per (group, signature_key) and the
    PatternCandidates by candidate_id (the same in every order of the
    counts, module docstring)."""
    stage = PatternStage(threshold=threshold)
    candidates = {
        emit.value["candidate_id"]: emit.value
        for scope_id, signature_key, count in sorted(counts)
        for emit in stage.apply(contribution(scope_id, signature_key, count, separator).value)
    }
    rows = {(emit.value["group"], emit.value["signature_key"]): emit.value for emit in stage.end_batch()}
    return rows, candidates


def state_counts(store: Store) -> list[tuple[str, str, int]]:
    """Every (scope_id, signature_key, recurred) count a scope stage's
    ``store`` holds (:func:`count_recurred`'s records): what a policy
    replay (contract §20) feeds :func:`patterns_of_counts`."""
    return [(key[1], key[2], value) for key, value in store.items() if key[0] == "pattern_count"]


def rebuild_patterns(
    observations: Iterable[dict], separator: str | None = policy.PATTERN_GROUP_SEPARATOR.default,
    threshold: int = policy.PATTERN_THRESHOLD.default,
) -> tuple[dict[tuple[str, str], dict], dict[str, dict]]:
    """The pattern stage recomputed from RecurrenceObservation records alone
    (in any order, each ``observation_id`` once; contract §23.2: the
    recurred ones): ``(rows, candidates)`` — the final SignaturePattern row
    per (group, signature_key) and the PatternCandidates by candidate_id.
    What ``recurrence-ledger rebuild`` compares with the
    ``signature-patterns`` and ``pattern-candidates`` topics."""
    counts: dict[tuple[str, str], int] = {}
    seen: set[str] = set()
    for observation in observations:
        if observation["event"] != "recurred" or observation["observation_id"] in seen:
            continue
        seen.add(observation["observation_id"])
        key = (observation["scope_id"], observation["signature_key"])
        counts[key] = counts.get(key, 0) + 1
    return patterns_of_counts(((scope_id, key, count) for (scope_id, key), count in counts.items()), separator, threshold)
