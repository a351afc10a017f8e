"""contract §6: failure items, frozen candidate sets and RecurrenceMatch.

Matching is exact on normalized text and deterministic: eligible = frozen
candidates whose normalized recall_cue equals the failure item's normalized
match input; 0 → unmatched, 1 → matched, >1 → ambiguous. Fuzzy similarity
never matches (contract §6).
"""

from __future__ import annotations

from dataclasses import dataclass

import hashlib

from recurrence_ledger.ledger.normalize import canonical_json, digest, digest_bytes, normalize
from recurrence_ledger.ledger.state import LedgerState, experience_ref, ref_order

FAILED_CHECK_STATUSES = frozenset({"failed", "timed_out", "unavailable"})
FAILED_OUTCOME_STATUSES = frozenset({"failed", "blocked"})


def has_exact_evidence(item: dict) -> bool:
    """Non-empty exact evidence (contract §2): at least one EvidenceRef of
    kind "exact" whose ``ref`` is not blank. Blank = empty once whitespace
    (``str.strip``: Unicode White_Space, e.g. U+00A0 or U+3000) is stripped;
    such an item stays in the event and its digest, but a claim with no
    locator cannot be checked, so it counts as no evidence (rev. 2)."""
    return any(evidence["kind"] == "exact" and evidence["ref"].strip() for evidence in item["evidence"])


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


@dataclass(frozen=True)
class FailureItem:
    """One failure item of a Task Outcome (contract §6).

    ``match_input`` is normalize(check.name) or normalize(observation.text);
    it may be "" (then the item matches nothing).
    """

    item_kind: str
    item_index: int
    match_input: str
    ref: dict


class OutcomeItems:
    """The evidence of one Task Outcome, normalized once: for each
    observation and check, whether it is verified with non-empty exact
    evidence and its normalized text/name. Shared by failure items (§6) and
    the avoided bindings (§7)."""

    __slots__ = ("outcome", "observations", "checks")

    def __init__(self, outcome: dict):
        self.outcome = outcome
        self.observations = [(is_verified_exact(item), normalize(item["text"])) for item in outcome["observations"]]
        self.checks = [(is_verified_exact(item), normalize(item["name"])) for item in outcome["checks"]]

    def verified_observations(self, key: str) -> list[int]:
        """Indexes of verified, exact-evidence observations normalizing to ``key``."""
        return [index for index, (verified, text) in enumerate(self.observations) if verified and text == key]

    def verified_checks(self, key: str) -> list[int]:
        """Indexes of verified, exact-evidence checks normalizing to ``key``."""
        return [index for index, (verified, name) in enumerate(self.checks) if verified and name == key]

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
    """A frozen, sorted candidate set (contract §6) with what matching needs
    from it at O(1) per outcome: the refs, their digest, a membership set,
    and a cache of sha256 states for the match digest.

    The match digest's preimage (canonical JSON of the RecurrenceMatch, keys
    sorted) begins ``{"artifact_ref":…,"candidate_refs":[…],``. Those bytes
    depend only on this set and the target, so the hash state after them is
    computed once per (set, target) and copied for each match: a scope with
    10,000 heads pays for hashing its snapshot once per Experience revision,
    not once per outcome. The digest bytes are unchanged.
    """

    __slots__ = ("refs", "digest", "keys", "_refs_json", "_prefix_states")

    def __init__(self, refs: list[dict]):
        self.refs = refs
        self._refs_json = canonical_json(refs)
        self.digest = digest_bytes(self._refs_json)
        self.keys = frozenset((ref["artifact_id"], ref["revision"]) for ref in refs)
        self._prefix_states: dict[bytes, object] = {}

    def __contains__(self, ref: dict | None) -> bool:
        return ref is not None and ref["family"] == "experience" and (ref["artifact_id"], ref["revision"]) in self.keys

    def match_digest(self, record: dict) -> str:
        """digest(record) for a RecurrenceMatch ``record`` (without
        match_digest) whose ``candidate_refs`` is this set's refs."""
        target_json = canonical_json(record["artifact_ref"])
        state = self._prefix_states.get(target_json)
        if state is None:
            state = hashlib.sha256(b'{"artifact_ref":' + target_json + b',"candidate_refs":' + self._refs_json + b",")
            self._prefix_states[target_json] = state
        rest = canonical_json({k: v for k, v in record.items() if k not in ("artifact_ref", "candidate_refs")})
        hasher = state.copy()
        hasher.update(rest[1:])  # drop the "{" of the rest: keys after candidate_refs follow
        return "sha256:" + hasher.hexdigest()


def head_at(state: LedgerState, scope_id: str, artifact_id: str, position: int) -> int | None:
    """Head revision of an Experience artifact at ``position``: its highest
    revision published at a journal position < ``position`` (contract §3)."""
    best = None
    for revision, published_at in state.get("history", scope_id, artifact_id, default=[]):
        if published_at < position and (best is None or revision > best):
            best = revision
    return best


def scope_heads(state: LedgerState, scope: dict, scope_id: str, position: int) -> CandidateSet:
    """The frozen ``scope_heads`` candidate set at ``position``: the head
    revision of every Experience artifact in the scope whose head carries a
    failure block, sorted by ArtifactRef order.

    When every known revision precedes ``position`` (journal order) the head
    at ``position`` is the current head, and the snapshot is cached per
    ``heads_version`` so its cost is paid once per Experience revision, not
    per outcome. Otherwise (a revision arrived early on a per-kind topic) it
    is recomputed from each artifact's history.
    """
    heads = state.get("heads", scope_id, default={})
    if position > scope["max_experience_position"]:
        cached = state.cached_heads_snapshot(scope_id, scope["heads_version"])
        if cached is not None:
            return cached
        refs = sorted(
            (experience_ref(aid, head[0]) for aid, head in heads.items() if head[1]),
            key=ref_order,
        )
        snapshot = CandidateSet(refs)
        state.cache_heads_snapshot(scope_id, scope["heads_version"], snapshot)
        return snapshot
    refs = []
    for artifact_id in heads:
        revision = head_at(state, scope_id, artifact_id, position)
        if revision is None:
            continue
        experience = state.get("experience", scope_id, artifact_id, revision)
        if experience["failure"] is not None:
            refs.append(experience_ref(artifact_id, revision))
    refs.sort(key=ref_order)
    return CandidateSet(refs)


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

    A match input that normalized to "" never has eligible candidates.
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
        "candidate_refs": candidates.refs,
        "candidate_set_digest": candidates.digest,
        "result": result,
        "artifact_ref": target,
        "signature_key": item.match_input if target is not None else None,
    }
    record["match_digest"] = candidates.match_digest(record)
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
