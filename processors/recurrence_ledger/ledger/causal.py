"""contract §16 (rev. 3): causal order — every reference of the linked chain
points backwards in its scope's journal.

A Task Outcome at position p links only through a receipt at a position
below p; a receipt resolves only to a Handoff revision at a position below
the receipt's; an Experience revision is a member of a Handoff's cited set
only when its position is below the Handoff's. A reference to an event at a
later position is a *forward reference*: it links nothing, and that is
final (``chain.resolve`` applies the rule; this module counts).

``forward_references`` (ScopeStatistics) counts the distinct (referring
event, referenced event) pairs that point forward, once both are known,
whatever their arrival order. The pairs are the chain's three references:
Task Outcome → its ``handoff_receipt_ref``; a resolving receipt → its
``selected_revision`` (a receipt that does not resolve references nothing
the chain follows); Handoff revision → each distinct cited Experience
revision, with or without a failure block. A referring event whose
referenced event is still unknown leaves its position in a
``("forward_wait", scope_id, kind, *identity)`` list (an int per
reference, kept until the referenced event arrives), so every pair is
counted exactly once: when the second of the two is applied. (A Handoff's
unknown citations are remembered by its ``citewait`` records, see
``chain.count_late_citation``.)
"""

from __future__ import annotations

from recurrence_ledger.ledger.state import LedgerState


def points_forward(referring_position: int, referenced: dict) -> bool:
    """True when the referenced event (its state record, which keeps its
    ``position``) is at a later journal position than the referring one."""
    return referenced.get("position", -1) > referring_position


def count(scope: dict, pairs: int = 1) -> None:
    """``pairs`` more forward references in the scope record."""
    if pairs:
        scope["forward_references"] = scope.get("forward_references", 0) + pairs


def refer(state: LedgerState, scope: dict, scope_id: str, referring_position: int, referenced: dict | None, *key: object) -> None:
    """An event at ``referring_position`` references the event with store
    key parts ``key`` (``("receipt", source_id)`` or ``("handoff",
    artifact_id, revision)``), whose state record is ``referenced`` (None
    while unknown): count the pair now, or when the referenced event
    arrives (:func:`arrived`)."""
    if referenced is None:
        state.append(referring_position, "forward_wait", scope_id, *key)
    elif points_forward(referring_position, referenced):
        count(scope)


def arrived(state: LedgerState, scope: dict, scope_id: str, position: int, *key: object) -> None:
    """The event with store key parts ``key`` arrived at ``position``: count
    the references to it, made by events already applied, that point
    forward."""
    count(scope, sum(1 for referring in state.pop_list("forward_wait", scope_id, *key) if referring < position))
