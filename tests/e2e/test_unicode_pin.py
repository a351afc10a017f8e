"""contract §10 (rev. 2) on the real broker: the worker records the Unicode
version of its runtime in its state (the changelog), and a worker, replay or
rebuild whose runtime has another version than the recorded one refuses to
start, naming both, unless run with --accept-unicode-change. The other
version is faked by writing the pin's changelog record."""

from __future__ import annotations

import functools
import unicodedata

import orjson
import pytest
from confluent_kafka import Producer

from recurrence_ledger.runtime.unicode_pin import CHANGELOG_KEY, recorded_versions
from recurrence_ledger import catalogue
from tests.conftest import case
from tests.e2e import harness
from tests.plugins.processes import run_cli

RUNTIME = unicodedata.unidata_version
FAKE = "13.0.0"
APP_ID = "ledger"  # harness.start_worker's default


def changelog(prefix: str) -> str:
    return catalogue.physical(catalogue.changelog_name(APP_ID), prefix)


def fake_pin(bootstrap: str, topic: str, partitions: int, version: str) -> None:
    """Write the pin's changelog record for ``version`` to every partition
    (what a worker on a runtime with that Unicode version would have written)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for partition in range(partitions):
        producer.produce(topic, key=CHANGELOG_KEY, value=orjson.dumps(version), partition=partition)
    assert producer.flush(30) == 0


cli = functools.partial(run_cli, columns=400)


@pytest.mark.slow
def test_a_runtime_with_another_unicode_version_refuses_to_start(topic_prefix, bootstrap, tmp_path):
    journal, _ = case("minimum_case")
    harness.prepare(bootstrap, topic_prefix, partitions=2)
    harness.publish(bootstrap, journal, topic_prefix)
    log = tmp_path / "worker.log"
    harness.run_to_idle(bootstrap, topic_prefix, log)
    # The worker recorded its runtime's version in the state of each partition it used.
    assert set(recorded_versions(bootstrap, changelog(topic_prefix)).values()) == {RUNTIME}

    fake_pin(bootstrap, changelog(topic_prefix), 2, FAKE)
    assert recorded_versions(bootstrap, changelog(topic_prefix)) == {0: FAKE, 1: FAKE}
    outputs = {topic: harness.count_records(bootstrap, harness.physical(topic_prefix, topic)) for topic in harness.LEDGER_TOPICS}

    # Worker: refuses, naming both versions, and produces nothing.
    refused = tmp_path / "refused.log"
    worker = harness.start_worker(bootstrap, topic_prefix, refused)
    assert harness.wait_exit(worker, 120, refused) == 2, refused.read_text()[-3000:]
    text = " ".join(refused.read_text().split())
    assert "refusing to start" in text
    assert f"Unicode {FAKE}" in text and f"Unicode {RUNTIME}" in text and "--accept-unicode-change" in text
    # Replay and rebuild refuse too, before reading anything else.
    for command in (("replay", "--from", "earliest"), ("rebuild",)):
        result = cli(*command, "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, "--app-id", APP_ID)
        assert result.returncode == 2, result.stdout + result.stderr
        message = " ".join(result.stdout.split())
        assert f"Unicode {FAKE}" in message and f"Unicode {RUNTIME}" in message, message
    assert {topic: harness.count_records(bootstrap, harness.physical(topic_prefix, topic)) for topic in harness.LEDGER_TOPICS} == outputs

    # Accepting the change: the worker starts and records this runtime's version...
    harness.publish(bootstrap, journal, topic_prefix)  # something to process (duplicates: no new outputs)
    harness.run_to_idle(bootstrap, topic_prefix, log, extra=("--accept-unicode-change",))
    assert "accepted (--accept-unicode-change), recording Unicode" in log.read_text()
    assert set(recorded_versions(bootstrap, changelog(topic_prefix)).values()) == {RUNTIME}
    # ...which survives a restart: the next worker starts without the flag.
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "after.log")
    result = cli("replay", "--from", "earliest", "--dry-run", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, "--app-id", APP_ID)
    assert result.returncode == 0, result.stdout + result.stderr


def test_replay_and_rebuild_accept_the_change_when_told(topic_prefix, bootstrap, tmp_path):
    journal, _ = case("minimum_case")
    harness.prepare(bootstrap, topic_prefix, partitions=1)
    harness.publish(bootstrap, journal, topic_prefix)
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log")
    fake_pin(bootstrap, changelog(topic_prefix), 1, FAKE)
    for command in (("replay", "--from", "earliest"), ("rebuild",)):
        result = cli(*command, "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, "--app-id", APP_ID, "--accept-unicode-change")
        assert result.returncode == 0, result.stdout + result.stderr
    # They keep no state: the recorded version is the worker's to change.
    assert recorded_versions(bootstrap, changelog(topic_prefix)) == {0: FAKE}
