"""A batch run (``--exit-when-idle``) of the two-stage worker (contract
§23.5, docs/kafka.md "Batch runs") does not exit while a transaction is
still open on the repartition topic: the counts another member's last batch
(or a killed member's, until the broker aborts it) writes there become
readable only once that transaction commits, and the member owning the
partition must still be there to consume them — otherwise pattern
candidates go missing. A transaction of scope counts held open by the test
stands for that other member's batch."""

from __future__ import annotations

from confluent_kafka import Producer

from recurrence_ledger.catalogue import PATTERN_CANDIDATES, PATTERN_REPARTITION, SIGNATURE_PATTERNS
from recurrence_ledger.kafka.client_config import producer_config
from recurrence_ledger.kafka.records import Outputs
from recurrence_ledger.ledger.patterns import contribution
from recurrence_ledger.runtime.stages import repartition_partition
from recurrence_ledger.serde import codec
from tests.e2e import harness

PARTITIONS = 3
SCOPES = ("team/alpha", "team/beta", "team/gamma")


def test_a_batch_run_waits_for_an_open_transaction_on_the_repartition_topic(topic_prefix, bootstrap, tmp_path):
    harness.prepare(bootstrap, topic_prefix, partitions=PARTITIONS)  # no input at all: only the counts
    outputs = Outputs(codec.AVRO, codec.FIXED, topic_prefix, 1_000_000)
    records = outputs.records([contribution(scope, "sig-timeout", 2, "/") for scope in SCOPES], None)
    member = Producer(producer_config(bootstrap, f"{topic_prefix}another-member"))
    member.init_transactions(30)
    member.begin_transaction()
    for record in records:
        member.produce(record.topic, record.value, record.key, partition=repartition_partition(record.key, PARTITIONS))
    member.flush(30)

    log = tmp_path / "worker.log"
    worker = harness.start_worker(bootstrap, topic_prefix, log, idle_exit=1,
                                  extra=("--pattern-group-separator", "/", "--pattern-threshold", "3"))
    try:
        # Idle and every committed offset at the last stable offset, yet the
        # open transaction keeps it from exiting.
        harness.wait_until(lambda: "a transaction still open on it" in log.read_text() or worker.poll() is not None, 90,
                           "the batch run waiting for the open transaction")
        assert worker.poll() is None, log.read_text()[-3000:]
        assert f"{harness.physical(topic_prefix, PATTERN_REPARTITION)}[" in log.read_text()
        member.commit_transaction(30)
        assert harness.wait_exit(worker, 120, log) == 0, log.read_text()[-3000:]
    finally:
        if worker.poll() is None:
            harness.kill(worker)

    kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka")
    candidates = harness.lines(kafka[PATTERN_CANDIDATES])
    assert [(c["group"], c["signature_key"], c["threshold"]) for c in candidates] == [("team", "sig-timeout", 3)]
    patterns = harness.lines(kafka[SIGNATURE_PATTERNS])
    assert patterns[-1] == {"group": "team", "signature_key": "sig-timeout", "scope_count": 3, "scopes": list(SCOPES), "recurred": 6}
