"""Journal lines as consumed Kafka records, for the broker-free tests of the
worker's shell (``process_message``, ``Task``): what the worker reads from
partition 0 of ``source-journal`` after ``publish`` of those lines."""

from __future__ import annotations

from collections.abc import Iterable

from recurrence_ledger.kafka.kafka_io import prepare_line


class Record:
    """A consumed record as the worker sees it (confluent-kafka Message's getters)."""

    def __init__(self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes):
        self._topic, self._partition, self._offset, self._key, self._value = topic, partition, offset, key, value

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes:
        return self._value


def consumed(lines: Iterable[bytes]) -> list[Record]:
    """Journal ``lines`` (without line ends) as published (``prepare_line``)
    and consumed from partition 0, offsets from 0."""
    return [Record(item.topic, 0, offset, item.key, item.value) for offset, item in enumerate(map(prepare_line, lines))]
