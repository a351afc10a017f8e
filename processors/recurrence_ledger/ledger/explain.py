"""Why an outcome counted the way it did: the evidence chain of one Task
Outcome, from the ledger's own records (contract §5–§7).

``explain_outcome`` takes the scope's source events and the RecurrenceMatch
and RecurrenceObservation records already written for the outcome. Matches
and verdicts are read from the ledger, never decided again; for every cited
revision without a verdict the exact reason is given by the same functions
the processor decides with (``chain.receipt_target``,
``matching.OutcomeItems``, ``verdicts.avoided_binding``), so an explanation
cannot drift from the rules.
"""

from __future__ import annotations

from recurrence_ledger.errors import RecurrenceLedgerError

from collections.abc import Iterable

from recurrence_ledger.ledger.chain import distinct_experience_citations, receipt_target
from recurrence_ledger.ledger.matching import OutcomeItems
from recurrence_ledger.ledger.normalize import normalize
from recurrence_ledger.ledger.state import experience_ref, ref_order
from recurrence_ledger.ledger.verdicts import avoided_binding
from recurrence_ledger.catalogue import EXPERIENCE_REVISIONS, HANDOFF_RECEIPTS, HANDOFF_REVISIONS, TASK_OUTCOMES


class OutcomeNotFound(RecurrenceLedgerError, LookupError):
    """No Task Outcome with that source_id in the scope's events."""


def _label(ref: dict | None) -> str | None:
    return None if ref is None else f"{ref['artifact_id']} r{ref['revision']}"


def _failure_keys(content: dict) -> dict | None:
    failure = content["failure"]
    if failure is None:
        return None
    return {
        "signature_key": normalize(failure["signature"]["recall_cue"]),
        "repair_surface": failure["repair_surface"],
        "condition_key": normalize(failure["verification"]["condition"]),
        "check_subject_key": normalize(failure["verification"]["check_subject"]),
    }


def explain_outcome(
    scope_id: str,
    outcome_id: str,
    events: Iterable[tuple[str, dict]],
    matches: Iterable[dict],
    observations: Iterable[dict],
    candidate_sets: Iterable[dict] = (),
) -> dict:
    """The evidence chain of task outcome ``outcome_id`` in ``scope_id``.

    ``events``: ``(kind, value)`` source events (contract §3) of the scope;
    ``matches`` / ``observations`` / ``candidate_sets``: ledger records (any
    scope; filtered here) — a scope_heads match names its CandidateSet by
    digest (contract §6), resolved through ``candidate_sets``. Returns a
    JSON-compatible dict: ``task_outcome``, ``chain`` (status linked /
    unlinked / pending-or-missing-provenance and its reason),
    ``failure_items`` (each with its RecurrenceMatch: ``candidates`` is None
    when its set is not among ``candidate_sets``), and ``revisions`` (per
    cited or targeted revision: selected, verdict, or the reason there is
    none). Raises OutcomeNotFound.
    """
    outcome = None
    receipts: dict[str, dict] = {}
    handoffs: dict[tuple[str, int], dict] = {}
    experiences: dict[tuple[str, int], dict] = {}
    for kind, value in events:
        if value.get("scope_id") != scope_id:
            continue
        if kind == TASK_OUTCOMES and value["source_ref"]["source_id"] == outcome_id:
            outcome = outcome or value
        elif kind == HANDOFF_RECEIPTS:
            receipts.setdefault(value["source_ref"]["source_id"], value)
        elif kind == HANDOFF_REVISIONS:
            handoffs.setdefault((value["artifact_ref"]["artifact_id"], value["artifact_ref"]["revision"]), value)
        elif kind == EXPERIENCE_REVISIONS:
            experiences.setdefault((value["artifact_ref"]["artifact_id"], value["artifact_ref"]["revision"]), value)
    if outcome is None:
        raise OutcomeNotFound(f"no task outcome {outcome_id!r} in scope {scope_id!r}")

    def mine(record: dict) -> bool:
        return record["scope_id"] == scope_id and record["task_outcome_ref"]["source_id"] == outcome_id

    my_matches = [m for m in matches if mine(m)]
    my_observations = [o for o in observations if mine(o)]
    chain, cited = _chain(outcome, receipts, handoffs, experiences, decided=bool(my_matches or my_observations))
    items = OutcomeItems(outcome)
    by_item = {(m["failure_ref"]["item_kind"], m["failure_ref"]["item_index"]): m for m in my_matches}
    wanted = {m["candidate_set_digest"] for m in my_matches if m["candidate_refs"] is None}
    sets = {s["candidate_set_digest"]: s["candidate_refs"] for s in candidate_sets
            if s["scope_id"] == scope_id and s["candidate_set_digest"] in wanted}

    def candidates(match: dict) -> list[str] | None:
        refs = match["candidate_refs"] if match["candidate_refs"] is not None else sets.get(match["candidate_set_digest"])
        return None if refs is None else [_label(ref) for ref in refs]
    failure_items = []
    for item in items.failure_items():
        match = by_item.get((item.item_kind, item.item_index))
        failure_items.append({
            "item_kind": item.item_kind,
            "item_index": item.item_index,
            "match_input": item.match_input,
            "match": None if match is None else {
                "candidate_set_mode": match["candidate_set_mode"],
                "candidate_set_digest": match["candidate_set_digest"],
                "candidates": candidates(match),
                "result": match["result"],
                "target": _label(match["artifact_ref"]),
            },
        })
    return {
        "scope_id": scope_id,
        "task_outcome": {"source_id": outcome_id, "journal_position": outcome["journal_position"], "status": outcome["status"]},
        "chain": chain,
        "failure_items": failure_items,
        "revisions": _revisions(chain["status"] == "linked", cited, items, my_matches, my_observations, experiences),
    }


def _chain(outcome: dict, receipts: dict, handoffs: dict, experiences: dict, decided: bool) -> tuple[dict, list[tuple[str, int]]]:
    """contract §5 for one outcome, with the reason it is (not) linked, and
    the cited failure-bearing revisions as (artifact_id, revision)."""
    cited: list[tuple[str, int]] = []
    receipt_ref = outcome["handoff_receipt_ref"]
    chain = {"status": "unlinked", "receipt": None, "handoff": None, "cited": [], "reason": ""}
    if receipt_ref is None:
        chain["reason"] = "the outcome names no Handoff Receipt"
        return chain, cited
    receipt = receipts.get(receipt_ref["source_id"])
    chain["receipt"] = receipt_ref["source_id"]
    missing = None
    if receipt is None:
        missing = f"receipt {receipt_ref['source_id']} was never seen"
    else:
        target = receipt_target(receipt)
        if target is None:
            chain["reason"] = (
                f"receipt {receipt_ref['source_id']} does not resolve (status={receipt['status']}, "
                f"selection={receipt['selection']}, evidence_status={receipt['evidence_status']}, "
                f"selected_revision={_label(receipt['selected_revision'])})"
            )
            return chain, cited
        chain["handoff"] = _label(target)
        handoff = handoffs.get((target["artifact_id"], target["revision"]))
        if handoff is None:
            missing = f"Handoff {_label(target)} was never seen"
        else:
            for artifact_id, revision in distinct_experience_citations(handoff):
                experience = experiences.get((artifact_id, revision))
                if experience is None:
                    missing = f"cited Experience {artifact_id} r{revision} was never seen"
                    break
                if experience["content"]["failure"] is not None:
                    cited.append((artifact_id, revision))
                    chain["cited"].append(f"{artifact_id} r{revision}")
    if missing is not None:
        chain["status"] = "unlinked" if decided else "pending"
        chain["reason"] = (
            f"missing provenance: {missing}; decided as unlinked when the provenance horizon passed"
            if decided else f"pending: {missing} (decided as unlinked when the provenance horizon passes)"
        )
        return chain, []
    chain["status"] = "linked"
    chain["reason"] = f"receipt {receipt_ref['source_id']} resolves to Handoff {chain['handoff']}"
    return chain, cited


def _revisions(linked: bool, cited: list[tuple[str, int]], items: OutcomeItems, matches: list[dict], observations: list[dict], experiences: dict) -> list[dict]:
    """Per cited (linked) or matched (unlinked) revision: the verdict or why
    there is none (contract §7)."""
    matched: dict[tuple[str, int], int] = {}
    for match in matches:
        if match["result"] == "matched":
            key = (match["artifact_ref"]["artifact_id"], match["artifact_ref"]["revision"])
            matched[key] = matched.get(key, 0) + 1
    events = {(o["artifact_ref"]["artifact_id"], o["artifact_ref"]["revision"]): set() for o in observations}
    for o in observations:
        events[(o["artifact_ref"]["artifact_id"], o["artifact_ref"]["revision"])].add(o["event"])
    keys = cited if linked else sorted(matched)
    rows = []
    for key in sorted(keys, key=lambda k: ref_order(experience_ref(*k))):
        failure = _failure_keys(experiences[key]["content"]) if key in experiences else None
        recorded = events.get(key, set())
        verdict = "recurred" if "recurred" in recorded else "avoided" if "avoided" in recorded else None
        if verdict is not None:
            reason = f"{verdict}: recorded in the ledger"
        elif matched.get(key, 0) >= 2:
            reason = f"no verdict: {matched[key]} failure items matched this revision (ambiguous verdict)"
        elif not linked:
            reason = "no verdict: an unlinked outcome writes only recurred"
        elif failure is None:
            reason = "no verdict: the revision carries no failure block"
        else:
            reason = "unknown: " + (avoided_binding(items, failure)[1] or "the avoided binding holds but no verdict is recorded")
        rows.append({
            "artifact_ref": _label(experience_ref(*key)),
            "signature_key": None if failure is None else failure["signature_key"],
            "repair_surface": None if failure is None else failure["repair_surface"],
            "selected": "selected" in recorded,
            "verdict": verdict,
            "reason": reason,
        })
    return rows
