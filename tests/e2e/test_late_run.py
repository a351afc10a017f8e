"""contract §8 (rev. 2) on the real broker: a recurrence that arrives after
the avoided verdict that closed its run still publishes that run's review
candidate through the worker — with the journal on the per-kind topics
(late arrival), and across a worker restart (the run state comes back from
the changelog)."""

from __future__ import annotations

import json

from tests.conftest import facts
from tests.e2e import harness
from tests.journal import write_journal
from tests.ledger.test_review_runs import late_run_case


def test_late_run_on_per_kind_topics_gives_its_candidate(topic_prefix, bootstrap, tmp_path):
    journal, expected = late_run_case()
    harness.prepare(bootstrap, topic_prefix, partitions=3)
    harness.publish(bootstrap, journal, topic_prefix, per_kind=True)
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log")

    kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka")
    reference = harness.embedded(journal, tmp_path / "embedded")
    assert facts({topic: harness.lines(data) for topic, data in kafka.items()}) == expected
    # The candidate does not depend on arrival order: byte for byte run-journal's.
    assert kafka["review-candidates"] == reference["review-candidates"] != b""
    [candidate] = harness.lines(kafka["review-candidates"])
    assert (candidate["run_start_position"], candidate["streak"]) == (None, 3)


def test_late_recurrence_after_a_worker_restart_gives_the_closed_runs_candidate(topic_prefix, bootstrap, tmp_path):
    journal, expected = late_run_case()
    records = [json.loads(text) for text in journal.read_text().splitlines()]
    assert records[-1]["value"]["source_ref"]["source_id"] == "TO-wed-late"
    harness.prepare(bootstrap, topic_prefix, partitions=3)
    log = tmp_path / "worker.log"
    harness.publish(bootstrap, write_journal(tmp_path / "first.jsonl", records[:-1]), topic_prefix, per_kind=True)
    harness.run_to_idle(bootstrap, topic_prefix, log)
    candidates = harness.physical(topic_prefix, "review-candidates")
    assert harness.count_records(bootstrap, candidates) == 0  # 2 recurrences, then the avoided verdict at 40

    harness.publish(bootstrap, write_journal(tmp_path / "late.jsonl", records[-1:]), topic_prefix, per_kind=True)
    harness.run_to_idle(bootstrap, topic_prefix, log)  # a new process: state restored from the changelog

    kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka")
    assert facts({topic: harness.lines(data) for topic, data in kafka.items()}) == expected
    assert kafka["review-candidates"] == harness.embedded(journal, tmp_path / "embedded")["review-candidates"]
