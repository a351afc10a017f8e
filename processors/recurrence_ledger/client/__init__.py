"""The client library for upstream agent platforms (``docs/integrating.md``).

Build the six input events with typed constructors that refuse, before
anything is sent, what the ledger would dead-letter — naming the contract
rule (:class:`EventRefused`) — and publish them with a :class:`Publisher`::

    from recurrence_ledger import client

    outcome = client.task_outcome(scope_id="billing-api", journal_position=4, ...)
    with client.Publisher("localhost:9092", schema_registry_url="http://localhost:8081") as publisher:
        publisher.publish(outcome)

Importing this package starts nothing and connects to nothing.

- :mod:`recurrence_ledger.client.events`: ``task_outcome``,
  ``handoff_receipt``, ``handoff_revision``, ``experience_revision``,
  ``experience_candidate``, ``review_decision``, the generic ``event`` and
  ``EventRefused``; the models they return are the core's
  (``recurrence_ledger.ledger.models``);
- :mod:`recurrence_ledger.client.publisher`: ``Publisher``; a failed
  delivery is ``PublishError`` (``recurrence_ledger.kafka.kafka_io``);
- :mod:`recurrence_ledger.client.advisor`: ``Advisor``, the recall-time
  advisory of the ledger's API with a short cache, failing open, and its
  ``Advice``;
- ``assign`` and ``assignment_hash``: the verified holdout assignment
  (contract §21.5, ``recurrence_ledger.holdout``) — whether a lesson is
  withheld from a handoff, decided exactly as the ledger verifies it.
"""

from __future__ import annotations

from recurrence_ledger.client.advisor import UNKNOWN_ADVICE, Advice, Advisor  # noqa: F401
from recurrence_ledger.client.events import (  # noqa: F401 - the library's names
    EventRefused,
    event,
    experience_candidate,
    experience_revision,
    handoff_receipt,
    handoff_revision,
    kind_of,
    review_decision,
    rule_of,
    task_outcome,
)
from recurrence_ledger.client.publisher import Publisher  # noqa: F401
from recurrence_ledger.holdout import assign, assignment_hash  # noqa: F401 - the holdout assignment (contract §21.5)
from recurrence_ledger.kafka.kafka_io import PublishError  # noqa: F401
from recurrence_ledger.ledger.models import (  # noqa: F401 - the event models and value types, for type hints
    ArtifactRef,
    EvidenceRef,
    ExperienceCandidate,
    ExperienceRevision,
    HandoffReceipt,
    HandoffRevision,
    ReviewDecision,
    SourceRef,
    TaskOutcome,
)

__all__ = [
    "UNKNOWN_ADVICE", "Advice", "Advisor", "ArtifactRef", "assign", "assignment_hash", "EventRefused", "EvidenceRef", "ExperienceCandidate", "ExperienceRevision", "HandoffReceipt",
    "HandoffRevision", "PublishError", "Publisher", "ReviewDecision", "SourceRef", "TaskOutcome", "event",
    "experience_candidate", "experience_revision", "handoff_receipt", "handoff_revision", "kind_of",
    "review_decision", "rule_of", "task_outcome",
]
