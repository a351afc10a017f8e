"""Checkpoint error paths without a broker (recurrence_ledger.runtime.checkpoint).

The producer here is a stand-in with confluent-kafka's transactional
Producer methods that records every call and raises scripted
``KafkaException``s carrying real ``KafkaError``s of each class (retriable,
abortable, fatal, other). The same paths against the real broker are in
tests/e2e/test_faults.py (broker restart, SIGKILL at every point)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from recurrence_ledger.runtime.checkpoint import CALL_GRACE_S, CALL_TIMEOUT_S, RESTART_EXIT, Checkpoint, CheckpointAborted, RestartRequired
from recurrence_ledger.runtime.faults import RuntimeHooks


def retriable() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TIMED_OUT, "coordinator moving", retriable=True))


def abortable() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._STATE, "epoch bumped", txn_requires_abort=True))


def fatal() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True))


def other() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._INVALID_ARG, "no class"))


class ScriptedProducer:
    """Records calls; ``failures[name]`` is a list of exceptions the next
    calls of ``name`` raise, one each, before succeeding."""

    def __init__(self, **failures: list[Exception]):
        self.calls: list[tuple] = []
        self.failures = {name: list(errors) for name, errors in failures.items()}
        self.full_queue = 0  # produce() raises BufferError this many times first

    def _call(self, name: str, *args) -> None:
        self.calls.append((name, *args))
        pending = self.failures.get(name)
        if pending:
            raise pending.pop(0)

    def begin_transaction(self) -> None:
        self._call("begin")

    def produce(self, topic, value=None, key=None, partition=None) -> None:
        if self.full_queue:
            self.full_queue -= 1
            self.calls.append(("buffer_full", topic))
            raise BufferError("queue full")
        self._call("produce", topic, partition, key, value)

    def poll(self, timeout: float) -> int:
        self.calls.append(("poll", timeout))
        return 0

    def send_offsets_to_transaction(self, offsets, metadata, timeout) -> None:
        self._call("send_offsets", [(tp.topic, tp.partition, tp.offset) for tp in offsets], metadata)

    def commit_transaction(self, timeout) -> None:
        self._call("commit")

    def abort_transaction(self, timeout) -> None:
        self._call("abort")


class Points(RuntimeHooks):
    def __init__(self) -> None:
        self.points: list[str] = []

    def at(self, point: str) -> None:
        self.points.append(point)


class Clock:
    """A clock that advances only when the checkpoint sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def checkpoint(producer: ScriptedProducer, budget: float = 60.0) -> tuple[Checkpoint, Points, Clock]:
    points, clock = Points(), Clock()
    return Checkpoint(producer, lambda: "group-metadata", points, retry_budget_s=budget, sleep=clock.sleep, clock=clock), points, clock


def names(producer: ScriptedProducer) -> list[str]:
    return [call[0] for call in producer.calls if call[0] != "poll"]


OFFSETS = [TopicPartition("in", 0, 42)]
CHANGELOG = [("app-changelog", 0, b'["scope","s"]', b"{}"), ("app-changelog", 0, b'["gone"]', None)]


def test_a_clean_commit_begins_once_produces_outputs_then_changelog_sends_offsets_and_commits():
    producer = ScriptedProducer()
    cp, points, _ = checkpoint(producer)
    cp.produce("out", b"k", b"v", 0)
    cp.produce("out", b"k2", b"v2", 0)
    assert cp.in_transaction and cp.produced == 2
    cp.commit(CHANGELOG, OFFSETS)
    assert names(producer) == ["begin", "produce", "produce", "produce", "produce", "send_offsets", "commit"]
    produced = [call[1:] for call in producer.calls if call[0] == "produce"]
    assert produced[2:] == [("app-changelog", 0, b'["scope","s"]', b"{}"), ("app-changelog", 0, b'["gone"]', None)]
    assert ("send_offsets", [("in", 0, 42)], "group-metadata") in producer.calls
    assert points.points == ["offsets_sent", "committed"]
    assert not cp.in_transaction


def test_nothing_to_write_commits_nothing():
    producer = ScriptedProducer()
    cp, points, _ = checkpoint(producer)
    cp.commit([], [])
    assert producer.calls == [] and points.points == []


def test_offsets_alone_still_commit_in_a_transaction():
    producer = ScriptedProducer()
    cp, _, _ = checkpoint(producer)
    cp.commit([], OFFSETS)
    assert names(producer) == ["begin", "send_offsets", "commit"]


def test_a_full_local_queue_waits_for_room_instead_of_failing():
    producer = ScriptedProducer()
    producer.full_queue = 2
    cp, _, _ = checkpoint(producer)
    cp.produce("out", b"k", b"v", 3)
    assert [call[0] for call in producer.calls] == ["begin", "buffer_full", "poll", "buffer_full", "poll", "produce", "poll"]
    assert ("produce", "out", 3, b"k", b"v") in producer.calls


def test_retriable_errors_are_retried_with_a_growing_pause_then_commit():
    producer = ScriptedProducer(send_offsets=[retriable()], commit=[retriable(), retriable()])
    cp, points, clock = checkpoint(producer)
    cp.produce("out", None, b"v", 0)
    cp.commit([], OFFSETS)
    assert names(producer) == ["begin", "produce", "send_offsets", "send_offsets", "commit", "commit", "commit"]
    assert clock.sleeps == [0.2, 0.2, 0.4]
    assert points.points == ["offsets_sent", "committed"] and not cp.in_transaction


def test_the_watchdog_restarts_a_call_blocked_past_its_timeout_or_a_commit_blocked_past_its_limit():
    seen: list[tuple[float, str | None]] = []

    class Blocking(ScriptedProducer):
        def commit_transaction(self, timeout) -> None:  # what the watchdog says while the call blocks
            for elapsed in (timeout, timeout + CALL_GRACE_S, timeout + CALL_GRACE_S + 0.1):
                seen.append((elapsed, cp.overdue(clock.now + elapsed)))
            super().commit_transaction(timeout)

    producer = Blocking(commit=[retriable()])
    cp, _, clock = checkpoint(producer)
    cp.produce("out", None, b"v", 0)
    assert cp.overdue(clock.now) is None
    cp.commit([], OFFSETS)
    hung = f"a transactional call has been blocked {CALL_GRACE_S:.0f} s past its timeout"
    assert seen == [(CALL_TIMEOUT_S, None), (CALL_TIMEOUT_S + CALL_GRACE_S, None), (CALL_TIMEOUT_S + CALL_GRACE_S + 0.1, hung)] * 2
    assert cp.call_deadline is None and cp.committing_since is None and cp.overdue(clock.now + 1000) is None
    # A commit that keeps retrying calls that each return in time: its own limit.
    cp.committing_since, cp.call_deadline = clock.now, clock.now + 1000
    assert cp.overdue(clock.now + 120.0, limit_s=120.0) is None
    assert cp.overdue(clock.now + 120.5, limit_s=120.0) == "a transaction commit has been blocked for 120 s"


def test_a_retriable_error_that_outlives_the_budget_aborts():
    producer = ScriptedProducer(commit=[retriable() for _ in range(100)])
    cp, points, clock = checkpoint(producer, budget=3.0)
    cp.produce("out", None, b"v", 0)
    with pytest.raises(CheckpointAborted) as raised:
        cp.commit([], OFFSETS)
    assert raised.value.cause.args[0].code() == KafkaError._TIMED_OUT
    assert names(producer)[-1] == "abort"
    assert clock.now >= 3.0 and all(pause <= 2.0 for pause in clock.sleeps)
    assert "committed" not in points.points and not cp.in_transaction


@pytest.mark.parametrize("error", [abortable, other], ids=["abortable", "no-class"])
def test_an_abortable_or_unclassified_commit_error_aborts_at_once(error):
    producer = ScriptedProducer(commit=[error()])
    cp, points, clock = checkpoint(producer)
    cp.produce("out", None, b"v", 0)
    with pytest.raises(CheckpointAborted):
        cp.commit(CHANGELOG, OFFSETS)
    assert names(producer)[-2:] == ["commit", "abort"]
    assert clock.sleeps == [] and points.points == ["offsets_sent"]
    # The next batch opens a new transaction.
    cp.produce("out", None, b"v", 0)
    assert names(producer)[-2:] == ["begin", "produce"]


def test_an_abortable_send_offsets_error_aborts_before_commit():
    producer = ScriptedProducer(send_offsets=[abortable()])
    cp, points, _ = checkpoint(producer)
    cp.produce("out", None, b"v", 0)
    with pytest.raises(CheckpointAborted):
        cp.commit([], OFFSETS)
    assert "commit" not in names(producer) and names(producer)[-1] == "abort"
    assert points.points == []


def erroneous_state() -> KafkaException:
    """What produce() raises once the open transaction failed on its own
    (e.g. a partition of a deleted topic could not be added to it)."""
    return KafkaException(KafkaError(KafkaError._STATE, "Unable to produce message: Local: Erroneous state"))


@pytest.mark.parametrize("where", ["an output", "a changelog record"])
def test_a_transaction_that_failed_before_its_commit_is_aborted_when_a_record_is_refused(where):
    """The producer refuses records once its transaction failed (librdkafka
    moved it to its abortable state in the background): handled as a
    failed commit — aborted, CheckpointAborted for the caller to rewind —
    never an error that ends the worker with the generic exit 1."""
    producer = ScriptedProducer(produce=[erroneous_state()] if where == "an output" else [])
    cp, points, _ = checkpoint(producer)
    with pytest.raises(CheckpointAborted):
        if where == "an output":
            cp.produce("out", None, b"v", 0)
        else:
            cp.produce("out", None, b"v", 0)
            producer.failures["produce"] = [erroneous_state()]
            cp.commit(CHANGELOG, OFFSETS)
    assert names(producer)[-1] == "abort" and "commit" not in names(producer) and points.points == []
    cp.produce("out", None, b"v", 0)  # the next batch opens a new transaction
    assert names(producer)[-2:] == ["begin", "produce"]


def test_a_fatal_error_on_a_record_asks_for_a_restart():
    producer = ScriptedProducer(produce=[fatal()])
    cp, _, _ = checkpoint(producer)
    with pytest.raises(RestartRequired):
        cp.produce("out", None, b"v", 0)
    assert "abort" not in names(producer)


def test_a_fatal_error_asks_for_a_restart_without_an_abort():
    """A fatal producer (fenced, or its epoch bumped by the broker after a
    long stall) cannot be used again: the process exits for a restart
    (RESTART_EXIT), never with the generic 1."""
    producer = ScriptedProducer(commit=[fatal()])
    cp, points, _ = checkpoint(producer)
    cp.produce("out", None, b"v", 0)
    with pytest.raises(RestartRequired) as raised:
        cp.commit([], OFFSETS)
    assert raised.value.exit_code == RESTART_EXIT == 3 and "fenced by a newer instance" in str(raised.value)
    assert "abort" not in names(producer) and "committed" not in points.points


def test_a_failing_abort_asks_for_a_restart():
    producer = ScriptedProducer(commit=[abortable()], abort=[fatal()])
    cp, _, _ = checkpoint(producer)
    cp.produce("out", None, b"v", 0)
    with pytest.raises(RestartRequired) as raised:
        cp.commit([], OFFSETS)
    assert raised.value.exit_code == RESTART_EXIT and "abort" in str(raised.value)


def test_an_abort_that_times_out_is_retried_in_place():
    """The broker restarting: abort_transaction times out (retriable, and
    librdkafka lets it be called again) — retried, then the batch rewinds
    as after any abort."""
    producer = ScriptedProducer(commit=[abortable()], abort=[retriable(), retriable()])
    cp, _, clock = checkpoint(producer)
    cp.produce("out", None, b"v", 0)
    with pytest.raises(CheckpointAborted):
        cp.commit([], OFFSETS)
    assert names(producer)[-3:] == ["abort", "abort", "abort"] and len(clock.sleeps) == 2
    assert not cp.in_transaction


def test_an_abort_that_keeps_timing_out_asks_for_a_restart():
    producer = ScriptedProducer(commit=[abortable()], abort=[retriable() for _ in range(100)])
    cp, _, clock = checkpoint(producer, budget=3.0)
    cp.produce("out", None, b"v", 0)
    with pytest.raises(RestartRequired) as raised:
        cp.commit([], OFFSETS)
    assert raised.value.exit_code == RESTART_EXIT and clock.now >= 3.0


def test_a_producer_in_its_fatal_state_asks_for_a_restart_when_a_transaction_begins():
    producer = ScriptedProducer(begin=[fatal()])
    cp, _, _ = checkpoint(producer)
    with pytest.raises(RestartRequired):
        cp.produce("out", None, b"v", 0)


def test_abort_without_a_transaction_does_nothing():
    producer = ScriptedProducer()
    cp, _, _ = checkpoint(producer)
    cp.abort("nothing open")
    assert producer.calls == []


class Reporting(ScriptedProducer):
    """Assigns offsets per partition and serves delivery reports at
    ``poll`` / ``flush`` (as librdkafka does), unless ``silent``."""

    def __init__(self, silent: bool = False):
        super().__init__()
        self.silent = silent
        self.next: dict[int, int] = {}
        self.reports: list = []

    def produce(self, topic, value=None, key=None, partition=None, on_delivery=None) -> None:
        super().produce(topic, value=value, key=key, partition=partition)
        offset = self.next.get(partition, 100)
        self.next[partition] = offset + 1
        if on_delivery is not None and not self.silent:
            self.reports.append((on_delivery, topic, partition, offset))

    def _serve(self) -> None:
        reports, self.reports = self.reports, []
        for callback, topic, partition, offset in reports:
            message = type("Delivered", (), {"topic": lambda self, t=topic: t, "partition": lambda self, p=partition: p,
                                             "offset": lambda self, o=offset: o})()
            callback(None, message)

    def poll(self, timeout: float) -> int:
        self._serve()
        return super().poll(timeout)

    def flush(self, timeout: float) -> int:
        self._serve()
        return 0


def test_a_tracked_commit_returns_the_last_changelog_offset_of_each_partition():
    producer = Reporting()
    checkpoint = Checkpoint(producer, lambda: "meta", track_changelog=True)
    checkpoint.produce("out", b"k", b"v", 0)  # an output: not tracked
    changelog = [("cl", 0, b"a", b"1"), ("cl", 1, b"b", None), ("cl", 0, b"c", b"3")]
    assert checkpoint.commit(changelog, [TopicPartition("in", 0, 5)]) == {("cl", 0): 102, ("cl", 1): 100}
    assert Checkpoint(Reporting(), lambda: "meta").commit(changelog, []) == {}  # untracked: nothing returned


def test_a_committed_transaction_without_delivery_reports_is_not_checkpointed_locally():
    from recurrence_ledger.runtime.checkpoint import ChangelogUntracked

    producer = Reporting(silent=True)
    checkpoint = Checkpoint(producer, lambda: "meta", track_changelog=True)
    with pytest.raises(ChangelogUntracked, match="2 changelog records"):
        checkpoint.commit([("cl", 0, b"a", b"1"), ("cl", 0, b"b", b"2")], [])
    assert ("commit",) in producer.calls  # the transaction itself is committed
