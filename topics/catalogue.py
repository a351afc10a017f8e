"""The topic catalogue (contract §1): every topic the ledger reads or writes,
with its key, value schema, cleanup policy and retention.

Logical names are the contract's; a deployment may prefix every name
(``RL_TOPIC_PREFIX``, e.g. "prod."). Input topics must all have the same
partition count (co-partitioning by scope_id); output topics get the same
count so a scope's outputs stay on the partition of its inputs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Retention for "long retention" input topics and append-only ledgers: -1 = forever.
FOREVER = -1
SEVEN_DAYS_MS = 7 * 24 * 3600 * 1000
MAX_OUTPUT_MESSAGE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class TopicSpec:
    """One topic of contract §1.

    ``name``: logical name. ``direction``: "in" or "out". ``key``: what the
    record key is. ``schema``: Avro record name under schemas/ (the value).
    ``cleanup_policy``: "delete" or "compact". ``retention_ms``: -1 forever.
    ``schema_id``: the id written in the Confluent wire-format frame.
    """

    name: str
    direction: str
    key: str
    schema: str
    cleanup_policy: str
    retention_ms: int
    schema_id: int

    def config(self) -> dict[str, str]:
        """Topic configs for AdminClient.create_topics."""
        config = {"cleanup.policy": self.cleanup_policy, "retention.ms": str(self.retention_ms)}
        if self.direction == "out":
            # A RecurrenceMatch carries its whole frozen candidate set (contract §6),
            # which passes 1 MiB at ~25k heads in a scope.
            config["max.message.bytes"] = str(MAX_OUTPUT_MESSAGE_BYTES)
        if self.cleanup_policy == "compact":
            config.pop("retention.ms")
            config["min.cleanable.dirty.ratio"] = "0.1"
        return config


#: Schema ids of the Confluent wire-format frame. Without a Schema Registry
#: these fixed ids are the registry (``recurrence_ledger.schemas.codec``); a deployment with a
#: registry registers schemas/*.avsc under these ids' subjects.
SCHEMA_IDS: dict[str, int] = {
    "SourceEvent": 1,
    "ExperienceRevision": 2,
    "HandoffRevision": 3,
    "HandoffReceipt": 4,
    "TaskOutcome": 5,
    "RecurrenceMatch": 6,
    "RecurrenceObservation": 7,
    "ReviewCandidate": 8,
    "ScopeStatistics": 9,
    "DeadLetter": 10,
    "ExperienceCandidate": 11,
    "AdmissionDecision": 12,
    "RevisionStatistics": 13,
}


def _spec(name: str, direction: str, key: str, schema: str, cleanup: str = "delete", retention: int = FOREVER) -> TopicSpec:
    return TopicSpec(name, direction, key, schema, cleanup, retention, SCHEMA_IDS[schema])


SOURCE_JOURNAL = "source-journal"

CATALOGUE: tuple[TopicSpec, ...] = (
    _spec(SOURCE_JOURNAL, "in", "scope_id", "SourceEvent"),
    _spec("experience-revisions", "in", "scope_id", "ExperienceRevision"),
    _spec("handoff-revisions", "in", "scope_id", "HandoffRevision"),
    _spec("handoff-receipts", "in", "scope_id", "HandoffReceipt"),
    _spec("task-outcomes", "in", "scope_id", "TaskOutcome"),
    _spec("experience-candidates", "in", "scope_id", "ExperienceCandidate"),
    _spec("recurrence-matches", "out", "scope_id", "RecurrenceMatch"),
    _spec("recurrence-observations", "out", "scope_id", "RecurrenceObservation"),
    _spec("review-candidates", "out", "scope_id", "ReviewCandidate", retention=SEVEN_DAYS_MS * 52),
    _spec("recurrence-statistics", "out", "scope_id", "ScopeStatistics", cleanup="compact"),
    _spec("revision-statistics", "out", "scope_id + artifact_ref (canonical JSON)", "RevisionStatistics", cleanup="compact"),
    _spec("admission-decisions", "out", "scope_id", "AdmissionDecision"),
    _spec("dead-letter", "out", "original key", "DeadLetter", retention=SEVEN_DAYS_MS * 4),
)

BY_NAME: dict[str, TopicSpec] = {spec.name: spec for spec in CATALOGUE}
INPUT_TOPICS: tuple[str, ...] = tuple(spec.name for spec in CATALOGUE if spec.direction == "in")
OUTPUT_TOPICS: tuple[str, ...] = tuple(spec.name for spec in CATALOGUE if spec.direction == "out")
SCHEMA_BY_ID: dict[int, str] = {schema_id: name for name, schema_id in SCHEMA_IDS.items()}


def changelog_name(app_id: str) -> str:
    """Logical name of a deployment's compacted state changelog (the worker's
    store; Kafka Streams' ``<application.id>-<store>-changelog``)."""
    return f"{app_id}-ledger-state-changelog"


def replay_group(group_id: str) -> str:
    """Consumer group of the replay jobs of the deployment whose group is
    ``group_id`` (it commits no offsets)."""
    return f"{group_id}-replay"


def prefix() -> str:
    """The deployment prefix (env RL_TOPIC_PREFIX, default none)."""
    return os.environ.get("RL_TOPIC_PREFIX", "")


def physical(name: str, topic_prefix: str | None = None) -> str:
    """The Kafka topic name of logical topic ``name``."""
    return (prefix() if topic_prefix is None else topic_prefix) + name


def logical(physical_name: str, topic_prefix: str | None = None) -> str:
    """The logical name of a physical topic (inverse of :func:`physical`).
    Raises KeyError for a topic outside the catalogue."""
    active = prefix() if topic_prefix is None else topic_prefix
    if not physical_name.startswith(active) or physical_name[len(active):] not in BY_NAME:
        raise KeyError(physical_name)
    return physical_name[len(active):]
