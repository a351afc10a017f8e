"""The worker's two stages (contract §23.5), like the sub-topologies of a
Kafka Streams application joined by a repartition topic.

- the **scope stage** reads the input topics (co-partitioned by scope_id);
  its task p is the ledger over partition p of
  ``<app_id>-ledger-state-changelog``. At the end of each transaction it
  writes, besides its view records, each changed (scope, signature) count
  to the repartition topic, keyed by ``{group, signature_key}``;
- the **pattern stage** reads the repartition topic; its task p is the
  pattern stage over partition p of ``<app_id>-pattern-state-changelog``.
  Its consumed offsets, outputs (``pattern-candidates``,
  ``signature-patterns``) and changelog commit in the worker's one
  transaction, like the scope stage's.

Both are driven by the same loop (``worker.LedgerWorker``): the same
consumer (one group, the range assignor), the same checkpoint, each stage
with its own :class:`~recurrence_ledger.runtime.recovery.Recovery`. Kafka
Streams numbers such tasks ``0_p`` and ``1_p``; here a :class:`Stage` holds
one sub-topology's tasks by partition.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from recurrence_ledger.runtime.recovery import Recovery
from recurrence_ledger.runtime.task import Task


@dataclass
class Stage:
    """One sub-topology of the worker: its ``name`` (for the log), its
    physical ``inputs``, its physical ``changelog_topic``, the class of its
    tasks (``Task`` or ``PatternTask``), its ``recovery`` and its ``tasks``
    by partition."""

    name: str
    inputs: list[str]
    changelog_topic: str
    task_class: type[Task]
    recovery: Recovery
    tasks: dict[int, Task] = field(default_factory=dict)


def repartition_partition(key: bytes | None, partitions: int) -> int:
    """The repartition topic's partition of a record keyed ``key``: CRC-32
    of the key bytes modulo ``partitions`` — librdkafka's ``consistent``
    partitioner — so every count of one ``{group, signature_key}`` goes to
    one partition, whichever worker writes it. Raises ValueError for a
    record without a key or fewer than one partition."""
    if key is None or partitions < 1:
        raise ValueError("a repartition record has a key, and its topic at least one partition")
    return zlib.crc32(key) % partitions
