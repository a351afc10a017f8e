"""Driving real worker processes in end-to-end tests: start, wait, kill,
export, and compare with the embedded runner (contract §10)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from recurrence_ledger.embedded import run_journal
from recurrence_ledger.kafka.kafka_admin import create_topics
from recurrence_ledger.kafka.kafka_io import export_topic, publish_journal, read_raw
from recurrence_ledger.serde.codec import FIXED, Codec
from recurrence_ledger.catalogue import LEDGER_TOPICS, OUTPUT_TOPICS, VIEW_TOPICS
from recurrence_ledger.read.projection import RedisView
from recurrence_ledger.read.keys import default_namespace
from recurrence_ledger import catalogue
from tests.conftest import final_views
from tests.plugins.processes import cli_command, cli_env

REPO = Path(__file__).resolve().parents[2]
# LEDGER_TOPICS: the ledger facts, compared byte for byte (contract §10);
# VIEW_TOPICS: the views, compared by final value per key (assert_same_outputs).
IDENTITY = {
    "recurrence-matches": ("match_digest",),
    "recurrence-observations": ("observation_id",),
    "review-candidates": ("candidate_id",),
    "admission-decisions": ("scope_id", "candidate_id"),
    "candidate-sets": ("scope_id", "candidate_set_digest"),
    "pattern-candidates": ("candidate_id",),
}


def new_prefix() -> str:
    """A topic prefix no other test uses."""
    return f"t{uuid.uuid4().hex[:10]}."


def remove_prefix(bootstrap: str, prefix: str, redis_url: str | None = None) -> None:
    """Best-effort teardown of a test prefix: the Redis view's namespace of
    ``prefix`` (when ``redis_url`` is given) and every topic whose name starts
    with ``prefix`` (a leftover uniquely-prefixed topic harms no one)."""
    if redis_url is not None:
        view = RedisView(redis_url, namespace=default_namespace(prefix))
        try:
            view.clear()
        finally:
            view.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    mine = [name for name in admin.list_topics(timeout=10).topics if name.startswith(prefix)]
    for future in (admin.delete_topics(mine, operation_timeout=30).values() if mine else ()):
        with contextlib.suppress(KafkaException):
            future.result(timeout=30)


def topic_names(admin: AdminClient) -> set[str]:
    """Every topic name on the broker (unfiltered metadata: a request naming
    a topic would auto-create it on this broker)."""
    return set(admin.list_topics(timeout=10).topics)


def topic_configs(admin: AdminClient, physical_topic: str) -> dict[str, str]:
    """``config name -> value`` of a topic as the broker describes it
    (defaults included). Raises KafkaException for an unknown topic."""
    resource = ConfigResource(ResourceType.TOPIC, physical_topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=10)
    return {name: entry.value for name, entry in entries.items()}


def prepare(bootstrap: str, prefix: str, partitions: int) -> None:
    """Create the catalogue's topics under ``prefix``."""
    create_topics(bootstrap, partitions, prefix)


def start_worker(bootstrap: str, prefix: str, log_path: Path, *, instance: str = "w1", app_id: str | None = None,
                 redis_url: str | None = None, idle_exit: float | None = 4.0, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    """Start ``recurrence-ledger worker`` as a separate process (its own
    session, so a SIGKILL hits only it) with the CLI runs' environment
    (tests.plugins.processes.cli_env) and this process's RL_FAULT_INJECT."""
    args = cli_command(
        "worker",
        "--bootstrap", bootstrap, "--topic-prefix", prefix,
        "--app-id", app_id or "ledger", "--instance-id", instance,
        "--commit-interval-ms", "50", *extra,
    )
    if idle_exit is not None:
        args += ["--exit-when-idle", str(idle_exit)]
    if redis_url:
        args += ["--redis-url", redis_url]
    handle = open(log_path, "ab")
    return subprocess.Popen(args, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, env=cli_env(keep=("RL_FAULT_INJECT",)),
                            start_new_session=True)


def run_to_idle(bootstrap: str, prefix: str, log_path: Path, **options) -> None:
    """Run one worker (:func:`start_worker` with ``options``) until it exits
    idle; AssertionError with the log's tail unless it exits with code 0."""
    worker = start_worker(bootstrap, prefix, log_path, **options)
    assert wait_exit(worker, 120, log_path) == 0, log_path.read_text()[-3000:]


def publish_in_transactions(bootstrap: str, journal: Path, prefix: str, workdir: Path, chunks: int, **options) -> None:
    """Publish ``journal`` in ``chunks`` consecutive parts, running one
    worker (:func:`run_to_idle` with ``options``) to idle after each, so the
    worker commits at least ``chunks`` transactions and a scope's view
    records (one per changed key per transaction, contract §8) have a
    history of that many versions."""
    lines = [line for line in journal.read_text(encoding="utf-8").splitlines(keepends=True) if line.strip()]
    size = -(-len(lines) // chunks)
    for number, start in enumerate(range(0, len(lines), size)):
        part = workdir / f"{journal.stem}.part{number}.jsonl"
        part.write_text("".join(lines[start : start + size]), encoding="utf-8")
        publish(bootstrap, part, prefix)
        run_to_idle(bootstrap, prefix, workdir / f"worker.part{number}.log", **options)


def wait_exit(process: subprocess.Popen, timeout: float, log_path: Path) -> int:
    """Wait for a worker to exit by itself; on timeout kill it and fail."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise AssertionError(f"worker did not finish in {timeout} s; log:\n{log_path.read_text()[-4000:]}") from None


def kill(process: subprocess.Popen) -> None:
    """SIGKILL a worker (no shutdown hooks run)."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def count_records(bootstrap: str, physical_topic: str) -> int:
    """Committed records in a topic now (read_committed, to the end;
    transaction markers are not records)."""
    return len(read_raw(bootstrap, physical_topic, timeout=30))


def wait_until(predicate, timeout: float, what: str) -> None:
    """Poll ``predicate`` every 0.2 s until true or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def embedded(journal: Path, out: Path) -> dict[str, bytes]:
    """run-journal outputs, per output topic, as file bytes."""
    run_journal(journal, out, show_progress=False, validate_outputs=True)
    return {topic: (out / f"{topic}.jsonl").read_bytes() for topic in OUTPUT_TOPICS}


def exported(bootstrap: str, prefix: str, out: Path, codec: Codec = FIXED) -> dict[str, bytes]:
    """Every output topic exported to JSON Lines (values read with
    ``codec``), as file bytes."""
    out.mkdir(parents=True, exist_ok=True)
    result = {}
    for topic in OUTPUT_TOPICS:
        path = out / f"{topic}.jsonl"
        export_topic(bootstrap, topic, path, topic_prefix=prefix, codec=codec)
        result[topic] = path.read_bytes()
    return result


def lines(data: bytes) -> list[dict]:
    """Records of JSON Lines bytes."""
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def identity_report(kafka: dict[str, bytes], reference: dict[str, bytes]) -> dict[str, dict[str, int]]:
    """Per ledger topic: missing identities, extra identities and records
    re-sent with an identity that was already there."""
    report = {}
    for topic, fields in IDENTITY.items():
        got = Counter(tuple(record[f] for f in fields) for record in lines(kafka[topic]))
        want = Counter(tuple(record[f] for f in fields) for record in lines(reference[topic]))
        report[topic] = {
            "missing": len(set(want) - set(got)),
            "extra": len(set(got) - set(want)),
            "resent": sum(count - 1 for count in got.values() if count > 1),
        }
    return report


def assert_same_outputs(kafka: dict[str, bytes], reference: dict[str, bytes], *, multiset: bool = False) -> None:
    """contract §10 between two runs: every ledger fact byte for byte (as
    files, or as multisets of lines when scopes are spread over partitions),
    and every view key with the same final value (the last record per key;
    intermediate view records depend on batching)."""
    for topic in LEDGER_TOPICS:
        if multiset:
            assert Counter(kafka[topic].splitlines()) == Counter(reference[topic].splitlines()), topic
        else:
            assert kafka[topic] == reference[topic], topic
    for topic in VIEW_TOPICS:
        assert final_views(topic, lines(kafka[topic])) == final_views(topic, lines(reference[topic])), topic


def last_statistics(data: bytes) -> dict[str, dict]:
    """The last statistics record per scope."""
    return {record["scope_id"]: record for record in lines(data)}


def publish(bootstrap: str, journal: Path, prefix: str, **options) -> None:
    """Publish a journal quietly."""
    publish_journal(bootstrap, journal, topic_prefix=prefix, show_progress=False, **options)


def physical(prefix: str, name: str) -> str:
    """Physical topic name under ``prefix``."""
    return catalogue.physical(name, prefix)


def assert_exactly_once(bootstrap: str, prefix: str, reference: dict[str, bytes], out: Path) -> dict[str, bytes]:
    """Export every output topic of ``prefix`` to ``out`` and assert
    contract §10 against the embedded runner's ``reference``: no ledger
    identity missing, extra or re-sent (:func:`identity_report`), the same
    last statistics per scope, and :func:`assert_same_outputs` with scopes
    spread over partitions. Returns the exported topics."""
    kafka = exported(bootstrap, prefix, out)
    report = identity_report(kafka, reference)
    print("identity report:", report)
    for topic, counts in report.items():
        assert counts == {"missing": 0, "extra": 0, "resent": 0}, topic
    assert last_statistics(kafka["recurrence-statistics"]) == last_statistics(reference["recurrence-statistics"])
    assert_same_outputs(kafka, reference, multiset=True)
    return kafka


def wait_transactions_settled(bootstrap: str, prefix: str, partitions: int, timeout: float = 120) -> None:
    """Wait until no open transaction holds back any output topic of
    ``prefix``: each partition's last stable offset (what a
    ``read_committed`` reader may read up to) equals its high watermark.
    The open transaction of a SIGKILLed worker whose instance id never
    comes back is aborted only by the broker, after ``transaction.timeout.ms``
    (30 s, worker_config.output_producer_config) and its next clean-up pass;
    until then ``read_committed`` readers see nothing after it — not even
    other workers' committed records. AssertionError after ``timeout``."""
    from confluent_kafka import Consumer, TopicPartition

    settings = {"bootstrap.servers": bootstrap, "group.id": f"{prefix}settle", "enable.auto.commit": False}
    committed = Consumer({**settings, "isolation.level": "read_committed"})
    uncommitted = Consumer({**settings, "isolation.level": "read_uncommitted"})
    parts = [TopicPartition(physical(prefix, name), number) for name in OUTPUT_TOPICS for number in range(partitions)]

    def settled() -> bool:
        return all(committed.get_watermark_offsets(tp, timeout=10)[1] == uncommitted.get_watermark_offsets(tp, timeout=10)[1]
                   for tp in parts)

    try:
        wait_until(settled, timeout, "every output partition's last stable offset at its end")
    finally:
        committed.close()
        uncommitted.close()
