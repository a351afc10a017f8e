"""contract §21 (rev. 4): withheld lessons — the withheld set of a Handoff
revision (§21.2), the control verdict and its HoldoutObservation (§21.3),
the verified assignment of each pair (§21.5) and the counts behind a
revision's effect (§21.4; the probability itself is
:mod:`recurrence_ledger.ledger.effect`).

Nothing here changes a RecurrenceMatch, a RecurrenceObservation, a streak
or a review candidate: the withheld arm lives in its own state records
(``effect`` per revision) and its own topic.

State it keeps:

- on a Handoff revision's record, ``withholds``: its distinct withheld
  Experience revisions (``[artifact_id, revision]``, ArtifactRef order)
  that it does not also cite — present only when there are some, so a
  Handoff without withheld entries is stored as before;
- ``holdwait`` lists: Handoff revisions whose withheld entry names an
  Experience revision not seen yet (for §16's forward count when it
  arrives);
- ``effect`` per revision: ``withheld`` (all its HoldoutObservations),
  ``resolved`` / ``recurred`` (the withheld arm outside mismatches),
  ``mismatches`` (mismatched pairs in both arms), ``treated_resolved`` /
  ``treated_recurred`` (the treated pairs left out as mismatches) and
  ``verdict`` (as last published, for the scope's ``effects``);
- in the scope record: ``withheld``, ``holdout_conflicts`` and ``effects``.
"""

from __future__ import annotations

from recurrence_ledger.holdout import assign
from recurrence_ledger.ledger import causal
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.ledger.effect import Arm, assess_effect
from recurrence_ledger.ledger.holdout_records import EFFECT_VERDICTS
from recurrence_ledger.ledger.matching import FailureItem, OutcomeItems
from recurrence_ledger.ledger.normalize import digest
from recurrence_ledger.ledger.ratios import published_ratio
from recurrence_ledger.ledger.severity import is_critical
from recurrence_ledger.ledger.state import LedgerState
from recurrence_ledger.ledger.verdicts import avoided_refs, bind

#: The HandoffRevision field of §21.1.
WITHHELD_CITATIONS = "withheld_citations"


def identity_value(value: dict) -> dict:
    """A HandoffRevision as its identity digest sees it (§3): without an
    empty ``withheld_citations``, so a Handoff written before revision 4 and
    the same Handoff read today (the field defaulted to ``[]``) are the same
    event, never an identity conflict."""
    if value.get(WITHHELD_CITATIONS) == []:
        return {key: item for key, item in value.items() if key != WITHHELD_CITATIONS}
    return value


def on_handoff(state: LedgerState, scope: dict, scope_id: str, record: dict, value: dict) -> None:
    """A new Handoff revision: keep its withheld entries that are not void
    (``record["withholds"]``), count the (Handoff, Experience) pairs named in
    both lists in the scope's ``holdout_conflicts`` (from the Handoff
    alone), count forward entries among the known Experience revisions in
    ``forward_references`` (§16) and register the unknown ones
    (``holdwait``). Entries naming a Handoff revision are ignored."""
    named = {
        (entry["artifact_ref"]["artifact_id"], entry["artifact_ref"]["revision"])
        for entry in value.get(WITHHELD_CITATIONS) or ()
        if entry["artifact_ref"]["family"] == "experience"
    }
    if not named:
        return
    cited = {(artifact_id, revision) for artifact_id, revision in record["cites"]}
    conflicts = named & cited
    if conflicts:
        scope["holdout_conflicts"] = scope.get("holdout_conflicts", 0) + len(conflicts)
    withholds = sorted(named - cited)
    if not withholds:
        return
    record["withholds"] = [list(pair) for pair in withholds]
    handoff = value["artifact_ref"]
    for artifact_id, revision in withholds:
        experience = state.get("experience", scope_id, artifact_id, revision)
        if experience is None:
            state.append([handoff["artifact_id"], handoff["revision"]], "holdwait", scope_id, artifact_id, revision)
        elif causal.points_forward(record["position"], experience):
            causal.count(scope)


def on_experience(state: LedgerState, scope: dict, scope_id: str, artifact_ref: dict, position: int) -> None:
    """An Experience revision arrived that earlier Handoffs withhold: a
    forward entry (the Handoff at an earlier position) counts now (§16)."""
    for handoff_id, handoff_revision in state.pop_list("holdwait", scope_id, artifact_ref["artifact_id"], artifact_ref["revision"]):
        handoff = state.get("handoff", scope_id, handoff_id, handoff_revision)
        if position > handoff.get("position", -1):
            causal.count(scope)


# -- §21.5 the verified assignment ---------------------------------------------


def assignment(config: LedgerConfig, scope_id: str, handoff_ref: dict, artifact_ref: dict, failure: dict, withheld: bool) -> str:
    """The assignment of one (revision, outcome) pair: ``unverified``
    without the holdout policy; else ``verified`` when the pair's arm
    (``withheld``) is the assigned one and ``mismatch`` otherwise. A
    critical revision is assigned to the treated arm."""
    if config.holdout_salt is None or config.holdout_rate is None:
        return "unverified"
    assigned = not is_critical(failure) and assign(
        config.holdout_salt, config.holdout_rate, scope_id, handoff_ref["artifact_id"], artifact_ref["artifact_id"],
    )
    return "verified" if assigned == withheld else "mismatch"


# -- §21.3 the control verdict ---------------------------------------------------


def control_verdict(evidence: OutcomeItems, items: list[FailureItem], failure: dict) -> dict:
    """What E would have got cited alone: ``{verdict, reason, failure_ref,
    condition_ref, check_ref}`` — recurred when exactly one failure item
    has E's cue as its match input, else avoided when none has and §7's
    conditions 2 and 3 hold, else null with §17's first reason
    (``multiple_matches`` for two or more such items; ``ambiguous`` never
    applies)."""
    hits = [item for item in items if item.match_input and item.match_input == failure["signature_key"]]
    result = {"verdict": None, "reason": None, "failure_ref": None, "condition_ref": None, "check_ref": None}
    if len(hits) == 1:
        return {**result, "verdict": "recurred", "failure_ref": hits[0].ref}
    if hits:
        return {**result, "reason": "multiple_matches"}
    binding = bind(evidence, failure)
    if binding.reason is not None:
        return {**result, "reason": binding.reason}
    condition_ref, check_ref = avoided_refs(evidence, binding)
    return {**result, "verdict": "avoided", "condition_ref": condition_ref, "check_ref": check_ref}


def holdout_observation(
    scope_id: str, outcome: dict, artifact_ref: dict, signature_key: str, receipt_ref: dict, handoff_ref: dict, control: dict, assigned: str,
) -> dict:
    """A HoldoutObservation record (§21.3); ``observation_id`` = digest of
    the record without it."""
    record = {
        "scope_id": scope_id,
        "artifact_ref": artifact_ref,
        "signature_key": signature_key,
        "task_outcome_ref": outcome["source_ref"],
        "task_outcome_position": outcome["journal_position"],
        "handoff_receipt_ref": receipt_ref,
        "handoff_ref": handoff_ref,
        "verdict": control["verdict"],
        "reason": control["reason"],
        "failure_ref": control["failure_ref"],
        "condition_ref": control["condition_ref"],
        "check_ref": control["check_ref"],
        "assignment": assigned,
    }
    return {"observation_id": digest(record), **record}


# -- §21.4 the arms ----------------------------------------------------------------


def _effect_record(state: LedgerState, scope_id: str, artifact_ref: dict) -> dict:
    return state.get("effect", scope_id, artifact_ref["artifact_id"], artifact_ref["revision"]) or {
        "withheld": 0, "resolved": 0, "recurred": 0, "mismatches": 0, "treated_resolved": 0, "treated_recurred": 0, "verdict": None,
    }


def count_holdout(state: LedgerState, scope: dict, scope_id: str, observation: dict) -> None:
    """Count a HoldoutObservation in its revision's withheld arm (outside a
    mismatch) and in the scope's ``withheld``."""
    ref = observation["artifact_ref"]
    record = _effect_record(state, scope_id, ref)
    record["withheld"] += 1
    if observation["assignment"] == "mismatch":
        record["mismatches"] += 1
    elif observation["verdict"] is not None:
        record["resolved"] += 1
        record["recurred"] += observation["verdict"] == "recurred"
    state.put(record, "effect", scope_id, ref["artifact_id"], ref["revision"])
    scope["withheld"] = scope.get("withheld", 0) + 1


def count_treated(
    state: LedgerState, config: LedgerConfig, scope_id: str, handoff_ref: dict, artifact_ref: dict, failure: dict, event: str | None,
) -> None:
    """A cited pair (its terminal verdict ``event``, or None): when it is an
    assignment mismatch, leave it out of the treated arm. The treated arm
    itself is read from the revision's streak record (its verdicts on
    linked outcomes), so nothing is written for a verified or unverified
    pair."""
    if assignment(config, scope_id, handoff_ref, artifact_ref, failure, withheld=False) != "mismatch":
        return
    record = _effect_record(state, scope_id, artifact_ref)
    record["mismatches"] += 1
    record["treated_resolved"] += event is not None
    record["treated_recurred"] += event == "recurred"
    state.put(record, "effect", scope_id, artifact_ref["artifact_id"], artifact_ref["revision"])


def effect(state: LedgerState, config: LedgerConfig, scope: dict, scope_id: str, artifact_id: str, revision: int, streak: dict | None) -> dict | None:
    """RevisionStatistics ``effect`` of a revision (§21.4), None when it has
    no HoldoutObservation and no assignment mismatch. ``streak``: the
    revision's streak record (its linked verdicts: the treated arm before
    mismatches). Keeps the verdict in the revision's ``effect`` record and
    the scope's ``effects`` counts in step (so call it once per changed
    revision and batch)."""
    record = state.get("effect", scope_id, artifact_id, revision)
    if record is None:
        return None
    streak = streak or {}
    linked = streak.get("linked_verdicts", 0)
    treated_resolved = linked - record["treated_resolved"]
    treated_recurred = (linked - streak.get("avoided", 0)) - record["treated_recurred"]
    assessment = assess_effect(
        Arm(treated_recurred, treated_resolved), Arm(record["recurred"], record["resolved"]), config.effect_min_resolved, config.effect_probability,
    )
    if assessment.verdict != record["verdict"]:
        effects = scope.setdefault("effects", {})
        if record["verdict"] is not None:
            effects[record["verdict"]] -= 1
        effects[assessment.verdict] = effects.get(assessment.verdict, 0) + 1
        record["verdict"] = assessment.verdict
        state.put(record, "effect", scope_id, artifact_id, revision)
    return {
        "treated": {"resolved": treated_resolved, "recurred": treated_recurred},
        "withheld": {"withheld": record["withheld"], "resolved": record["resolved"], "recurred": record["recurred"]},
        "assignment_mismatches": record["mismatches"],
        "recurrence_rate_treated": published_ratio(treated_recurred, treated_resolved),
        "recurrence_rate_withheld": published_ratio(record["recurred"], record["resolved"]),
        "probability_helps": assessment.probability_helps,
        "verdict": assessment.verdict,
    }


def effect_verdict(state: LedgerState, scope_id: str, artifact_id: str, revision: int) -> str | None:
    """A revision's effect verdict as last computed (ReviewStatus
    ``repair.effect``, §21.4), None without an effect."""
    record = state.get("effect", scope_id, artifact_id, revision)
    return None if record is None else record["verdict"]


def scope_figures(scope: dict) -> dict:
    """ScopeStatistics' §21 figures: ``withheld``, ``holdout_conflicts``
    and ``effects`` (every verdict present, in §21.4's order)."""
    effects = scope.get("effects", {})
    return {
        "withheld": scope.get("withheld", 0),
        "holdout_conflicts": scope.get("holdout_conflicts", 0),
        "effects": {verdict: effects.get(verdict, 0) for verdict in EFFECT_VERDICTS},
    }

