"""Admission of failure records (contract §12, rules 1–6).

A candidate (``recurrence_ledger.ledger.models.ExperienceCandidate``) proposes an Experience
revision with a failure block and cites the Sources it rests on. The core
decides it once, immutably, when every cited Task Outcome is known to the
ledger or the provenance horizon passes (``LedgerProcessor``); this module
holds the rules as pure functions of plain dicts.

Rules, and the reason code a broken rule puts in ``reasons`` (all broken
rules are listed, in rule order):

1. at least one cited Task Outcome has a failure item (contract §6) —
   ``no_failure_evidence``, or ``missing_source`` when a cited Task Outcome
   was still unknown at the horizon; the decision lists the failure items it
   relied on as TaskOutcomeItemRefs;
2. the cue normalizes to non-empty (``empty_cue``), has at most 512
   characters (``cue_too_long``; MAX_FAILURE_CUE_LENGTH) and does not
   normalize to the content's ``outcome`` (``cue_restates_outcome``);
3. a repair_surface (``missing_repair_surface``);
4. a verification (``missing_verification``) whose condition and
   check_subject normalize to non-empty (``empty_condition``,
   ``empty_check_subject``) and whose check_subject has at most 512
   characters like a published one (``check_subject_too_long``);

Characters are counted as every length limit is: code points of the NFC
form of the text as written (contract §3 rev. 2).
5. near-duplicates are suggestions, never rejections: every current head
   whose normalized cue has a Sørensen–Dice coefficient ≥ the deployment's
   near-duplicate threshold (``LedgerConfig.near_duplicate_threshold``,
   default 4/5 = 0.8, compared exactly) over token bigrams with the
   candidate's (:func:`dice`), found through a per-scope bigram index
   (:func:`index_head`), never by scanning every head;
6. provenance reuses the Review evidence model: the decision carries the
   candidate's ``cited_sources`` unchanged, and no new Source kind.

A candidate without a failure block breaks rules 2–4 at once and gets the
single reason ``missing_failure_record``.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

from recurrence_ledger import policy
from recurrence_ledger.ledger.normalize import digest, nfc_length, normalize
from recurrence_ledger.ledger.ratios import published_ratio
from recurrence_ledger.ledger.state import LedgerState, experience_ref

#: contract §3, §12: a cue has at most 512 characters — counted in code
#: points of the NFC form of the cue as written (``normalize.nfc_length``),
#: like a published revision's.
MAX_FAILURE_CUE_LENGTH = 512
#: Longest check_subject of a published FailureVerification (contract §3:
#: 1–512 characters): an accepted record must be publishable as it is.
MAX_CHECK_SUBJECT_LENGTH = 512
#: A decision lists at most this many failure refs and near-duplicates (it
#: must fit in one Kafka message however many items its cited outcomes
#: have); ``failure_refs_total`` / ``near_duplicates_total`` give the counts.
MAX_DECISION_FAILURE_REFS = 256
MAX_NEAR_DUPLICATES = 16
#: Rule 5's default threshold (``policy.NEAR_DUPLICATE_THRESHOLD``, 4/5) as
#: (numerator, denominator): a score is compared as
#: ``5 * 2|A∩B| ≥ 4 * (|A| + |B|)``, never as a rounded float. The functions
#: below take the deployment's threshold (a Fraction in (0, 1]) as
#: ``threshold``.
NEAR_DUPLICATE = policy.NEAR_DUPLICATE_THRESHOLD.default.as_integer_ratio()
DEFAULT_THRESHOLD: Fraction = policy.NEAR_DUPLICATE_THRESHOLD.default


def cue_bigrams(key: str) -> Counter:
    """The token bigrams of a normalized cue as a multiset.

    Tokens are the cue's space-separated words (normalize has already folded
    case and whitespace; inner punctuation stays part of its token). A bigram
    is two adjacent tokens joined by one space; a one-token cue uses its
    token. "" has no bigrams.

    >>> sorted(cue_bigrams("openapi codegen drift"))
    ['codegen drift', 'openapi codegen']
    >>> cue_bigrams("drift")
    Counter({'drift': 1})
    """
    tokens = key.split(" ") if key else []
    if len(tokens) == 1:
        return Counter(tokens)
    return Counter(f"{first} {second}" for first, second in zip(tokens, tokens[1:]))


def dice_parts(first: Counter, second: Counter) -> tuple[int, int]:
    """``(2·|A∩B|, |A| + |B|)`` of two bigram multisets — the Sørensen–Dice
    coefficient as an exact fraction (``(0, 0)`` for two empty sets)."""
    overlap = sum(min(count, second[gram]) for gram, count in first.items() if gram in second)
    return 2 * overlap, sum(first.values()) + sum(second.values())


def dice(first_key: str, second_key: str) -> float:
    """Sørensen–Dice coefficient of two normalized cues over token bigrams
    (:func:`cue_bigrams`), published with 4 decimals
    (``ratios.published_ratio``: the exact fraction, ties to even); 0.0 when
    either is empty.

    >>> dice("openapi codegen drift", "openapi codegen drift")
    1.0
    >>> dice("openapi codegen drift", "redis pool exhausted")
    0.0
    """
    shared, total = dice_parts(cue_bigrams(first_key), cue_bigrams(second_key))
    return published_ratio(shared, total) if total and shared else 0.0


def is_near_duplicate(shared: int, total: int, threshold: Fraction = DEFAULT_THRESHOLD) -> bool:
    """Rule 5: score ``shared / total`` ≥ ``threshold``, compared exactly."""
    numerator, denominator = threshold.as_integer_ratio()
    return total > 0 and shared * denominator >= numerator * total


# -- the bigram index of current heads ---------------------------------------


def index_head(state: LedgerState, scope_id: str, artifact_id: str, old: tuple[int, str | None] | None, new: tuple[int, str | None]) -> None:
    """Move ``artifact_id`` in the scope's cue-bigram index from its old head
    ``(revision, signature_key or None)`` to the new one.

    Index records: ``("cue_bigram", scope_id, bigram) → {artifact_id:
    revision}`` over current heads that carry a failure block; a head change
    rewrites only the bigrams of the two cues involved.
    """
    if old is not None and old[1]:
        for gram in cue_bigrams(old[1]):
            postings = state.get("cue_bigram", scope_id, gram, default={})
            postings.pop(artifact_id, None)
            state.put_nonempty(postings, "cue_bigram", scope_id, gram)
    if new[1]:
        for gram in cue_bigrams(new[1]):
            postings = state.get("cue_bigram", scope_id, gram, default={})
            postings[artifact_id] = new[0]
            state.put(postings, "cue_bigram", scope_id, gram)


def min_shared(size: int, threshold: Fraction = DEFAULT_THRESHOLD) -> int:
    """The fewest bigrams (multiset elements) a cue of ``size`` bigrams must
    share with another to reach ``threshold`` t: from 2s ≥ t·(a + b) and
    b ≥ s, s ≥ ⌈t·a / (2 − t)⌉ (for 0.8: 10·s ≥ 4·(a + b), s ≥ ⌈2a/3⌉)."""
    numerator, denominator = threshold.as_integer_ratio()
    # s·(2·denominator − numerator) ≥ numerator·a, i.e. 6s ≥ 4a for 4/5
    step = 2 * denominator - numerator
    return -(-numerator * size // step)


def probe_grams(state: LedgerState, scope_id: str, bag: Counter, threshold: Fraction = DEFAULT_THRESHOLD) -> list[str]:
    """The bigrams whose postings can hold every near-duplicate of ``bag``
    (prefix filtering, as in set-similarity joins): a head sharing at least
    :func:`min_shared` of the ``a`` multiset elements shares one of any
    ``a − min_shared + 1`` of them, so only the rarest that many are probed
    (rarity = postings size, ties by bigram). A common bigram such as
    "of the" then costs nothing unless the cue has nothing rarer."""
    elements = [(gram, occurrence) for gram, count in bag.items() for occurrence in range(count)]
    probes = len(elements) - min_shared(len(elements), threshold) + 1
    sizes = {gram: len(state.get("cue_bigram", scope_id, gram, default={})) for gram in bag}
    elements.sort(key=lambda element: (sizes[element[0]], element))
    return list(dict.fromkeys(gram for gram, _ in elements[:probes]))


def near_duplicates(
    state: LedgerState, scope_id: str, key: str, own_artifact_id: str | None, threshold: Fraction = DEFAULT_THRESHOLD,
) -> list[dict]:
    """Rule 5: the current heads of the scope whose cue is a near-duplicate
    of normalized cue ``key`` (score ≥ ``threshold``), as NearDuplicate
    dicts sorted by score descending (the exact fraction, not the published
    4 decimals), then ArtifactRef order. Only heads found in the postings of
    :func:`probe_grams` are scored, exactly; ``own_artifact_id``'s head is
    skipped. [] for an empty key."""
    bag = cue_bigrams(key)
    heads: dict[str, int] = {}
    for gram in probe_grams(state, scope_id, bag, threshold):
        heads.update(state.get("cue_bigram", scope_id, gram, default={}))
    size = sum(bag.values())
    numerator, denominator = threshold.as_integer_ratio()
    step = 2 * denominator - numerator
    found = []
    for artifact_id, revision in heads.items():
        if artifact_id == own_artifact_id:
            continue
        head_key = state.get("experience", scope_id, artifact_id, revision)["failure"]["signature_key"]
        head_size = max(1, head_key.count(" "))  # its bigram count
        if step * head_size < numerator * size or numerator * head_size > step * size:
            continue  # length filter: t needs t·a/(2 − t) ≤ b ≤ (2 − t)·a/t (0.8: 2a/3 ≤ b ≤ 3a/2)
        shared, total = dice_parts(bag, cue_bigrams(head_key))
        if is_near_duplicate(shared, total, threshold):
            row = {
                "artifact_ref": experience_ref(artifact_id, revision),
                "signature_key": head_key,
                "score": published_ratio(shared, total),
                "same_cue": head_key == key,
            }
            found.append((-Fraction(shared, total), artifact_id, revision, row))
    found.sort(key=lambda entry: entry[:3])
    return [row for *_, row in found]


# -- rules 2–4 -----------------------------------------------------------------


def content_reasons(content: dict) -> list[str]:
    """Reason codes of rules 2–4 broken by a candidate's content (canonical
    CandidateContent dict), in rule order; [] when all hold."""
    failure = content["failure"]
    if failure is None:
        return ["missing_failure_record"]
    reasons = []
    cue = failure["signature"]["recall_cue"]
    key = normalize(cue)
    if not key:
        reasons.append("empty_cue")
    if nfc_length(cue) > MAX_FAILURE_CUE_LENGTH:
        reasons.append("cue_too_long")
    if key and key == normalize(content["outcome"]):
        reasons.append("cue_restates_outcome")
    if failure["repair_surface"] is None:
        reasons.append("missing_repair_surface")
    verification = failure["verification"]
    if verification is None:
        reasons.append("missing_verification")
    else:
        if not normalize(verification["condition"]):
            reasons.append("empty_condition")
        if not normalize(verification["check_subject"]):
            reasons.append("empty_check_subject")
        if nfc_length(verification["check_subject"]) > MAX_CHECK_SUBJECT_LENGTH:
            reasons.append("check_subject_too_long")
    return reasons


def signature_key(content: dict) -> str | None:
    """normalize(recall_cue) of a candidate, or None without a failure block
    or when it normalizes to ""."""
    failure = content["failure"]
    return (normalize(failure["signature"]["recall_cue"]) or None) if failure is not None else None


def cited_outcome_ids(candidate: dict) -> list[str]:
    """source_ids of the distinct Task Outcomes a candidate cites, in citation
    order (handoff_receipt citations are provenance only)."""
    seen: dict[str, None] = {}
    for ref in candidate["cited_sources"]:
        if ref["source_type"] == "task_outcome":
            seen[ref["source_id"]] = None
    return list(seen)


def decision(candidate: dict, failure_refs: list[dict], missing: list[str], near: list[dict]) -> dict:
    """The AdmissionDecision dict of ``candidate`` given rule 1's inputs —
    ``failure_refs`` of its known cited outcomes, the cited outcome ids
    still ``missing`` at the horizon — and rule 5's ``near`` duplicates
    (best first). The lists are cut to MAX_DECISION_FAILURE_REFS and
    MAX_NEAR_DUPLICATES, their full lengths kept in ``failure_refs_total``
    and ``near_duplicates_total``. ``decision_digest`` = digest of the
    record without it."""
    content = candidate["content"]
    reasons = []
    if not failure_refs:
        reasons.append("missing_source" if missing else "no_failure_evidence")
    reasons += content_reasons(content)
    failure = content["failure"]
    record = {
        "candidate_id": candidate["candidate_id"],
        "scope_id": candidate["scope_id"],
        "journal_position": candidate["journal_position"],
        "decision": "rejected" if reasons else "accepted",
        "reasons": reasons,
        "signature_key": signature_key(content),
        "repair_surface": failure["repair_surface"] if failure is not None else None,
        "failure_refs": failure_refs[:MAX_DECISION_FAILURE_REFS],
        "failure_refs_total": len(failure_refs),
        "missing_sources": [{"source_type": "task_outcome", "source_id": source_id} for source_id in missing],
        "cited_sources": candidate["cited_sources"],
        "near_duplicates": near[:MAX_NEAR_DUPLICATES],
        "near_duplicates_total": len(near),
    }
    record["decision_digest"] = digest(record)
    return record
