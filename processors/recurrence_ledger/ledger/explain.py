"""Why an outcome counted the way it did: the evidence chain of one Task
Outcome, from the ledger's own records (contract §5–§7).

``explain_outcome`` takes the scope's source events and the RecurrenceMatch
and RecurrenceObservation records already written for the outcome. Matches
and verdicts are read from the ledger, never decided again; for every cited
revision without a verdict the exact reason (contract §17, with the items
that decided it) is given by the same functions the processor decides with
(``chain.receipt_target``, ``matching.OutcomeItems``, ``verdicts.bind``,
``verdicts.unknown_reason``), so an explanation cannot drift from the rules.
A forward reference (contract §16) that made the outcome unlinked, or kept
a cited revision out of its cited set, is named.
"""

from __future__ import annotations

from recurrence_ledger.errors import RecurrenceLedgerError

from collections.abc import Iterable
from fractions import Fraction
from typing import NamedTuple

from recurrence_ledger.ledger.chain import distinct_experience_citations, receipt_target
from recurrence_ledger.ledger.deadletter import read_at
from recurrence_ledger.ledger.matching import OutcomeItems
from recurrence_ledger.ledger.normalize import normalize
from recurrence_ledger.ledger.state import experience_ref, ref_order
from recurrence_ledger.ledger.verdicts import Binding, bind, unknown_reason
from recurrence_ledger.catalogue import EXPERIENCE_REVISIONS, HANDOFF_RECEIPTS, HANDOFF_REVISIONS, TASK_OUTCOMES


class OutcomeNotFound(RecurrenceLedgerError, LookupError):
    """No Task Outcome with that source_id in the scope's events."""


class Rejected(NamedTuple):
    """An input event the ledger never applied (contract §9): its event
    ``kind`` and ``value`` as decoded (a JSON object, not necessarily a
    valid event) and its ``dead_letter`` (a DeadLetter record's value)."""

    kind: str
    value: dict
    dead_letter: dict


def _dead_lettered(scope_id: str, outcome_id: str, rejected: Iterable[Rejected]) -> str | None:
    """Why the Task Outcome ``outcome_id`` of ``scope_id`` was dead-lettered
    — its reason, where it was read and the message — or None when it was not."""
    for kind, value, letter in rejected:
        ref = value.get("source_ref")
        if kind == TASK_OUTCOMES and value.get("scope_id") == scope_id and isinstance(ref, dict) and ref.get("source_id") == outcome_id:
            return f"{letter['reason']} at {read_at(letter)}: {letter['message']}"
    return None


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
    input_ended: bool = False,
    rejected: Iterable[Rejected] = (),
) -> dict:
    """The evidence chain of task outcome ``outcome_id`` in ``scope_id``.

    ``events``: ``(kind, value)`` source events (contract §3) of the scope;
    ``matches`` / ``observations`` / ``candidate_sets``: ledger records (any
    scope; filtered here) — a scope_heads match names its CandidateSet by
    digest (contract §6), resolved through ``candidate_sets``. Returns a
    JSON-compatible dict: ``task_outcome``, ``chain`` (status linked /
    unlinked / pending-or-missing-provenance and its reason;
    ``forward_references``: the forward references, contract §16, among
    its links, each ``{referring, referring_position, referenced,
    referenced_position}``), ``failure_items`` (each with its
    RecurrenceMatch: ``candidates`` is None when its set is not among
    ``candidate_sets``), and ``revisions`` (per cited or targeted revision:
    selected, verdict, or the reason there is none; for an unknown
    selection ``unknown_reason``, contract §17, and ``decided_by``, the
    outcome's items that decided it, e.g. ``"check[1]"``). ``input_ended``:
    the input is a whole journal, whose end decided every outcome still
    missing provenance as unlinked (contract §5) — also one that left no
    record to tell it by (no failure item, no selection). Raises
    OutcomeNotFound — saying why when the outcome is among ``rejected``
    (the input events the ledger dead-lettered; ``events`` holds only those
    it applied).
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
        why = _dead_lettered(scope_id, outcome_id, rejected)
        if why is not None:
            raise OutcomeNotFound(f"task outcome {outcome_id!r} of scope {scope_id!r} was dead-lettered, so the ledger never applied it: {why}")
        raise OutcomeNotFound(f"no task outcome {outcome_id!r} in scope {scope_id!r}")

    def mine(record: dict) -> bool:
        return record["scope_id"] == scope_id and record["task_outcome_ref"]["source_id"] == outcome_id

    my_matches = [m for m in matches if mine(m)]
    my_observations = [o for o in observations if mine(o)]
    chain, cited = _chain(outcome, receipts, handoffs, experiences, decided=bool(my_matches or my_observations), input_ended=input_ended)
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
        "revisions": _revisions(chain["status"] == "linked", cited, items, failure_items, my_matches, my_observations, experiences),
    }


def _forward(referring: str, referring_position: int, referenced: str, referenced_position: int) -> dict:
    return {"referring": referring, "referring_position": referring_position,
            "referenced": referenced, "referenced_position": referenced_position}


def _forward_reason(forward: dict) -> str:
    return (
        f"forward reference: {forward['referenced']} is at journal position {forward['referenced_position']}, "
        f"after {forward['referring']} at {forward['referring_position']}; a reference to a later event links "
        "nothing (contract §16), so the outcome was decided as unlinked at once"
    )


def _chain(outcome: dict, receipts: dict, handoffs: dict, experiences: dict, decided: bool,
           input_ended: bool = False) -> tuple[dict, list[tuple[str, int]]]:
    """contract §5 and §16 for one outcome, with the reason it is (not)
    linked, and the cited failure-bearing revisions as (artifact_id,
    revision)."""
    cited: list[tuple[str, int]] = []
    receipt_ref = outcome["handoff_receipt_ref"]
    chain = {"status": "unlinked", "receipt": None, "handoff": None, "cited": [], "reason": "", "forward_references": []}
    if receipt_ref is None:
        chain["reason"] = "the outcome names no Handoff Receipt"
        return chain, cited
    receipt = receipts.get(receipt_ref["source_id"])
    chain["receipt"] = receipt_ref["source_id"]
    outcome_label = f"task outcome {outcome['source_ref']['source_id']}"
    missing = None
    if receipt is None:
        missing = f"receipt {receipt_ref['source_id']} was never seen"
    elif receipt["journal_position"] > outcome["journal_position"]:
        forward = _forward(outcome_label, outcome["journal_position"], f"receipt {receipt_ref['source_id']}", receipt["journal_position"])
        chain["forward_references"].append(forward)
        chain["reason"] = _forward_reason(forward)
        return chain, cited
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
        elif handoff["journal_position"] > receipt["journal_position"]:
            forward = _forward(f"receipt {receipt_ref['source_id']}", receipt["journal_position"], f"Handoff {_label(target)}",
                               handoff["journal_position"])
            chain["forward_references"].append(forward)
            chain["reason"] = _forward_reason(forward)
            return chain, cited
        else:
            for artifact_id, revision in distinct_experience_citations(handoff):
                experience = experiences.get((artifact_id, revision))
                if experience is None:
                    missing = f"cited Experience {artifact_id} r{revision} was never seen"
                    break
                if experience["journal_position"] > handoff["journal_position"]:
                    chain["forward_references"].append(_forward(
                        f"Handoff {_label(target)}", handoff["journal_position"], f"Experience {artifact_id} r{revision}",
                        experience["journal_position"]))
                elif experience["content"]["failure"] is not None:
                    cited.append((artifact_id, revision))
                    chain["cited"].append(f"{artifact_id} r{revision}")
    if missing is not None:
        chain["status"] = "unlinked" if decided or input_ended else "pending"
        chain["reason"] = (
            f"missing provenance: {missing}; decided as unlinked by the provenance horizon or, at the latest, the end of the input"
            if input_ended else f"missing provenance: {missing}; decided as unlinked when the provenance horizon passed"
            if decided else f"pending: {missing} (decided as unlinked when the provenance horizon passes)"
        )
        chain["forward_references"] = []
        return chain, []
    chain["status"] = "linked"
    chain["reason"] = f"receipt {receipt_ref['source_id']} resolves to Handoff {chain['handoff']}"
    if chain["forward_references"]:
        chain["reason"] += "; " + "; ".join(
            f"it cites {forward['referenced']}, published later (position {forward['referenced_position']}): "
            "a forward citation, not a member of the cited set (contract §16)"
            for forward in chain["forward_references"]
        )
    return chain, cited


def _item(kind: str, index: int) -> str:
    return f"{kind}[{index}]"


def _unknown(key: tuple[str, int], failure: dict, items: OutcomeItems, failure_items: list[dict], matched: dict) -> tuple[str | None, list[str], str]:
    """contract §17 for a selected revision without a verdict: (reason code,
    the items that decided it, the sentence)."""
    hits = matched.get(key, [])
    ambiguous = [_item(item["item_kind"], item["item_index"]) for item in failure_items
                 if item["match"] is not None and item["match"]["result"] == "ambiguous" and item["match_input"] == failure["signature_key"]]
    binding = None if hits else bind(items, failure)
    try:
        code = unknown_reason(len(hits), bool(ambiguous), binding)
    except ValueError:
        return None, [], "no verdict recorded, though the avoided binding holds"
    if code == "multiple_matches":
        return code, hits, f"{len(hits)} failure items matched this revision ({', '.join(hits)}); one outcome adds at most one recurrence (contract §7)"
    if code == "ambiguous":
        return code, ambiguous, f"{', '.join(ambiguous)} matched this revision's cue and another candidate's: ambiguous, no match (contract §6)"
    return code, *_binding_sentence(code, binding, failure, items)


def _binding_sentence(code: str, binding: Binding, failure: dict, items: OutcomeItems) -> tuple[list[str], str]:
    observations = [_item("observation", index) for index in binding.observations]
    checks = [_item("check", index) for index in binding.checks]
    condition, subject = failure["condition_key"], failure["check_subject_key"]
    if code == "condition_empty":
        return [], "the revision's verification.condition normalizes to the empty string: it can never be avoided"
    if code == "condition_not_observed":
        return [], f"no observation names the condition '{condition}'"
    if code == "condition_unverified":
        return observations, f"{', '.join(observations)} name the condition '{condition}' but are only declared or have no exact evidence"
    if code == "condition_duplicated":
        return observations, f"{', '.join(observations)}: {len(observations)} verified observations of the condition (exactly one needed)"
    if code == "check_missing":
        return observations, f"no check is the bound check '{subject}': it did not run"
    if code == "check_unverified":
        return [*observations, *checks], f"{', '.join(checks)}: the bound check '{subject}' is only declared or has no exact evidence"
    if code == "check_duplicated":
        return [*observations, *checks], f"{', '.join(checks)}: {len(checks)} verified bound checks (exactly one needed)"
    status = items.outcome["checks"][binding.checks[0]]["status"]
    if code == "check_not_run":
        return [*observations, *checks], f"the bound check {checks[0]} '{subject}' is {status}: it did not run"
    return [*observations, *checks], (
        f"the bound check {checks[0]} '{subject}' {status}, but no failure item matched this revision: the check and the cue disagree")


def _revisions(linked: bool, cited: list[tuple[str, int]], items: OutcomeItems, failure_items: list[dict], matches: list[dict],
               observations: list[dict], experiences: dict) -> list[dict]:
    """Per cited (linked) or matched (unlinked) revision: the verdict or why
    there is none (contract §7, §17)."""
    matched: dict[tuple[str, int], list[str]] = {}
    for match in matches:
        if match["result"] == "matched":
            key = (match["artifact_ref"]["artifact_id"], match["artifact_ref"]["revision"])
            matched.setdefault(key, []).append(_item(match["failure_ref"]["item_kind"], match["failure_ref"]["item_index"]))
    events = {(o["artifact_ref"]["artifact_id"], o["artifact_ref"]["revision"]): set() for o in observations}
    for o in observations:
        events[(o["artifact_ref"]["artifact_id"], o["artifact_ref"]["revision"])].add(o["event"])
    keys = cited if linked else sorted(matched)
    rows = []
    for key in sorted(keys, key=lambda k: ref_order(experience_ref(*k))):
        failure = _failure_keys(experiences[key]["content"]) if key in experiences else None
        recorded = events.get(key, set())
        verdict = "recurred" if "recurred" in recorded else "avoided" if "avoided" in recorded else None
        code, decided_by = None, []
        if verdict is not None:
            reason = f"{verdict}: recorded in the ledger"
        elif not linked and len(matched.get(key, [])) >= 2:
            reason = f"no verdict: {len(matched[key])} failure items matched this revision ({', '.join(matched[key])})"
        elif not linked:
            reason = "no verdict: an unlinked outcome writes only recurred"
        elif failure is None:
            reason = "no verdict: the revision carries no failure block"
        else:
            code, decided_by, sentence = _unknown(key, failure, items, failure_items, matched)
            reason = f"unknown ({code}): {sentence}" if code else f"unknown: {sentence}"
        rows.append({
            "artifact_ref": _label(experience_ref(*key)),
            "signature_key": None if failure is None else failure["signature_key"],
            "repair_surface": None if failure is None else failure["repair_surface"],
            "selected": "selected" in recorded,
            "verdict": verdict,
            "reason": reason,
            "unknown_reason": code,
            "decided_by": decided_by,
        })
    return rows


class RevisionNotFound(RecurrenceLedgerError, LookupError):
    """No revision-statistics row for that revision in the scope."""


def explain_effect(
    scope_id: str, artifact_id: str, revision: int, revision_rows: Iterable[dict], holdout_observations: Iterable[dict],
    observations: Iterable[dict], min_resolved: int, probability: Fraction,
) -> dict:
    """Why a revision's effect verdict is what it is (contract §21.4), from
    the ledger's own records: its last RevisionStatistics row (the
    published ``effect``), its HoldoutObservations (the withheld arm, each
    with its verdict or reason and its assignment) and its selected /
    recurred / avoided observations (the treated arm). The verdict is read,
    never decided again; ``rule`` restates which condition of §21.4 it
    meets under the policy given (``min_resolved``, ``probability``: the
    deployment's effect_min_resolved and effect_probability) — compared
    with the published, rounded probability, so it names the rule, not an
    exact recomputation. Raises RevisionNotFound without a row."""
    key = (scope_id, artifact_id, revision)
    rows = [row for row in revision_rows if (row["scope_id"], row["artifact_ref"]["artifact_id"], row["artifact_ref"]["revision"]) == key]
    if not rows:
        raise RevisionNotFound(f"no revision-statistics row for {artifact_id} r{revision} in scope {scope_id!r}")
    row = max(rows, key=lambda r: r.get("version", 0))
    effect = row.get("effect")
    withheld = sorted(
        (o for o in holdout_observations
         if (o["scope_id"], o["artifact_ref"]["artifact_id"], o["artifact_ref"]["revision"]) == key),
        key=lambda o: o["task_outcome_position"],
    )
    treated = sorted(
        (o for o in observations
         if (o["scope_id"], o["artifact_ref"]["artifact_id"], o["artifact_ref"]["revision"]) == key and o["event"] != "selected"),
        key=lambda o: o["task_outcome_position"],
    )
    return {
        "scope_id": scope_id,
        "revision": f"{artifact_id} r{revision}",
        "effect": effect,
        "rule": None if effect is None else effect_rule(effect, min_resolved, probability),
        "withheld": [
            {"task_outcome": o["task_outcome_ref"]["source_id"], "position": o["task_outcome_position"], "verdict": o["verdict"],
             "reason": o["reason"], "assignment": o["assignment"]}
            for o in withheld
        ],
        "mismatched": [o["task_outcome_ref"]["source_id"] for o in withheld if o["assignment"] == "mismatch"],
        "treated": [
            {"task_outcome": o["task_outcome_ref"]["source_id"], "position": o["task_outcome_position"], "verdict": o["event"]}
            for o in treated
        ],
    }


def effect_rule(effect: dict, min_resolved: int, probability: Fraction) -> str:
    """The condition of contract §21.4 a published effect meets, in words."""
    n_t, n_w = effect["treated"]["resolved"], effect["withheld"]["resolved"]
    if effect["verdict"] == "insufficient":
        short = [f"{name} {n} < {min_resolved}" for name, n in (("treated", n_t), ("withheld", n_w)) if n < min_resolved]
        return f"insufficient: an arm has fewer than effect_min_resolved resolved observations ({', '.join(short) or 'per the workers policy'})"
    p = effect["probability_helps"]
    if effect["verdict"] == "helps":
        return f"helps: both arms have ≥ {min_resolved} resolved; probability_helps {p:.4f} ≥ effect_probability {probability}"
    if effect["verdict"] == "harms":
        return f"harms: both arms have ≥ {min_resolved} resolved; probability_helps {p:.4f} ≤ 1 − effect_probability = {1 - probability}"
    return f"undecided: both arms have ≥ {min_resolved} resolved; probability_helps {p:.4f} between {1 - probability} and {probability}"
