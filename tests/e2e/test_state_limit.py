"""A state record that outgrows the worker's limit on the real broker
(``runtime.state_limit``): one scope publishes Experience revisions with
long artifact ids until its heads map passes ``--max-state-bytes``. Kafka
would refuse the transaction carrying that changelog record, every time:
before the limit was checked, the worker retried the batch for ever and
every other scope of its partitions stood still. Now the records that
grow the map past the limit are dead-lettered as ``oversized_output``, no
changelog record is larger than the limit, and the scope behind it on the
same partition gets exactly its run-journal facts.
"""

from __future__ import annotations

import copy
import json

from tests.conftest import CASES
from tests.e2e import harness

LIMIT = 20_000
HEADS = 60  # ~500 bytes each in the heads map: the limit is passed near the 40th


def test_records_growing_a_state_record_past_the_limit_are_dead_lettered(topic_prefix, bootstrap, tmp_path):
    example = (CASES / "worked_example.jsonl").read_text().splitlines()
    experience = json.loads(example[0])
    lines = []
    for number in range(HEADS):
        line = copy.deepcopy(experience)
        line["value"].update(scope_id="big", journal_position=number + 1)
        line["value"]["artifact_ref"]["artifact_id"] = f"{number:08d}" + "a" * 492
        lines.append(json.dumps(line))
    journal = tmp_path / "journal.jsonl"
    journal.write_text("\n".join([*lines, *example]) + "\n")
    harness.prepare(bootstrap, topic_prefix, partitions=1)  # both scopes on one partition
    harness.publish(bootstrap, journal, topic_prefix)
    log = tmp_path / "worker.log"
    harness.run_to_idle(bootstrap, topic_prefix, log, extra=("--max-state-bytes", str(LIMIT)))

    kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka")
    letters = harness.lines(kafka["dead-letter"])
    assert letters and {letter["reason"] for letter in letters} == {"oversized_output"}
    assert all("state record" in letter["message"] and f"limit is {LIMIT} (max_state_bytes)" in letter["message"] for letter in letters)
    # The first revisions fit; from the one that passes the limit on, each would pass it again: all of them dead-lettered.
    parked = sorted(letter["offset"] for letter in letters)
    assert 20 < parked[0] and parked == list(range(parked[0], HEADS)), parked
    assert "over the limit 20000 (max_state_bytes)" in log.read_text()

    from recurrence_ledger.kafka.kafka_io import read_raw

    changelog = read_raw(bootstrap, harness.changelog_topic(topic_prefix))
    assert changelog and max(len(record.value or b"") for record in changelog) <= LIMIT

    reference = harness.embedded(CASES / "worked_example.jsonl", tmp_path / "embedded")
    mine = lambda data: sorted(line for line in data.splitlines() if b'"dns-mirror"' in line)  # noqa: E731
    for topic in ("recurrence-matches", "recurrence-observations"):
        assert mine(kafka[topic]) == mine(reference[topic]) and mine(reference[topic]), topic
    assert harness.last_statistics(kafka["recurrence-statistics"])["dns-mirror"] == harness.last_statistics(reference["recurrence-statistics"])["dns-mirror"]
