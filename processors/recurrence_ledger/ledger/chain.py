"""contract §5: the linked chain, pending outcomes, and Handoff citation
coverage (§8 ``unlinked_handoff_citations``).

TaskOutcome.handoff_receipt_ref → HandoffReceipt (resolves only when
accepted + exact + available and ``selected_revision`` names a Handoff
revision) → Handoff revision → its cited Experience revisions that carry a
failure block (the *cited set*, distinct, in ArtifactRef order).

Every link points backwards in the journal (contract §16, rev. 3): a receipt
at a later position than the outcome, or a Handoff revision at a later
position than the receipt, links nothing (the outcome is unlinked, at once
and for good); a cited Experience revision at a later position than the
Handoff is no member of its cited set and no unlinked Handoff citation.
Positions are the ones the state keeps in each event's record.
"""

from __future__ import annotations

from typing import NamedTuple

from recurrence_ledger.ledger import causal
from recurrence_ledger.ledger.state import LedgerState, experience_ref

LINKED = "linked"
UNLINKED = "unlinked"
PENDING = "pending"


class Resolution(NamedTuple):
    """Outcome of resolving a Task Outcome's chain (an immutable tuple).

    ``status`` is LINKED, UNLINKED or PENDING. For LINKED, ``receipt_ref``
    (SourceRef dict), ``handoff_ref`` (ArtifactRef dict) and ``cited_set``
    (Experience ArtifactRef dicts with a failure block, sorted) are set. For
    PENDING, ``waiting_on`` names the missing entity as store key parts, e.g.
    ``("receipt", "R12")`` or ``("experience", "E7", 1)``. For LINKED,
    ``chain`` is the Handoff revision's cached :class:`CitedChain` (its
    ``cited_set`` is this one).
    """

    status: str
    receipt_ref: dict | None = None
    handoff_ref: dict | None = None
    cited_set: tuple[dict, ...] = ()
    waiting_on: tuple | None = None
    chain: CitedChain | None = None


class CitedChain:
    """What a Handoff revision resolves to once every revision it cites is
    known: its journal ``position``, its cited set (contract §5, §16: the
    citations at earlier positions) and, once a match needs it, that set
    frozen as a ``matching.CandidateSet`` (§6), and its withheld set
    (§21.2, rev. 4: the failure-bearing withheld revisions at earlier
    positions that it does not cite). They never change — the
    Handoff, the cited Experience revisions, their positions and failure
    blocks are immutable — so ``LedgerState`` caches one per Handoff
    revision."""

    __slots__ = ("position", "cited_set", "candidate_set", "withheld_set")

    def __init__(self, position: int, cited_set: tuple[dict, ...], withheld_set: tuple[dict, ...] = ()):
        self.position = position
        self.cited_set = cited_set
        self.candidate_set = None
        self.withheld_set = withheld_set


def receipt_target(receipt: dict) -> dict | None:
    """The Handoff revision a receipt resolves to, or None (contract §3).

    Resolution needs status = accepted, selection = exact, evidence_status =
    available and a ``selected_revision`` of family handoff. Whether that
    revision is known is checked at resolution time (§5: pending until then).
    """
    selected = receipt.get("selected_revision")
    if (
        receipt["status"] == "accepted"
        and receipt["selection"] == "exact"
        and receipt["evidence_status"] == "available"
        and selected is not None
        and selected["family"] == "handoff"
    ):
        return selected
    return None


def resolve(state: LedgerState, scope_id: str, outcome: dict) -> Resolution:
    """Resolve ``outcome``'s chain against what the processor has seen.

    Returns PENDING when the receipt, the Handoff revision or a cited or
    withheld (§21.2) Experience revision has not arrived yet (contract §5), UNLINKED when there
    is no receipt ref, the receipt does not resolve, or the receipt or the
    Handoff revision is a forward reference (§16: at a later position than
    the event that references it), LINKED otherwise. A cited revision at a
    later position than the Handoff is left out of the cited set (§16), and
    is waited for only while it is unknown.
    """
    receipt_ref = outcome.get("handoff_receipt_ref")
    if receipt_ref is None:
        return Resolution(UNLINKED)
    receipt = state.get("receipt", scope_id, receipt_ref["source_id"])
    if receipt is None:
        return Resolution(PENDING, waiting_on=("receipt", receipt_ref["source_id"]))
    target = receipt["resolves_to"]
    if target is None or causal.points_forward(outcome["journal_position"], receipt):
        return Resolution(UNLINKED)
    receipt_position = receipt.get("position", -1)
    chain = state.cached_chain(scope_id, target["artifact_id"], target["revision"])
    if chain is None:
        handoff = state.get("handoff", scope_id, target["artifact_id"], target["revision"])
        if handoff is None:
            return Resolution(PENDING, waiting_on=("handoff", target["artifact_id"], target["revision"]))
        if causal.points_forward(receipt_position, handoff):
            return Resolution(UNLINKED)
        handoff_position = handoff.get("position", -1)
        cited_set = []
        for artifact_id, revision in handoff["cites"]:
            experience = state.get("experience", scope_id, artifact_id, revision)
            if experience is None:
                return Resolution(PENDING, waiting_on=("experience", artifact_id, revision))
            if experience["failure"] is not None and not causal.points_forward(handoff_position, experience):
                cited_set.append(experience_ref(artifact_id, revision))
        withheld_set = []
        # contract §21.2: a withheld entry waits like a citation; a forward
        # one is no member and never makes the outcome wait.
        for artifact_id, revision in handoff.get("withholds", ()):
            experience = state.get("experience", scope_id, artifact_id, revision)
            if experience is None:
                return Resolution(PENDING, waiting_on=("experience", artifact_id, revision))
            if experience["failure"] is not None and not causal.points_forward(handoff_position, experience):
                withheld_set.append(experience_ref(artifact_id, revision))
        chain = CitedChain(handoff_position, tuple(cited_set), tuple(withheld_set))
        state.cache_chain(scope_id, target["artifact_id"], target["revision"], chain)
    elif chain.position > receipt_position:
        return Resolution(UNLINKED)
    return Resolution(LINKED, receipt_ref=receipt_ref, handoff_ref=target, cited_set=chain.cited_set, chain=chain)


def distinct_experience_citations(handoff: dict) -> list[list]:
    """Distinct cited Experience revisions of a Handoff as ``[artifact_id,
    revision]`` pairs in ArtifactRef order. A revision cited twice is one
    candidate (contract §5); citations of other families are not candidates."""
    pairs = {
        (c["artifact_ref"]["artifact_id"], c["artifact_ref"]["revision"])
        for c in handoff["artifact_citations"]
        if c["artifact_ref"]["family"] == "experience"
    }
    return [list(pair) for pair in sorted(pairs)]


# -- §8 unlinked_handoff_citations ------------------------------------------
# A (Handoff revision, cited failure-bearing Experience revision) pair counts
# until some Task Outcome links through that Handoff revision. A cited
# revision that has not arrived yet is counted when it arrives (if it carries
# a failure block and the Handoff is still unlinked). A cited revision at a
# later position than the Handoff (a forward citation, contract §16) is
# never counted here; it counts as a forward reference instead.


def count_new_handoff(state: LedgerState, scope: dict, scope_id: str, handoff_rec: dict, artifact_ref: dict) -> None:
    """Count a new Handoff revision's failure-bearing citations as unlinked
    and its forward citations as forward references; register the ones
    whose Experience revision is still unknown."""
    for artifact_id, revision in handoff_rec["cites"]:
        experience = state.get("experience", scope_id, artifact_id, revision)
        if experience is None:
            state.append([artifact_ref["artifact_id"], artifact_ref["revision"]], "citewait", scope_id, artifact_id, revision)
        elif causal.points_forward(handoff_rec["position"], experience):
            causal.count(scope)
        elif experience["failure"] is not None:
            handoff_rec["failure_pairs"] += 1
    scope["unlinked_handoff_citations"] += handoff_rec["failure_pairs"]


def count_late_citation(state: LedgerState, scope: dict, scope_id: str, artifact_ref: dict, has_failure: bool, position: int) -> None:
    """An Experience revision arrived, at ``position``, that earlier Handoffs
    cite."""
    for handoff_id, handoff_revision in state.pop_list("citewait", scope_id, artifact_ref["artifact_id"], artifact_ref["revision"]):
        handoff = state.get("handoff", scope_id, handoff_id, handoff_revision)
        if position > handoff.get("position", -1):
            causal.count(scope)
            continue
        if not has_failure:
            continue
        handoff["failure_pairs"] += 1
        if not handoff["linked"]:
            scope["unlinked_handoff_citations"] += 1
        state.put(handoff, "handoff", scope_id, handoff_id, handoff_revision)


def mark_linked(state: LedgerState, scope: dict, scope_id: str, handoff_ref: dict) -> None:
    """The first outcome linked through this Handoff revision closes its
    coverage gap."""
    handoff = state.get("handoff", scope_id, handoff_ref["artifact_id"], handoff_ref["revision"])
    if handoff["linked"]:
        return
    handoff["linked"] = True
    scope["unlinked_handoff_citations"] -= handoff["failure_pairs"]
    state.put(handoff, "handoff", scope_id, handoff_ref["artifact_id"], handoff_ref["revision"])
