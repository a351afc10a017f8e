"""contract §9 on the real broker: the bad-input corpus published between the
minimum case's records, one worker, one partition.

The worker must exit by itself (never crash, never stall), write exactly one
dead letter per bad record — its reason, topic, partition, offset, key and
raw bytes — and publish the ledger outputs of the valid records alone, byte
for byte as ``run-journal`` (contract §10).

Published: every Kafka entry of ``tests/badinput/corpus.py`` on its topic,
every journal entry as is on ``source-journal`` (publish_journal's raw
path), and the duplicates of HOSTILE_VALID_REPLAYS, which must change
nothing. Left out: records over MAX_E2E_RAW_BYTES (a producer with default
settings cannot send them; the decode-path tests cover them) and known
worker defects, each of which would run in its own worker in
``test_known_defect_on_the_worker`` (xfail strict) — none today.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

import pytest
from confluent_kafka import KafkaException

from recurrence_ledger.kafka.kafka_io import publish_raw
from tests.badinput import corpus
from tests.badinput.corpus import HOSTILE_VALID_REPLAYS, JOURNAL, JOURNAL_ENTRIES, KAFKA_ENTRIES, SOURCE_JOURNAL, Entry
from tests.e2e import harness
from tests.e2e.harness import topic_names

VALID = corpus.valid_lines()
#: Seconds a worker may take from start to its idle exit before it counts as stalled.
WORKER_TIMEOUT_S = 60


class Planned(NamedTuple):
    """A record to publish raw: where it goes (after ``gap`` valid records)
    and the reason of its dead letter (None: a duplicate, no dead letter)."""

    id: str
    logical_topic: str
    key: bytes | None
    value: bytes | None
    gap: int
    reason: str | None


def planned(entry: Entry, index: int) -> Planned:
    """A corpus entry as published: journal lines raw on source-journal."""
    gap = corpus.gap(entry, index)
    if entry.target == JOURNAL:
        key, reason = corpus.as_source_journal(entry)
        return Planned(entry.id, SOURCE_JOURNAL, key, entry.value, gap, reason)
    return Planned(entry.id, entry.target, entry.key, entry.value, gap, entry.expected_reason)


def fits(entry: Entry) -> bool:
    """Whether a default producer can publish the entry (key included)."""
    return len(entry.value or b"") + len(entry.key or corpus.KEY) <= corpus.MAX_E2E_RAW_BYTES


@pytest.fixture
def new_prefix(admin) -> Iterable[Callable[[], str]]:
    """``new_prefix()``: a fresh topic prefix (harness.new_prefix) whose
    topics are deleted after the test (best effort)."""
    made: list[str] = []

    def make() -> str:
        made.append(harness.new_prefix())
        return made[-1]

    yield make
    mine = [name for name in topic_names(admin) if name.startswith(tuple(made))] if made else []
    if mine:
        for future in admin.delete_topics(mine, operation_timeout=30).values():
            try:
                future.result(timeout=30)
            except KafkaException:
                pass


def run_worker_on(bootstrap: str, prefix: str, records: list[Planned], tmp_path: Path):
    """Publish the minimum case with ``records`` between its lines (each at
    its gap), run one worker to its idle exit, export every output topic.
    Returns ``(exit code, exported outputs, {(physical topic, offset): Planned}, log path)``."""
    harness.prepare(bootstrap, prefix, partitions=1)
    where: dict[tuple[str, int], Planned] = {}
    for gap in range(len(VALID) + 1):
        for record in records:
            if record.gap == gap:
                topic = harness.physical(prefix, record.logical_topic)
                partition, offset = publish_raw(bootstrap, topic, record.key, record.value)
                assert partition == 0
                where[(topic, offset)] = record
        if gap < len(VALID):
            line = tmp_path / f"valid-{gap}.jsonl"
            line.write_bytes(VALID[gap] + b"\n")
            harness.publish(bootstrap, line, prefix)
    log = tmp_path / "worker.log"
    worker = harness.start_worker(bootstrap, prefix, log, idle_exit=4)
    code = harness.wait_exit(worker, WORKER_TIMEOUT_S, log)
    return code, harness.exported(bootstrap, prefix, tmp_path / "kafka"), where, log


def check_dead_letters(dead_letters: list[dict], where: dict[tuple[str, int], Planned]) -> None:
    """Exactly one dead letter per bad record, none for a duplicate, each with
    the record's coordinates, key, raw bytes and expected reason."""
    expected = sorted((topic, 0, offset, record.reason) for (topic, offset), record in where.items() if record.reason)
    got = sorted((d["topic"], d["partition"], d["offset"], d["reason"]) for d in dead_letters)
    by_id = {(topic, offset): record.id for (topic, offset), record in where.items()}
    assert got == expected, [(by_id.get((d["topic"], d["offset"])), d["reason"], d["message"][:200])
                             for d in dead_letters if (d["topic"], 0, d["offset"], d["reason"]) not in expected]
    for dead in dead_letters:
        record = where[(dead["topic"], dead["offset"])]
        assert corpus.raw_of(dead) == corpus.kept_raw(record.value), record.id
        assert dead["key"] == (record.key.decode("utf-8", "replace") if record.key is not None else None), record.id
        assert dead["message"], record.id


@pytest.mark.slow
def test_corpus_on_the_worker(bootstrap, new_prefix, tmp_path):
    records = [planned(entry, index) for entries in (JOURNAL_ENTRIES, KAFKA_ENTRIES)
               for index, entry in enumerate(entries) if fits(entry) and "worker" not in entry.defects]
    records += [Planned(f"replay/{case.id}", SOURCE_JOURNAL if case.target == JOURNAL else case.target,
                        corpus.KEY if case.key is None else case.key, case.value, case.after, None)
                for case in HOSTILE_VALID_REPLAYS]
    assert len([record for record in records if record.reason]) >= 40

    code, kafka, where, log = run_worker_on(bootstrap, new_prefix(), records, tmp_path)
    assert code == 0, log.read_text()[-3000:]

    check_dead_letters(harness.lines(kafka["dead-letter"]), where)
    reference = harness.embedded(valid_journal(tmp_path / "valid.jsonl"), tmp_path / "embedded")
    harness.assert_same_outputs(kafka, reference)


def valid_journal(path):
    """The corpus's valid lines (the minimum case and a candidate) as a
    journal file: what every bad record is interleaved with."""
    path.write_bytes(b"".join(line + b"\n" for line in corpus.valid_lines()))
    return path


def defect_cases() -> list:
    """One publishable entry per known worker defect (a Kafka entry when
    there is one), each for its own xfail(strict) run."""
    chosen: dict[str, tuple[Entry, int]] = {}
    for entries in (KAFKA_ENTRIES, JOURNAL_ENTRIES):
        for index, entry in enumerate(entries):
            defect = entry.defects.get("worker")
            if defect and fits(entry) and defect not in chosen:
                chosen[defect] = (entry, index)
    return [pytest.param(entry, index, id=entry.id, marks=pytest.mark.xfail(strict=True, reason=defect))
            for defect, (entry, index) in chosen.items()]


# Defined only while the corpus knows a worker defect (none today), so that
# no empty parameter set shows up as a skip.
if defect_cases():

    @pytest.mark.parametrize(("entry", "index"), defect_cases())
    def test_known_defect_on_the_worker(entry: Entry, index: int, bootstrap, new_prefix, tmp_path):
        code, kafka, where, log = run_worker_on(bootstrap, new_prefix(), [planned(entry, index)], tmp_path)
        assert code == 0, log.read_text()[-3000:]
        check_dead_letters(harness.lines(kafka["dead-letter"]), where)
        reference = harness.embedded(valid_journal(tmp_path / "valid.jsonl"), tmp_path / "embedded")
        harness.assert_same_outputs(kafka, reference)
