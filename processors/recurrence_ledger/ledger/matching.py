"""contract §6: failure items, frozen candidate sets and RecurrenceMatch.

Matching is exact on normalized text and deterministic: eligible = frozen
candidates whose normalized recall_cue equals the failure item's normalized
match input; 0 → unmatched, 1 → matched, >1 → ambiguous. Fuzzy similarity
never matches (contract §6).
"""

from __future__ import annotations

import bisect
from collections.abc import Container
from typing import NamedTuple

import orjson

from recurrence_ledger.ledger.normalize import canonical_json, digest, digest_bytes, is_blank, normalize
from recurrence_ledger.ledger.state import LedgerState, experience_ref, ref_order

FAILED_CHECK_STATUSES = frozenset({"failed", "timed_out", "unavailable"})
FAILED_OUTCOME_STATUSES = frozenset({"failed", "blocked"})


def has_exact_evidence(item: dict) -> bool:
    """Non-empty exact evidence (contract §2): at least one EvidenceRef of
    kind "exact" whose ``ref`` is not blank (``normalize.is_blank``: only
    White_Space, controls and format characters such as U+200B, rev. 3);
    such an item stays in the event and its digest, but a claim with no
    locator cannot be checked, so it counts as no evidence (rev. 2)."""
    return any(evidence["kind"] == "exact" and not is_blank(evidence["ref"]) for evidence in item["evidence"])


def is_verified_exact(item: dict) -> bool:
    """basis = verified and non-empty exact evidence (contract §6, §12 rule 1)."""
    return item["basis"] == "verified" and has_exact_evidence(item)


def item_ref(outcome: dict, item_kind: str, item_index: int) -> dict:
    """TaskOutcomeItemRef dict (contract §4).

    ``item_digest`` = digest of the item exactly as it appears in the
    validated Task Outcome, i.e. the pydantic dump with every field present
    (``details: null`` included), so a JSON producer and an Avro producer of
    the same outcome get the same digest.
    """
    items = outcome["observations"] if item_kind == "observation" else outcome["checks"]
    return {
        "task_outcome_ref": outcome["source_ref"],
        "item_kind": item_kind,
        "item_index": item_index,
        "item_digest": digest(items[item_index]),
    }


class FailureItem(NamedTuple):
    """One failure item of a Task Outcome (contract §6), immutable.

    ``match_input`` is normalize(check.name) or normalize(observation.text);
    it may be "" (then the item matches nothing).
    """

    item_kind: str
    item_index: int
    match_input: str
    ref: dict


def _verified_by_key(items: list[tuple[bool, str]]) -> dict[str, list[int]]:
    """normalized text → indexes of the verified, exact-evidence items with
    that key, from ``(verified, key)`` pairs."""
    by_key: dict[str, list[int]] = {}
    for index, (verified, key) in enumerate(items):
        if verified:
            by_key.setdefault(key, []).append(index)
    return by_key


class OutcomeItems:
    """The evidence of one Task Outcome, normalized once: for each
    observation and check, whether it is verified with non-empty exact
    evidence and its normalized text/name. Shared by failure items (§6) and
    the avoided bindings (§7)."""

    __slots__ = ("outcome", "observations", "checks", "_verified_observations", "_verified_checks")

    def __init__(self, outcome: dict):
        self.outcome = outcome
        self.observations = [(is_verified_exact(item), normalize(item["text"])) for item in outcome["observations"]]
        self.checks = [(is_verified_exact(item), normalize(item["name"])) for item in outcome["checks"]]
        self._verified_observations = _verified_by_key(self.observations)
        self._verified_checks = _verified_by_key(self.checks)

    def verified_observations(self, key: str) -> list[int]:
        """Indexes of verified, exact-evidence observations normalizing to
        ``key``, ascending (do not mutate)."""
        return self._verified_observations.get(key, [])

    def verified_checks(self, key: str) -> list[int]:
        """Indexes of verified, exact-evidence checks normalizing to ``key``,
        ascending (do not mutate)."""
        return self._verified_checks.get(key, [])

    def failure_items(self) -> list[FailureItem]:
        """Failure items in a fixed order: checks by index, then observations.

        - a check with basis verified, non-empty exact evidence and status in
          {failed, timed_out, unavailable};
        - an observation with basis verified and non-empty exact evidence when
          the outcome's status is failed or blocked.
        skipped / cancelled / unknown checks and declared items never are.
        """
        outcome = self.outcome
        items = [
            FailureItem("check", index, name, item_ref(outcome, "check", index))
            for index, (verified, name) in enumerate(self.checks)
            if verified and outcome["checks"][index]["status"] in FAILED_CHECK_STATUSES
        ]
        if outcome["status"] in FAILED_OUTCOME_STATUSES:
            items += [
                FailureItem("observation", index, text, item_ref(outcome, "observation", index))
                for index, (verified, text) in enumerate(self.observations)
                if verified
            ]
        return items


# -- frozen candidate sets ----------------------------------------------------


class CandidateSet:
    """A frozen, sorted candidate set (contract §6): its canonical JSON, its
    digest and a membership test, computed once per set. ``refs`` (the list
    of ArtifactRef dicts) is materialized only when asked for — a
    scope_heads set is published once as a CandidateSet record and a match
    carries only its digest, so a match never touches the list.

    ``keys``: a container of ``(artifact_id, revision)`` tuples; ``refs``:
    the list when the caller has it (else parsed from ``refs_json``)."""

    __slots__ = ("refs_json", "digest", "keys", "_refs")

    def __init__(self, refs_json: bytes, keys: Container[tuple[str, int]], refs: list[dict] | None = None):
        self.refs_json = refs_json
        self.digest = digest_bytes(refs_json)
        self.keys = keys
        self._refs = refs

    @classmethod
    def of(cls, refs: list[dict]) -> CandidateSet:
        """The set of ``refs`` (Experience ArtifactRef dicts in ArtifactRef order)."""
        return cls(canonical_json(refs), frozenset((ref["artifact_id"], ref["revision"]) for ref in refs), refs)

    @property
    def refs(self) -> list[dict]:
        """The refs in ArtifactRef order (do not mutate)."""
        if self._refs is None:
            self._refs = orjson.loads(self.refs_json)
        return self._refs

    def __contains__(self, ref: dict | None) -> bool:
        return ref is not None and ref["family"] == "experience" and (ref["artifact_id"], ref["revision"]) in self.keys


def _ref_json(artifact_id: str, revision: int) -> bytes:
    """canonical_json(experience_ref(artifact_id, revision)), assembled
    (keys in sorted order; orjson writes the id as canonical_json does)."""
    return b'{"artifact_id":' + orjson.dumps(artifact_id) + b',"family":"experience","revision":' + str(revision).encode() + b"}"


class _Heads(dict):
    """artifact_id → head revision: a membership container of
    ``(artifact_id, revision)`` tuples (one head per artifact)."""

    __slots__ = ()

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and dict.get(self, key[0]) == key[1]


class HeadsIndex:
    """The current failure-bearing heads of one scope in ArtifactRef order,
    kept up to date as heads change: the artifact ids in order (artifact_id
    order is ArtifactRef order within the experience family) with, at the
    same index, the canonical JSON fragment and the ArtifactRef dict of each
    head, plus each artifact's head revision. A change is a bisection and a
    list insert, replace or delete; a snapshot (canonical JSON, digest,
    membership and the refs) is a few C-level copies and one SHA-256, made
    at most once per change, when a match first needs it.

    An in-memory cache of the store's ``heads`` record (LedgerState keeps
    one per scope and drops it with its other caches)."""

    __slots__ = ("_ids", "_fragments", "_refs", "_revisions", "_snapshot")

    def __init__(self, heads: dict):
        self._ids = sorted(aid for aid, head in heads.items() if head[1])
        self._revisions = {aid: heads[aid][0] for aid in self._ids}
        self._fragments = [_ref_json(aid, self._revisions[aid]) for aid in self._ids]
        self._refs = [experience_ref(aid, self._revisions[aid]) for aid in self._ids]
        self._snapshot: CandidateSet | None = None

    def set_head(self, artifact_id: str, revision: int, has_failure: bool) -> None:
        """The head of ``artifact_id`` is now ``revision`` (with or without
        a failure block)."""
        known = artifact_id in self._revisions
        if not known and not has_failure:
            return
        at = bisect.bisect_left(self._ids, artifact_id)
        if has_failure:
            fragment, ref = _ref_json(artifact_id, revision), experience_ref(artifact_id, revision)
            if known:
                self._fragments[at], self._refs[at] = fragment, ref
            else:
                self._ids.insert(at, artifact_id)
                self._fragments.insert(at, fragment)
                self._refs.insert(at, ref)
            self._revisions[artifact_id] = revision
        else:
            del self._ids[at], self._fragments[at], self._refs[at], self._revisions[artifact_id]
        self._snapshot = None

    def snapshot(self) -> CandidateSet:
        """The frozen set of the current heads (cached until the next change)."""
        if self._snapshot is None:
            self._snapshot = CandidateSet(b"[" + b",".join(self._fragments) + b"]", _Heads(self._revisions), list(self._refs))
        return self._snapshot


def heads_index(state: LedgerState, scope_id: str) -> HeadsIndex:
    """The scope's HeadsIndex, built from the store's ``heads`` record on first use."""
    index = state.cached_heads_index(scope_id)
    if index is None:
        index = HeadsIndex(state.get("heads", scope_id, default={}))
        state.cache_heads_index(scope_id, index)
    return index


def head_changed(state: LedgerState, scope_id: str, artifact_id: str, revision: int, has_failure: bool) -> None:
    """Keep a built HeadsIndex in step with the store's ``heads`` record
    (the caller has just written it)."""
    index = state.cached_heads_index(scope_id)
    if index is not None:
        index.set_head(artifact_id, revision, has_failure)


def candidate_set_key(scope_id: str, candidate_set_digest: str) -> str:
    """Record key of a ``candidate-sets`` record: the canonical JSON of
    ``{"candidate_set_digest": …, "scope_id": …}`` — one key per set, so the
    compacted topic keeps every set."""
    return canonical_json({"scope_id": scope_id, "candidate_set_digest": candidate_set_digest}).decode("utf-8")


def candidate_set_record(scope_id: str, candidates: CandidateSet) -> dict:
    """The CandidateSet record (contract §6) of a scope_heads set."""
    return {"scope_id": scope_id, "candidate_set_digest": candidates.digest, "candidate_refs": candidates.refs}


def head_at(state: LedgerState, scope_id: str, artifact_id: str, position: int) -> int | None:
    """Head revision of an Experience artifact at ``position``: its highest
    revision published at a journal position < ``position`` (contract §3)."""
    best = None
    for revision, published_at in state.get("history", scope_id, artifact_id, default=[]):
        if published_at < position and (best is None or revision > best):
            best = revision
    return best


def head_revision_at(state: LedgerState, scope: dict, scope_id: str, artifact_id: str, position: int) -> int | None:
    """:func:`head_at`, answered from the scope's ``heads`` record (each
    artifact's highest known revision) when every known Experience revision
    of the scope precedes ``position`` (journal order), as is the rule; from
    the artifact's history otherwise."""
    if position > scope["max_experience_position"]:
        head = state.get("heads", scope_id, default={}).get(artifact_id)
        return None if head is None else head[0]
    return head_at(state, scope_id, artifact_id, position)


#: Journal positions per record of a revision's fresh selections
#: (:func:`count_selection`), so a selection rewrites a bounded record.
FRESH_BUCKET = 256


def count_selection(state: LedgerState, scope: dict, scope_id: str, artifact_id: str, revision: int, position: int) -> None:
    """One ``selected`` observation of an Experience revision by the Task
    Outcome at ``position``, for ``stale_revision_selections`` (contract
    §14): stale when the revision is no longer its artifact's head at the
    outcome's position. Decided by position, so the final count is the
    same in every arrival order: a selection that is fresh now is kept
    (``("fresh", scope_id, artifact_id, revision, position // FRESH_BUCKET)``
    → its sorted positions, the buckets listed in ``("fresh_buckets",
    scope_id, artifact_id, revision)``) until a higher revision at an
    earlier position arrives (:func:`revision_known`)."""
    if head_revision_at(state, scope, scope_id, artifact_id, position) != revision:
        scope["stale_revision_selections"] = scope.get("stale_revision_selections", 0) + 1
        return
    bucket = position // FRESH_BUCKET
    fresh = state.get("fresh", scope_id, artifact_id, revision, bucket)
    if fresh is None:
        fresh = []
        buckets = state.get("fresh_buckets", scope_id, artifact_id, revision, default=[])
        bisect.insort(buckets, bucket)
        state.put(buckets, "fresh_buckets", scope_id, artifact_id, revision)
    bisect.insort(fresh, position)
    state.put(fresh, "fresh", scope_id, artifact_id, revision, bucket)


def revision_known(state: LedgerState, scope: dict, scope_id: str, artifact_id: str, revision: int, position: int) -> None:
    """A new Experience revision, published at ``position``: the fresh
    selections of the artifact's lower revisions by Task Outcomes at later
    positions (decided before it arrived) were no longer of the head, and
    count in ``stale_revision_selections`` now (:func:`count_selection`).
    In journal order there are none, and nothing is written."""
    for known, _ in state.get("history", scope_id, artifact_id, default=[]):
        if known >= revision:
            continue
        buckets = state.get("fresh_buckets", scope_id, artifact_id, known, default=[])
        first = bisect.bisect_left(buckets, position // FRESH_BUCKET)
        if first == len(buckets):
            continue
        for bucket in buckets[first:]:
            fresh = state.get("fresh", scope_id, artifact_id, known, bucket)
            cut = bisect.bisect_right(fresh, position)
            if cut == len(fresh):
                continue
            scope["stale_revision_selections"] = scope.get("stale_revision_selections", 0) + len(fresh) - cut
            state.put_nonempty(fresh[:cut], "fresh", scope_id, artifact_id, known, bucket)
            if not cut:
                buckets.remove(bucket)
        state.put_nonempty(buckets, "fresh_buckets", scope_id, artifact_id, known)


def scope_heads(state: LedgerState, scope: dict, scope_id: str, position: int) -> CandidateSet:
    """The frozen ``scope_heads`` candidate set at ``position``: the head
    revision of every Experience artifact in the scope whose head carries a
    failure block, sorted by ArtifactRef order.

    When every known revision precedes ``position`` (journal order) the head
    at ``position`` is the current head: the set is the scope's HeadsIndex
    snapshot, recomputed only when the heads change, so an outcome costs the
    same with 10 or 100,000 heads. Otherwise (a revision arrived early on a
    per-kind topic) it is recomputed from each artifact's history.
    """
    if position > scope["max_experience_position"]:
        return heads_index(state, scope_id).snapshot()
    heads = state.get("heads", scope_id, default={})
    refs = []
    for artifact_id in heads:
        revision = head_at(state, scope_id, artifact_id, position)
        if revision is None:
            continue
        experience = state.get("experience", scope_id, artifact_id, revision)
        if experience["failure"] is not None:
            refs.append(experience_ref(artifact_id, revision))
    refs.sort(key=ref_order)
    return CandidateSet.of(refs)


def eligible_scope_heads(state: LedgerState, scope: dict, scope_id: str, position: int, match_input: str) -> list[dict]:
    """Eligible candidates in scope_heads mode, found through the recall-cue
    index (``cue`` records) so the cost does not grow with the number of
    heads: revisions with this cue that are their artifact's head at
    ``position``."""
    fast = position > scope["max_experience_position"]
    heads = state.get("heads", scope_id, default={}) if fast else None
    eligible = []
    for artifact_id, revision in state.get("cue", scope_id, match_input, default=[]):
        head = heads[artifact_id][0] if fast else head_at(state, scope_id, artifact_id, position)
        if head == revision:
            eligible.append(experience_ref(artifact_id, revision))
    return eligible


def eligible_cited(state: LedgerState, scope_id: str, cited_set: tuple[dict, ...], match_input: str) -> list[dict]:
    """Eligible candidates in handoff_citations mode (≤ 64 refs)."""
    eligible = []
    for ref in cited_set:
        experience = state.get("experience", scope_id, ref["artifact_id"], ref["revision"])
        if experience["failure"]["signature_key"] == match_input:
            eligible.append(ref)
    return eligible


def build_match(
    scope_id: str,
    outcome: dict,
    item: FailureItem,
    mode: str,
    candidates: CandidateSet,
    eligible: list[dict],
) -> dict:
    """A RecurrenceMatch record (contract §6, §13) with
    ``match_digest`` = digest of the record without ``match_digest``.

    A ``handoff_citations`` set (≤ 64 refs) travels in the match as
    ``candidate_refs``; a ``scope_heads`` set is stored by reference
    (``candidate_refs`` null, the CandidateSet published once on
    candidate-sets), so the digest covers its candidate_set_digest, not the
    list. A match input that normalized to "" never has eligible candidates.
    """
    target = eligible[0] if len(eligible) == 1 and item.match_input else None
    if not item.match_input or not eligible:
        result = "unmatched"
    elif len(eligible) == 1:
        result = "matched"
    else:
        result = "ambiguous"
    record = {
        "scope_id": scope_id,
        "task_outcome_ref": outcome["source_ref"],
        "task_outcome_position": outcome["journal_position"],
        "failure_ref": item.ref,
        "candidate_set_mode": mode,
        "candidate_refs": candidates.refs if mode == "handoff_citations" else None,
        "candidate_set_digest": candidates.digest,
        "result": result,
        "artifact_ref": target,
        "signature_key": item.match_input if target is not None else None,
    }
    record["match_digest"] = digest(record)
    return record


def remembered_match(match: dict) -> dict:
    """The part of a RecurrenceMatch the state keeps for the replay rule
    (contract §6) and for verdicts."""
    return {
        "match_digest": match["match_digest"],
        "result": match["result"],
        "artifact_ref": match["artifact_ref"],
        "signature_key": match["signature_key"],
    }
