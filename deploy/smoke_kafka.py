#!/usr/bin/env python3
"""Smoke test for the local broker started by deploy/kafka.sh.

Proves with the confluent-kafka client that the broker is usable by the
project: topic creation (4 partitions) through AdminClient, a plain
produce/consume round trip, a transactional commit of 10 messages read back
with isolation.level=read_committed, and an aborted transaction that such a
consumer must not see.

Usage: python3 deploy/smoke_kafka.py [BOOTSTRAP]   (default: $KAFKA_BOOTSTRAP_SERVERS
or 127.0.0.1:9092). Exits non-zero on any failure. Topics are created with a
unique suffix and deleted at the end.
"""

from __future__ import annotations

import os
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def log(msg: str) -> None:
    print(f"[smoke_kafka] {msg}", file=sys.stderr, flush=True)


def create_topic(admin: AdminClient, name: str, partitions: int) -> None:
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futures[name].result(timeout=30)
    # Wait until metadata shows every partition with a leader.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=name, timeout=10)
        t = md.topics.get(name)
        if t and t.error is None and len(t.partitions) == partitions and all(
            p.leader >= 0 for p in t.partitions.values()
        ):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {name} not ready")


def consume(bootstrap: str, topic: str, expected: int, isolation: str, timeout_s: float = 30.0):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"smoke-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            got.append(msg)
        # Linger briefly: nothing beyond the expected records may show up.
        extra_deadline = time.monotonic() + 2.0
        while time.monotonic() < extra_deadline:
            msg = consumer.poll(0.3)
            if msg is not None and not msg.error():
                got.append(msg)
    finally:
        consumer.close()
    return got


def main() -> int:
    bootstrap = (
        sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    )
    suffix = uuid.uuid4().hex[:8]
    plain_topic = f"smoke-plain-{suffix}"
    txn_topic = f"smoke-txn-{suffix}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    t0 = time.monotonic()

    create_topic(admin, plain_topic, 1)
    create_topic(admin, txn_topic, 4)
    log(f"created {plain_topic} (1 partition) and {txn_topic} (4 partitions)")

    # 1. Plain produce / consume.
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce(plain_topic, key=b"k", value=b"hello-broker")
    if producer.flush(30) != 0:
        raise RuntimeError("plain produce did not complete")
    got = consume(bootstrap, plain_topic, 1, "read_uncommitted")
    assert [m.value() for m in got] == [b"hello-broker"], got
    log("plain produce/consume OK")

    # 2. Transactional producer: one aborted batch, then 10 committed.
    txn = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"smoke-txn-{suffix}",
            "enable.idempotence": True,
            "acks": "all",
        }
    )
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(3):
        txn.produce(txn_topic, key=f"aborted-{i}".encode(), value=b"must-not-be-read")
    txn.flush(30)
    txn.abort_transaction(30)
    txn.begin_transaction()
    for i in range(10):
        txn.produce(txn_topic, key=f"key-{i}".encode(), value=f"value-{i}".encode())
    txn.commit_transaction(30)
    log("transaction aborted (3 msgs) then committed (10 msgs)")

    got = consume(bootstrap, txn_topic, 10, "read_committed")
    values = sorted(m.value().decode() for m in got)
    assert values == sorted(f"value-{i}" for i in range(10)), values
    partitions = {m.partition() for m in got}
    log(f"read_committed consumer saw exactly the 10 committed messages on partitions {sorted(partitions)}")

    # read_uncommitted sees the aborted records too (proves the abort path ran).
    got_all = consume(bootstrap, txn_topic, 13, "read_uncommitted")
    assert len(got_all) == 13, len(got_all)
    log("read_uncommitted consumer saw 13 (incl. 3 aborted) as expected")

    for fut in admin.delete_topics([plain_topic, txn_topic]).values():
        fut.result(timeout=30)
    log(f"all checks passed in {time.monotonic() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
