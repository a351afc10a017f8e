"""CONTRACT §6: failure items, frozen candidate sets and RecurrenceMatch.

Matching is exact on normalized text and deterministic: eligible = frozen
candidates whose normalized recall_cue equals the failure item's normalized
match input; 0 → unmatched, 1 → matched, >1 → ambiguous. Fuzzy similarity
never matches (RFC, Matching policy).
"""

from __future__ import annotations

from dataclasses import dataclass

from processors.ledger.normalize import digest, normalize
from processors.ledger.state import LedgerState, experience_ref, ref_order

FAILED_CHECK_STATUSES = frozenset({"failed", "timed_out", "unavailable"})
FAILED_OUTCOME_STATUSES = frozenset({"failed", "blocked"})


def has_exact_evidence(item: dict) -> bool:
    """Non-empty exact evidence: at least one EvidenceRef of kind "exact" (§2)."""
    return any(evidence["kind"] == "exact" for evidence in item["evidence"])


def is_verified_exact(item: dict) -> bool:
    """basis = verified and non-empty exact evidence (RFC admission rule 1)."""
    return item["basis"] == "verified" and has_exact_evidence(item)


def item_ref(outcome: dict, item_kind: str, item_index: int) -> dict:
    """TaskOutcomeItemRef dict (CONTRACT §4).

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
    """One failure item of a Task Outcome (CONTRACT §6).

    ``match_input`` is normalize(check.name) or normalize(observation.text);
    it may be "" (then the item matches nothing).
    """

    item_kind: str
    item_index: int
    match_input: str
    ref: dict


def failure_items(outcome: dict) -> list[FailureItem]:
    """Failure items in a fixed order: checks by index, then observations.

    - a check with basis verified, non-empty exact evidence and status in
      {failed, timed_out, unavailable};
    - an observation with basis verified and non-empty exact evidence when
      the outcome's status is failed or blocked.
    skipped / cancelled / unknown checks and declared items never are.
    """
    items = []
    for index, check in enumerate(outcome["checks"]):
        if check["status"] in FAILED_CHECK_STATUSES and is_verified_exact(check):
            items.append(FailureItem("check", index, normalize(check["name"]), item_ref(outcome, "check", index)))
    if outcome["status"] in FAILED_OUTCOME_STATUSES:
        for index, observation in enumerate(outcome["observations"]):
            if is_verified_exact(observation):
                items.append(
                    FailureItem("observation", index, normalize(observation["text"]), item_ref(outcome, "observation", index))
                )
    return items


# -- frozen candidate sets ----------------------------------------------------


def candidate_set_digest(refs: list[dict]) -> str:
    """digest of the sorted candidate ref list (CONTRACT §6)."""
    return digest(refs)


def head_at(state: LedgerState, scope_id: str, artifact_id: str, position: int) -> int | None:
    """Head revision of an Experience artifact at ``position``: its highest
    revision published at a journal position < ``position`` (CONTRACT §3)."""
    best = None
    for revision, published_at in state.get("history", scope_id, artifact_id, default=[]):
        if published_at < position and (best is None or revision > best):
            best = revision
    return best


def scope_heads(state: LedgerState, scope: dict, scope_id: str, position: int) -> tuple[list[dict], str]:
    """The frozen ``scope_heads`` candidate set at ``position``: the head
    revision of every Experience artifact in the scope whose head carries a
    failure block, sorted by ArtifactRef order; and its digest.

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
        snapshot = (refs, candidate_set_digest(refs))
        state.cache_heads_snapshot(scope_id, scope["heads_version"], *snapshot)
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
    return refs, candidate_set_digest(refs)


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
    candidate_refs: list[dict],
    set_digest: str,
    eligible: list[dict],
) -> dict:
    """A RecurrenceMatch record (CONTRACT §6, RFC RecurrenceMatch) with
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
        "candidate_refs": candidate_refs,
        "candidate_set_digest": set_digest,
        "result": result,
        "artifact_ref": target,
        "signature_key": item.match_input if target is not None else None,
    }
    record["match_digest"] = digest(record)
    return record


def remembered_match(match: dict) -> dict:
    """The part of a RecurrenceMatch the state keeps for the replay rule
    (CONTRACT §6) and for verdicts."""
    return {
        "match_digest": match["match_digest"],
        "result": match["result"],
        "artifact_ref": match["artifact_ref"],
        "signature_key": match["signature_key"],
    }
