"""Recovery in slices from the main loop, without a broker
(recurrence_ledger.runtime.recovery). The restore consumer is a stand-in
serving scripted changelog records and end-of-partition events; the real
restore is covered by every e2e test that restarts a worker."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from recurrence_ledger.runtime.faults import RuntimeHooks
from recurrence_ledger.runtime.recovery import Recovery
from recurrence_ledger.store.base import encode_key
from recurrence_ledger.store.memory import ChangelogStore


class Event:
    def __init__(self, partition: int, key: bytes | None = None, value: bytes | None = None, error: KafkaError | None = None, offset: int = 0):
        self._partition, self._key, self._value, self._error, self._offset = partition, key, value, error, offset

    def offset(self) -> int:
        return self._offset

    def partition(self) -> int:
        return self._partition

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> KafkaError | None:
        return self._error


def eof(partition: int) -> Event:
    return Event(partition, error=KafkaError(KafkaError._PARTITION_EOF))


class ScriptedConsumer:
    """Serves, per assigned partition, its scripted events in order."""

    def __init__(self, script: dict[int, list[Event]]):
        self.script = {number: list(events) for number, events in script.items()}
        self.assigned: list[int] = []
        self.config: dict | None = None
        self.closed = False

    def incremental_assign(self, partitions) -> None:
        self.assigned += [tp.partition for tp in partitions]

    def incremental_unassign(self, partitions) -> None:
        for tp in partitions:
            self.assigned.remove(tp.partition)

    def get_watermark_offsets(self, tp, timeout: float) -> tuple[int, int]:
        """(0, the partition's scripted records): an empty changelog is done without a poll."""
        return 0, sum(event.error() is None for event in self.script.get(tp.partition, []))

    def poll(self, timeout: float):
        for number in self.assigned:
            if self.script.get(number):
                return self.script[number].pop(0)
        return None

    def close(self) -> None:
        self.closed = True


class Counting(RuntimeHooks):
    def __init__(self) -> None:
        self.restoring = 0

    def at(self, point: str) -> None:
        self.restoring += point == "restoring"


def recovery(consumer: ScriptedConsumer, hooks: RuntimeHooks | None = None) -> Recovery:
    def factory(config: dict) -> ScriptedConsumer:
        consumer.config = config
        return consumer

    return Recovery("127.0.0.1:1", "group", "group-ledger-state-changelog", hooks, consumer_factory=factory)


def test_partitions_are_restored_to_their_end_and_reported_once():
    consumer = ScriptedConsumer({
        0: [Event(0, encode_key(("a",)), b"1"), Event(0, encode_key(("b",)), b"2"), Event(0, encode_key(("a",)), None), eof(0)],
        1: [eof(1)],
    })
    hooks = Counting()
    manager = recovery(consumer, hooks)
    stores = {0: ChangelogStore(), 1: ChangelogStore()}
    for number, store in stores.items():
        manager.add(number, store)
    assert manager.recovering
    finished = []
    while manager.recovering:
        finished += manager.step(budget_s=0.05)
    assert sorted((number, count) for number, count, _ in finished) == [(0, 3), (1, 0)]
    assert stores[0].data == {("b",): 2} and stores[1].data == {}
    assert stores[0].changes() == []  # restored records are not changes to write back
    assert hooks.restoring == 3
    assert consumer.assigned == []  # finished partitions are unassigned
    assert consumer.config["isolation.level"] == "read_committed" and consumer.config["group.id"] == "group-restore"
    assert manager.step() == []
    manager.close()
    assert consumer.closed


def test_a_discarded_partition_is_never_reported():
    consumer = ScriptedConsumer({0: [Event(0, encode_key(("a",)), b"1")], 1: [eof(1)]})
    manager = recovery(consumer)
    manager.add(0, ChangelogStore())
    manager.add(1, ChangelogStore())
    finished = manager.step(budget_s=0.01)  # partition 0 has no end of partition yet
    manager.discard(0)  # revoked while restoring
    while manager.recovering:
        finished += manager.step(budget_s=0.05)
    assert [number for number, _, _ in finished] == [1]


def test_a_slice_returns_within_its_budget_while_records_keep_coming():
    endless = [Event(0, encode_key(("k", n)), b"0") for n in range(100_000)]
    consumer = ScriptedConsumer({0: endless})
    manager = recovery(consumer)
    manager.add(0, ChangelogStore())
    assert manager.step(budget_s=0.02) == []
    assert manager.recovering and 0 < manager.restored[0] < 100_000


class Watermarked(ScriptedConsumer):
    """Also answers ``get_watermark_offsets`` and records where each
    partition was assigned."""

    def __init__(self, script: dict[int, list[Event]], watermarks: dict[int, tuple[int, int]]):
        super().__init__(script)
        self.watermarks = watermarks
        self.positions: dict[int, int] = {}

    def get_watermark_offsets(self, partition, timeout=None):
        return self.watermarks[partition.partition]

    def incremental_assign(self, partitions) -> None:
        super().incremental_assign(partitions)
        self.positions.update({tp.partition: tp.offset for tp in partitions})


def test_a_local_checkpoint_is_restored_from_only_when_the_changelog_still_has_it(tmp_path):
    """Checkpoints at offset 9 (restore from 10) on four partitions whose
    changelog ends before it (recreated), starts after it (records
    deleted), ends just there (nothing to restore), or goes on: the first
    two are wiped and read whole, the third finishes at once, the fourth
    reads the tail only."""
    from confluent_kafka import OFFSET_BEGINNING

    from recurrence_ledger.store.rocksdb import open_store

    stores = {}
    for number in range(4):
        store = open_store(tmp_path, "t", number, "id")
        store[("old", number)] = 1
        store.flushed(9)
        store.close()
        stores[number] = open_store(tmp_path, "t", number, "id")
        assert stores[number].restore_from() == 10
    consumer = Watermarked(
        {0: [Event(0, encode_key(("new",)), b"0", offset=0), eof(0)], 1: [eof(1)], 3: [Event(3, encode_key(("tail",)), b"3", offset=10), eof(3)]},
        {0: (0, 5), 1: (12, 30), 2: (0, 10), 3: (0, 12)},
    )
    manager = recovery(consumer)
    for number, store in stores.items():
        manager.add(number, store)
    finished = []
    while manager.recovering:
        finished += manager.step(budget_s=0.05)
    assert consumer.positions == {0: OFFSET_BEGINNING, 1: OFFSET_BEGINNING, 3: 10}
    assert sorted((number, count) for number, count, _ in finished) == [(0, 1), (1, 0), (2, 0), (3, 1)]
    assert "beyond the end" in stores[0].wiped and "before the start" in stores[1].wiped
    assert stores[0].snapshot() == {("new",): 0} and stores[1].snapshot() == {}
    assert stores[2].snapshot() == {("old", 2): 1} and stores[3].snapshot() == {("old", 3): 1, ("tail",): 3}
    for store in stores.values():
        store.close()


def test_a_broker_restart_while_restoring_is_waited_out_and_a_fatal_consumer_asks_for_a_restart():
    """Transport errors while the broker restarts are logged and the
    restore goes on (they used to end the worker with exit 1); a consumer
    in librdkafka's fatal state exits for a restart (RESTART_EXIT)."""
    from recurrence_ledger.runtime.checkpoint import RESTART_EXIT, RestartRequired

    down = [Event(0, error=KafkaError(KafkaError._TRANSPORT, "broker down")), Event(0, error=KafkaError(KafkaError._ALL_BROKERS_DOWN))]
    consumer = ScriptedConsumer({0: [*down, Event(0, encode_key(("a",)), b"1"), eof(0)]})
    manager, store = recovery(consumer), ChangelogStore()
    manager.add(0, store)
    finished = []
    while manager.recovering:
        finished += manager.step(budget_s=0.05)
    assert [(number, count) for number, count, _ in finished] == [(0, 1)] and store.snapshot() == {("a",): 1}
    fatal = ScriptedConsumer({0: [Event(0, error=KafkaError(KafkaError._FATAL, "fenced", fatal=True)), Event(0, encode_key(("a",)), b"1")]})
    manager = recovery(fatal)
    manager.add(0, ChangelogStore())
    with pytest.raises(RestartRequired) as raised:
        while manager.recovering:
            manager.step(budget_s=0.05)
    assert raised.value.exit_code == RESTART_EXIT
