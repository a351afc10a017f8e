"""contract §9 (rev. 3) on the real broker: Kafka values that are JSON but
not an event object, and values that are neither JSON nor a frame.

The issue's two values — ``"just a string"`` and 100,000 nested ``[`` —
published on a per-kind topic and on source-journal, with a value whose
first byte is 0x07, before the minimum case: one worker writes exactly one
dead letter per value with the reason and message the value's first bytes
decide (``wrong_type`` / ``invalid_envelope`` for JSON that is not an
object, ``malformed_json`` for JSON nested too deeply, ``bad_magic_byte``
naming the byte seen), and the ledger outputs of the valid records, byte
for byte as ``run-journal`` (nothing held back or lost).
"""

from __future__ import annotations


from recurrence_ledger.catalogue import SOURCE_JOURNAL
from recurrence_ledger.kafka.kafka_io import publish_raw
from tests.badinput import corpus
from tests.e2e import harness


ENVELOPE = 'a source-journal value is {"topic": "<input topic>", "value": {...}}, not a string'
#: (logical topic, value, reason, message) — message None: any.
VALUES = [
    ("task-outcomes", b'"just a string"', "wrong_type", "the value is JSON but a string, not an event object"),
    ("task-outcomes", b"[" * 100_000, "malformed_json", "JSON nested too deeply"),
    ("task-outcomes", b"\x07not avro", "bad_magic_byte", "value is neither JSON nor a Confluent-framed Avro record (first byte 0x07)"),
    (SOURCE_JOURNAL, b'"just a string"', "invalid_envelope", ENVELOPE),
    (SOURCE_JOURNAL, b"[" * 100_000, "malformed_json", "JSON nested too deeply"),
]


def test_json_that_is_not_an_object_and_unknown_first_bytes_on_the_worker(bootstrap, topic_prefix, tmp_path):
    harness.prepare(bootstrap, topic_prefix, partitions=1)
    published = {}
    for logical, value, reason, message in VALUES:
        topic = harness.physical(topic_prefix, logical)
        partition, offset = publish_raw(bootstrap, topic, corpus.KEY, value)
        published[(topic, partition, offset)] = (value, reason, message)
    journal = tmp_path / "valid.jsonl"
    journal.write_bytes(b"".join(line + b"\n" for line in corpus.valid_lines()))
    harness.publish(bootstrap, journal, topic_prefix)

    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log")
    kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka")

    letters = {(d["topic"], d["partition"], d["offset"]): d for d in harness.lines(kafka["dead-letter"])}
    assert sorted(letters) == sorted(published)  # one dead letter per value, at its coordinates (physical topic)
    for coordinates, (value, reason, message) in published.items():
        letter = letters[coordinates]
        assert letter["reason"] == reason, letter["message"]
        if message is not None:
            assert letter["message"] == message
        assert corpus.raw_of(letter) == value
        assert letter["key"] == corpus.KEY.decode()
    harness.assert_same_outputs(kafka, harness.embedded(journal, tmp_path / "embedded"))
