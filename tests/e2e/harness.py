"""Driving real worker processes in end-to-end tests: start, wait, kill,
scale out with a kill and a join, export, compare with the embedded runner
(contract §10), and the state changelog read, deleted and created again."""

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

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from recurrence_ledger.embedded import run_journal
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.kafka.kafka_admin import admin_client, create_topics, topic_identity, wait_for_topics
from recurrence_ledger.store.rocksdb import open_store
from recurrence_ledger.workload import Workload, generate_journal
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
                 redis_url: str | None = None, idle_exit: float | None = 2.0, extra: tuple[str, ...] = (),
                 fault: str | None = None) -> subprocess.Popen:
    """Start ``recurrence-ledger worker`` as a separate process (its own
    session, so a SIGKILL hits only it) with the CLI runs' environment
    (tests.plugins.processes.cli_env) and this process's RL_FAULT_INJECT,
    or ``fault`` as RL_FAULT_INJECT when given (``point:n``: SIGKILL or
    fail at the n-th time the worker reaches that point). ``idle_exit``
    (seconds, None: run until stopped) is its ``--exit-when-idle``: short is
    enough because a batch run also waits until its whole group has
    consumed every input to its end (runtime.catch_up), and a test
    publishes its input before it starts the worker."""
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
    env = cli_env({"RL_FAULT_INJECT": fault} if fault else None, keep=("RL_FAULT_INJECT",))
    return subprocess.Popen(args, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True)


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


def embedded(journal: Path, out: Path, config: LedgerConfig | None = None) -> dict[str, bytes]:
    """run-journal outputs (under ``config``, default the default policy),
    per output topic, as file bytes."""
    run_journal(journal, out, config, show_progress=False, validate_outputs=True)
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


def kill_and_join(bootstrap: str, prefix: str, workdir: Path, *, total: int, assigned: str, options: tuple[str, ...],
                  rocksdb: bool) -> dict[str, Path]:
    """Scale out with a rebalance mid-run: start three workers (w1 and w3
    batch runs exiting 6 s idle, w2 running on), wait until each logs
    ``assigned`` and a tenth of ``total`` observations are committed, SIGKILL
    w2 and add w4 (batch), and wait for w1, w3 and w4 to exit 0 (a batch run
    exits once the whole group is caught up, the killed member's partitions
    included). Every worker runs with ``options``; with ``rocksdb`` also
    with a state dir of its own, ``workdir/state-<instance>`` (as on
    separate machines). Returns the workers' logs by instance."""
    logs = {instance: workdir / f"{instance}.log" for instance in ("w1", "w2", "w3", "w4")}

    def start(instance: str, idle_exit: float | None) -> subprocess.Popen:
        extra = (*options, "--state-dir", str(workdir / f"state-{instance}")) if rocksdb else options
        return start_worker(bootstrap, prefix, logs[instance], instance=instance, idle_exit=idle_exit, extra=extra)

    w1, w2, w3 = start("w1", 6), start("w2", None), start("w3", 6)
    observations = physical(prefix, "recurrence-observations")
    wait_until(lambda: all(assigned in logs[name].read_text() for name in ("w1", "w2", "w3")), 90, "three members assigned")
    counts: list[int] = []

    def progressed() -> bool:
        counts.append(count_records(bootstrap, observations))
        return counts[-1] > total // 10

    wait_until(progressed, 120, "a tenth of the outputs")
    assert w2.poll() is None and w1.poll() is None and w3.poll() is None, "the run ended before the rebalance"
    kill(w2)
    w4 = start("w4", 6)
    for worker, name in ((w1, "w1"), (w3, "w3"), (w4, "w4")):
        assert wait_exit(worker, 240, logs[name]) == 0
    assert counts[-1] < total  # the kill was mid-run
    return logs


def halved_journal(workload: Workload, root: Path) -> tuple[Path, Path, Path]:
    """``workload``'s journal written to ``root`` whole, and as its two
    halves (to publish one after the other): (whole, first, second)."""
    lines = [json.dumps(record) + "\n" for record in generate_journal(workload)]
    whole, first, second = root / "journal.jsonl", root / "first.jsonl", root / "second.jsonl"
    whole.write_text("".join(lines))
    first.write_text("".join(lines[: len(lines) // 2]))
    second.write_text("".join(lines[len(lines) // 2 :]))
    return whole, first, second


def changelog_topic(prefix: str, stage: str = "ledger") -> str:
    """The physical state changelog topic of ``stage`` ("ledger": the scope
    stage's, "pattern": the pattern stage's, contract §23.5) of app id
    ``ledger`` under ``prefix``."""
    return f"{prefix}ledger-{stage}-state-changelog"


def changelog_state(bootstrap: str, topic: str, partition: int) -> dict[bytes, bytes]:
    """What a full restore of ``topic[partition]`` gives (read_committed, to
    its end): key bytes -> value bytes, tombstones applied."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rocks-test-reader", "isolation.level": "read_committed",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, -2)])
    state: dict[bytes, bytes] = {}
    try:
        while True:
            message = consumer.poll(10)
            assert message is not None, "changelog read timed out"
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF
                return state
            if message.value() is None:
                state.pop(message.key(), None)
            else:
                state[message.key()] = message.value()
    finally:
        consumer.close()


def assert_stores_equal_the_changelog(bootstrap: str, prefix: str, state_dir: Path, partitions: int) -> None:
    """Each of the ``partitions`` RocksDB stores under ``state_dir`` has a
    checkpoint and holds exactly :func:`changelog_state` of its partition."""
    topic = changelog_topic(prefix)
    topic_id, _ = topic_identity(bootstrap, topic)
    for partition in range(partitions):
        store = open_store(state_dir, topic, partition, topic_id)
        try:
            assert store.restore_from() is not None, f"partition {partition}: {store.wiped}"
            local = {orjson.dumps(list(key)): orjson.dumps(value) for key, value in store.snapshot().items()}
        finally:
            store.close()
        assert local == changelog_state(bootstrap, topic, partition), f"partition {partition}"


def wait_changelog_written(bootstrap: str, prefix: str, timeout: float = 120) -> None:
    """Wait until the changelog topic of ``prefix`` holds a committed
    record (a worker has created it and committed a transaction)."""

    def committed() -> bool:
        try:
            return count_records(bootstrap, changelog_topic(prefix)) > 0
        except LookupError:  # the worker has not created the changelog yet
            return False

    wait_until(committed, timeout, "a committed changelog record")


def delete_changelog(bootstrap: str, prefix: str, stage: str = "ledger") -> None:
    """Delete the changelog topic of ``stage`` under ``prefix`` and wait until it is gone."""
    topic, admin = changelog_topic(prefix, stage), admin_client(bootstrap)
    admin.delete_topics([topic])[topic].result()
    wait_until(lambda: topic not in topic_names(admin), 60, "the changelog's deletion")


def recreate_changelog(bootstrap: str, prefix: str, partitions: int, stage: str = "ledger") -> None:
    """Delete the changelog topic of ``stage`` under ``prefix`` and create
    it again, empty (a new topic id), compacted, with ``partitions``
    partitions; the creation is retried while the deletion is still
    finishing."""
    topic, admin = changelog_topic(prefix, stage), admin_client(bootstrap)
    delete_changelog(bootstrap, prefix, stage)

    def create() -> bool:
        try:
            admin.create_topics([NewTopic(topic, partitions, 1, config={"cleanup.policy": "compact"})])[topic].result()
        except KafkaException as error:  # TOPIC_ALREADY_EXISTS / marked for deletion
            print("create:", error)
            return False
        return True

    wait_until(create, 60, "the changelog's creation")
    wait_for_topics(admin, [topic])
