"""Writing an intact local store back to an empty changelog partition
(``worker --reseed-changelog``, docs/operating.md "A lost or truncated
changelog").

When a partition's changelog topic — the ledger's or the pattern stage's
(contract §23.5), each stage reseeds its own — was deleted and created
again while its consumer group kept its committed offsets, the worker refuses to run
(``runtime.changelog_guard``) and keeps the ``--state-dir`` store in place.
If that store was closed cleanly by its worker (its last checkpoint written
on a clean stop, after the last committed transaction: it reflects exactly
the committed offsets), it is the state: :func:`reseed_changelog` produces
every one of its records to the changelog partition (idempotent producer,
``acks=all``), then records the new topic id and the offset of the last
record as the store's identity and checkpoint. The changelog then restores
the same state byte for byte, and the worker carries on from the
committed offsets. A run killed midway leaves a partial changelog, which a
second ``--reseed-changelog`` refuses (not empty): delete the topic again
and reseed once more — the store is untouched until the last record is
acknowledged.
"""

from __future__ import annotations

import logging

from confluent_kafka import Producer

from recurrence_ledger.catalogue import MAX_MESSAGE_BYTES
from recurrence_ledger.kafka.client_config import Bootstrap, producer_config
from recurrence_ledger.kafka.kafka_io import produce
from recurrence_ledger.store.base import PartitionStore, StoreError

log = logging.getLogger("recurrence_ledger.worker")

#: Seconds to wait for the reseeded records' acknowledgements.
FLUSH_TIMEOUT_S = 120.0


def reseed_changelog(bootstrap: Bootstrap, changelog_topic: str, partition: int, store: PartitionStore, end: int) -> int:
    """Produce every record of ``store`` (a ``store.rocksdb.RocksStore``
    whose ``reseed_refusal(consumed)`` is None) to the empty ``changelog_topic
    [partition]`` whose end offset is ``end``, then adopt the new changelog
    in the store. Returns the changelog's new end offset. Raises StoreError
    when a record is not acknowledged (the store is left as it was)."""
    producer = Producer(producer_config(bootstrap, None, {"message.max.bytes": MAX_MESSAGE_BYTES, "compression.type": "lz4"}))
    failures: list[str] = []
    last = end - 1
    count = 0

    def delivered(error, message) -> None:  # noqa: ANN001 - confluent-kafka's callback
        nonlocal last
        if error is not None:
            failures.append(str(error))
        else:
            last = max(last, message.offset())

    for key, value in store.records():
        produce(producer, changelog_topic, key, value, partition, delivered, serve=count % 256 == 0)
        count += 1
    left = producer.flush(FLUSH_TIMEOUT_S)
    if left or failures:
        raise StoreError(f"reseeding {changelog_topic}[{partition}] failed ({left} records unacknowledged, "
                         f"errors: {failures[:3]}): the local store is unchanged; delete the changelog topic and reseed again")
    store.adopt(last)
    log.warning("partition %d: changelog %s reseeded from the local store: %d records (offsets %d–%d)",
                partition, changelog_topic, count, end, last)
    return last + 1
