"""Replay jobs: re-run the ledger over the input topics from a chosen start
without double counting (contract §6 replay rule, §10).

A replay reads every input partition from its beginning with its own
consumer (group ``<group id>-replay``; it commits no offsets), into a fresh
state per partition that is first seeded from the ledger itself:

- every RecurrenceMatch already in ``recurrence-matches`` is restored, so a
  recorded match decision is reused as is, never recomputed — even though
  the replay's state was rebuilt from nothing;
- the identities already in the ledger (``match_digest``, ``observation_id``,
  ``candidate_id``, an admission decision's (scope_id, candidate_id), a
  CandidateSet's (scope_id, candidate_set_digest) — read from the keys of
  ``candidate-sets``, without decoding the sets — and the coordinates of
  dead-lettered records) are loaded, and an output whose identity exists is
  not written again — an admission decision is frozen even when the replay
  would decide its candidate otherwise (e.g. a window that starts after the
  Task Outcome it cites);
- a CandidateSet is written only just before the first match the replay
  writes that names it by digest (contract §6), when the topic does not
  hold it yet — also when the event that first used the set was before the
  window, and never for a match the replay does not write;
- an outcome with any match or observation in the ledger is decided (contract
  §5: frozen): no new match or observation is written for it, even when a
  replay over per-kind topics (no total order across them) would decide it
  differently; such a scope is reported in ``conflicted_scopes`` and its
  statistics are not re-published (the replay's view of it is not the
  ledger's).

Records before the chosen start only rebuild state (they are the context a
window needs); records from the start on may write outputs. Statistics are
written once per scope (revision statistics once per revision, review
statuses once per candidate) at the end, and only when the replayed view's ledger
facts differ from the topic's latest record (the gauges pending_outcomes and
late_revisions depend on arrival order and are not compared), so a replay
never regresses the compacted view to an intermediate state. Replaying any window of a finished run
therefore writes nothing.

Start (``parse_start``): ``earliest``; ``offsets:TOPIC/P=O,…`` (logical input
topic, partition, offset; unlisted partitions start at their beginning);
``timestamp:ISO-8601`` (Kafka's offsets_for_times per input partition); or
``position:N`` (events whose journal_position ≥ N).

The pattern stage (contract §23.5) is replayed too, in this process: at
the end, every replayed scope's absolute counts go through one
``PatternStage`` (the repartition topic is not written); a
PatternCandidate whose candidate_id is not on ``pattern-candidates`` yet is
written, and a ``signature-patterns`` row only when it differs from the
topic's latest, each to its key's partition of the repartition topic, as
the worker's pattern stage would. A replay's window does not limit them:
a pattern's counts come from every replayed scope.

A replay reads each input partition only up to the offset the
deployment's workers committed on it (their consumer group, read without
joining it), when they committed any: the records after it are the
workers' to process, and the worker's own state does not learn what a
replay wrote, so a replay that went past it would see the worker write
the same facts again (see docs/kafka.md, "Replay, rebuild and reset").
Workers that are in their group but have committed nothing yet make it
refuse to start (:class:`WorkersStarting`). Workers that run on while it
replays keep the views theirs: when, after reading, the group has
committed input beyond the replay's ranges, the replay writes no view
and no pattern record (their rows on the topics are newer than its
state: writing its own would roll them back); and it writes no pattern
record while the workers' pattern stage has not consumed the
repartition topic to its end (the counts on it are the workers' to turn
into candidates). ``ReplaySummary.views_left`` / ``patterns_left`` say
so; run it again once the workers are idle or stopped.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from confluent_kafka import Consumer, Producer, TopicPartition
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from recurrence_ledger.embedded.output import stderr_console
from recurrence_ledger.kafka.client_config import consumer_config, producer_config
from recurrence_ledger.kafka.kafka_io import produce, read_raw, read_topic
from recurrence_ledger.kafka.kafka_admin import group_members
from recurrence_ledger.runtime.catch_up import CatchUp
from recurrence_ledger.runtime.unicode_pin import check_changelog, check_holdout_changelog
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.ledger.statistics import revision_id
from recurrence_ledger.ledger.patterns import PatternStage
from recurrence_ledger.ledger.processor import Emit, LedgerConfig, LedgerProcessor
from recurrence_ledger.ledger.intake import dead_letter
from recurrence_ledger.kafka.records import ROLLED_BACK_REASONS, CoreFailure, emit_key, encode_emit, process_message
from recurrence_ledger.runtime.stages import repartition_partition
from recurrence_ledger.serde.codec import AVRO, FIXED, Codec
from recurrence_ledger import catalogue
from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.catalogue import (
    ADMISSION_DECISIONS,
    CANDIDATE_SETS,
    DEAD_LETTER,
    MATCHES,
    OBSERVATIONS,
    HOLDOUT_OBSERVATIONS,
    PATTERN_CANDIDATES,
    PATTERN_REPARTITION,
    REVIEW_CANDIDATES,
    REVIEW_STATUS,
    REVISION_STATISTICS,
    SIGNATURE_PATTERNS,
    STATISTICS,
)

IDENTITY_FIELDS = {MATCHES: "match_digest", OBSERVATIONS: "observation_id", REVIEW_CANDIDATES: "candidate_id", HOLDOUT_OBSERVATIONS: "observation_id"}
#: Outputs written once per identity: the ledger's, plus admission decisions
#: (idempotent on (scope_id, candidate_id)) and dead letters.
IDENTITY_TOPICS = (*IDENTITY_FIELDS, ADMISSION_DECISIONS, CANDIDATE_SETS, DEAD_LETTER)


@dataclass(frozen=True)
class ReplayStart:
    """Where outputs may start: see the module docstring."""

    mode: str
    offsets: tuple[tuple[str, int, int], ...] = ()
    timestamp_ms: int | None = None
    position: int | None = None


def parse_start(text: str) -> ReplayStart:
    """Parse ``earliest`` | ``offsets:TOPIC/P=O,…`` | ``timestamp:ISO`` |
    ``position:N``. Raises ValueError with the accepted forms."""
    if text == "earliest":
        return ReplayStart("earliest")
    kind, _, rest = text.partition(":")
    try:
        if kind == "offsets":
            offsets = []
            for item in rest.split(","):
                where, _, offset = item.partition("=")
                topic, _, partition = where.rpartition("/")
                if topic not in catalogue.INPUT_TOPICS:
                    raise ValueError(f"{topic!r} is not an input topic")
                offsets.append((topic, int(partition), int(offset)))
            return ReplayStart("offsets", offsets=tuple(offsets))
        if kind == "timestamp":
            return ReplayStart("timestamp", timestamp_ms=int(datetime.fromisoformat(rest).timestamp() * 1000))
        if kind == "position":
            return ReplayStart("position", position=int(rest))
    except ValueError as error:
        raise ValueError(f"bad replay start {text!r}: {error}") from None
    raise ValueError(f"bad replay start {text!r}: use earliest, offsets:TOPIC/P=O,…, timestamp:ISO-8601 or position:N")


@dataclass
class PartitionRange:
    """One input topic-partition of a replay: read [low, end); outputs may
    start at ``start`` (for position mode: the whole range, filtered by
    journal_position)."""

    topic: str
    partition: int
    low: int
    start: int
    end: int


@dataclass
class ReplaySummary:
    """What a replay read and wrote (or, for a dry run, would read)."""

    ranges: list[PartitionRange]
    records_read: int = 0
    written: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    suppressed: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    seconds: float = 0.0
    dry_run: bool = False
    conflicted_scopes: list[str] = field(default_factory=list)
    #: Why the views (or the pattern stage's records) were left to the
    #: running workers (:func:`_workers_moved_on`); None: written as needed.
    views_left: str | None = None
    patterns_left: str | None = None


class WorkersStarting(RecurrenceLedgerError, RuntimeError):
    """The deployment's workers are in their consumer group but have
    committed no offset yet: a replay would read every input to its end and
    write what they are about to write (every fact twice). Run it after
    their first commit, or with them stopped."""


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(consumer_config(bootstrap, group, {"enable.partition.eof": True}))


def worker_positions(bootstrap: str, worker_group: str, partitions: list[TopicPartition]) -> dict[tuple[str, int], int] | None:
    """The offsets the deployment's workers (consumer group
    ``worker_group``) committed on ``partitions``, by (topic, partition) —
    a partition without one maps to its first offset, since a worker reads
    it from the beginning — or None when the group committed none at all
    (no worker ever ran, or the group was deleted for a reset). Read
    without joining the group, so it works while workers run."""
    consumer = _consumer(bootstrap, worker_group)
    try:
        committed = consumer.committed(partitions, timeout=10)
    finally:
        consumer.close()
    if all(tp.offset < 0 for tp in committed):
        return None
    return {(tp.topic, tp.partition): max(tp.offset, 0) for tp in committed}


def _workers_moved_on(bootstrap: str, worker_group: str, ends: dict[tuple[str, int], int], repartition_topic: str) -> tuple[str | None, str | None]:
    """Whether the views and the pattern records are still the replay's to
    write, once it has read its ranges: ``(views, patterns)``, each None or
    why not. The views are not when the workers committed input beyond
    ``ends`` (physical topic, partition → the replay's end) since it
    planned — their view rows on the topics are then newer than the
    replay's, which would roll them back; the pattern records are not, in
    that case too, nor while the workers' pattern stage has not consumed
    the repartition topic (``repartition_topic``) to its end
    (``runtime.catch_up.CatchUp``: no record beyond the group's offsets, no
    transaction open on it) —
    the counts still on it are the workers' to turn into candidates, which
    the replay would write first and the workers again."""
    positions = worker_positions(bootstrap, worker_group, [TopicPartition(topic, partition) for topic, partition in ends]) or {}
    moved = sorted(f"{topic}[{partition}]" for (topic, partition), end in ends.items() if positions.get((topic, partition), 0) > end)
    views = f"the workers committed input beyond the replay's end since it started ({', '.join(moved[:5])}): their views are newer" if moved else None
    if views is not None:
        return views, views
    group_consumer = _consumer(bootstrap, worker_group)  # its committed offsets only: never joins
    check = CatchUp(group_consumer, [repartition_topic], bootstrap, worker_group, None, 0.0)
    try:
        lagging, _ = check.lagging()  # records beyond the group's offsets, or a transaction still open on the topic
    finally:
        check.close()
        group_consumer.close()
    behind = [f"{lag.topic}[{lag.partition}]" for lag in lagging]
    patterns = f"the workers' pattern stage has not consumed {', '.join(behind[:5])} to its end yet" if behind else None
    return None, patterns


def plan(bootstrap: str, topic_prefix: str, start: ReplayStart, group: str, worker_group: str | None = None) -> list[PartitionRange]:
    """The ranges a replay would read, per input topic-partition: each up to
    its high watermark, or — when ``worker_group`` has committed offsets
    (:func:`worker_positions`) — only up to the group's: the records after
    them are the workers' to process, and a replay that wrote their facts
    first would see the worker write them again, its state not knowing
    them (docs/kafka.md, "Replay, rebuild and reset")."""
    consumer = _consumer(bootstrap, group)
    try:
        bounds = []
        given = {(topic, partition): offset for topic, partition, offset in start.offsets}
        for logical in catalogue.INPUT_TOPICS:
            physical = catalogue.physical(logical, topic_prefix)
            metadata = consumer.list_topics(physical, timeout=10).topics[physical]
            for partition in sorted(metadata.partitions):
                low, high = consumer.get_watermark_offsets(TopicPartition(physical, partition), timeout=10)
                first = low
                if start.mode == "offsets":
                    first = max(low, min(high, given.get((logical, partition), low)))
                elif start.mode == "timestamp":
                    [found] = consumer.offsets_for_times([TopicPartition(physical, partition, start.timestamp_ms)], timeout=10)
                    first = high if found.offset < 0 else found.offset
                bounds.append((logical, physical, partition, low, first, high))
    finally:
        consumer.close()
    positions = worker_positions(bootstrap, worker_group, [TopicPartition(b[1], b[2]) for b in bounds]) if worker_group else None
    if positions is None and worker_group and group_members(bootstrap, worker_group):
        raise WorkersStarting(f"the workers of group {worker_group} are running and have committed nothing yet: a replay now would write "
                              "what they are writing. Run it after their first commit, or with them stopped")
    ranges = []
    for logical, physical, partition, low, first, high in bounds:
        end = high if positions is None else max(low, min(high, positions[(physical, partition)]))
        ranges.append(PartitionRange(logical, partition, low, min(first, end), end))
    return ranges


class _Ledger:
    """Identities already in the output topics, per partition."""

    def __init__(self, bootstrap: str, topic_prefix: str, codec: Codec = FIXED):
        self.identities: dict[str, set] = {topic: set() for topic in IDENTITY_TOPICS}
        self.matches: dict[int, list[dict]] = defaultdict(list)
        # Outcomes with any ledger record: their decision is frozen (§5), so a
        # replay that reads per-kind topics in another interleaving and
        # decides one differently (linked vs unlinked) writes nothing for it.
        self.decided: set[tuple[str, str]] = set()
        self.latest_statistics: dict[str, dict] = {}
        for partition, _, _, value in read_topic(bootstrap, MATCHES, topic_prefix=topic_prefix, codec=codec):
            self.matches[partition].append(value)
            self.identities[MATCHES].add(value["match_digest"])
            self.decided.add((value["scope_id"], value["task_outcome_ref"]["source_id"]))
        for _, _, _, value in read_topic(bootstrap, OBSERVATIONS, topic_prefix=topic_prefix, codec=codec):
            self.identities[OBSERVATIONS].add(value["observation_id"])
            self.decided.add((value["scope_id"], value["task_outcome_ref"]["source_id"]))
        for _, _, _, value in read_topic(bootstrap, HOLDOUT_OBSERVATIONS, topic_prefix=topic_prefix, codec=codec):  # contract §21.3
            self.identities[HOLDOUT_OBSERVATIONS].add(value["observation_id"])
            self.decided.add((value["scope_id"], value["task_outcome_ref"]["source_id"]))
        self.identities[REVIEW_CANDIDATES] = {
            value["candidate_id"] for _, _, _, value in read_topic(bootstrap, REVIEW_CANDIDATES, topic_prefix=topic_prefix, codec=codec)
        }
        dead_letters = [value for _, _, _, value in read_topic(bootstrap, DEAD_LETTER, topic_prefix=topic_prefix, codec=codec)]
        self.identities[DEAD_LETTER] = {(value["topic"], value["partition"], value["offset"]) for value in dead_letters}
        #: Input records the worker rolled back and parked (never applied):
        #: a replay must not apply them either.
        self.parked = {(value["topic"], value["partition"], value["offset"]) for value in dead_letters if value["reason"] in ROLLED_BACK_REASONS}
        self.identities[ADMISSION_DECISIONS] = {
            (value["scope_id"], value["candidate_id"]) for _, _, _, value in read_topic(bootstrap, ADMISSION_DECISIONS, topic_prefix=topic_prefix, codec=codec)
        }
        for record in read_raw(bootstrap, catalogue.physical(CANDIDATE_SETS, topic_prefix)):
            key = orjson.loads(record.key)
            self.identities[CANDIDATE_SETS].add((key["scope_id"], key["candidate_set_digest"]))
        for _, _, _, value in read_topic(bootstrap, STATISTICS, topic_prefix=topic_prefix, codec=codec):
            self.latest_statistics[value["scope_id"]] = value
        self.latest_revisions: dict[tuple, dict] = {}
        for _, _, _, value in read_topic(bootstrap, REVISION_STATISTICS, topic_prefix=topic_prefix, codec=codec):
            self.latest_revisions[revision_id(value)] = value
        self.latest_review_status: dict[tuple, dict] = {}  # contract §18: the review-status table
        for _, _, _, value in read_topic(bootstrap, REVIEW_STATUS, topic_prefix=topic_prefix, codec=codec):
            self.latest_review_status[(value["scope_id"], value["candidate_id"])] = value
        # contract §23: the pattern stage's facts and view
        self.pattern_candidates = {
            value["candidate_id"] for _, _, _, value in read_topic(bootstrap, PATTERN_CANDIDATES, topic_prefix=topic_prefix, codec=codec)
        }
        self.latest_patterns: dict[tuple[str, str], dict] = {}
        for _, _, _, value in read_topic(bootstrap, SIGNATURE_PATTERNS, topic_prefix=topic_prefix, codec=codec):
            self.latest_patterns[(value["group"], value["signature_key"])] = value

    def frozen(self, topic: str, value: dict) -> bool:
        """A match or observation (§21.3: or holdout observation) of an
        outcome the ledger already decided."""
        return topic in (MATCHES, OBSERVATIONS, HOLDOUT_OBSERVATIONS) and (value["scope_id"], value["task_outcome_ref"]["source_id"]) in self.decided

    def identity(self, topic: str, value: dict) -> Any:
        if topic == DEAD_LETTER:
            return (value["topic"], value["partition"], value["offset"])
        if topic == ADMISSION_DECISIONS:
            return (value["scope_id"], value["candidate_id"])
        if topic == CANDIDATE_SETS:
            return (value["scope_id"], value["candidate_set_digest"])
        return value[IDENTITY_FIELDS[topic]]


def run_replay(
    bootstrap: str,
    topic_prefix: str,
    start: ReplayStart,
    *,
    app_id: str = "recurrence-ledger",
    ledger: LedgerConfig | None = None,
    output_format: str = AVRO,
    dry_run: bool = False,
    show_progress: bool = True,
    codec: Codec = FIXED,
    accept_unicode_change: bool = False,
    accept_holdout_change: bool = False,
) -> ReplaySummary:
    """Run (or, with ``dry_run``, only plan) a replay; see the module
    docstring. Values are read and written with ``codec``
    (``recurrence_ledger.serde.codec``). Returns what was read and
    written. Raises KafkaException on broker errors and
    BufferError/KafkaException if outputs cannot be delivered (the replay
    can simply be run again: it is idempotent), RegistryError when a Schema
    Registry does not answer.

    Raises UnicodeVersionChanged before reading anything else when the
    deployment's state (its changelog) was built on another Unicode version
    than this runtime's, unless ``accept_unicode_change`` (contract §10);
    HoldoutPolicyChanged when it was built under another holdout policy
    than ``ledger``'s, unless ``accept_holdout_change`` (contract §21.5)."""
    changelog = catalogue.physical(catalogue.changelog_name(app_id), topic_prefix)
    check_changelog(bootstrap, changelog, accept_unicode_change)
    check_holdout_changelog(bootstrap, changelog, ledger or LedgerConfig(), accept_holdout_change)
    worker_group = catalogue.physical(app_id, topic_prefix)
    group = catalogue.replay_group(worker_group)
    ranges = plan(bootstrap, topic_prefix, start, group, worker_group)
    summary = ReplaySummary(ranges, dry_run=dry_run)
    if dry_run:
        return summary
    started = time.monotonic()
    existing = _Ledger(bootstrap, topic_prefix, codec)
    config = ledger or LedgerConfig()
    processors: dict[int, LedgerProcessor] = {}
    for partition in sorted({r.partition for r in ranges}):
        processor = LedgerProcessor(config=config)
        for match in existing.matches.get(partition, []):
            processor.restore_match(match)  # contract §6: reuse, never re-decide
        processors[partition] = processor
    window = {(catalogue.physical(r.topic, topic_prefix), r.partition): r.start for r in ranges}
    ends = {(catalogue.physical(r.topic, topic_prefix), r.partition): r.end for r in ranges if r.end > r.low}
    planned = {(catalogue.physical(r.topic, topic_prefix), r.partition): r.end for r in ranges}
    total = sum(r.end - r.low for r in ranges)

    consumer = _consumer(bootstrap, group)
    producer = Producer(producer_config(bootstrap))
    candidate_sets: dict[tuple[str, str], Emit] = {}  # every set the replay's processors published
    conflicted: set[str] = set()
    try:
        consumer.assign(
            [TopicPartition(catalogue.physical(r.topic, topic_prefix), r.partition, r.low) for r in ranges if r.end > r.low]
        )
        with Progress(
            TextColumn("replay", style="bold", markup=False), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]:,.0f} events/s", markup=False),
            TextColumn("lag {task.fields[lag]:,}", markup=False), TimeElapsedColumn(), console=stderr_console(), transient=True,
            disable=not show_progress,
        ) as progress:
            task = progress.add_task("replay", total=total, rate=0.0, lag=total)
            while ends:
                for message in consumer.consume(num_messages=1_000, timeout=1.0):
                    key = (message.topic(), message.partition())
                    if message.error():
                        continue
                    if key not in ends:
                        continue
                    summary.records_read += 1
                    in_window = message.offset() >= window[key]
                    if in_window and start.mode == "position":
                        in_window = _position(message, topic_prefix, codec) >= start.position
                    if (message.topic(), message.partition(), message.offset()) in existing.parked:
                        emits = []  # rolled back and dead-lettered by the worker: never part of its state
                    else:
                        try:
                            emits = process_message(processors[message.partition()], message, topic_prefix, codec)
                        except CoreFailure as failure:
                            emits = [dead_letter(failure.coordinates, failure.raw, "internal_error", str(failure))]
                    for emit in emits:
                        identity = existing.identity(emit.topic, emit.value)
                        if emit.topic == CANDIDATE_SETS:
                            if identity not in existing.identities[CANDIDATE_SETS]:
                                candidate_sets[identity] = emit  # written with the first match the replay writes that cites it
                            continue
                        if identity not in existing.identities[emit.topic] and existing.frozen(emit.topic, emit.value):
                            conflicted.add(emit.value["scope_id"])  # decided otherwise before: keep the ledger's decision
                        if not in_window or identity in existing.identities[emit.topic] or existing.frozen(emit.topic, emit.value):
                            summary.suppressed[emit.topic] += 1
                            continue
                        cited = (emit.value["scope_id"], emit.value["candidate_set_digest"]) if emit.topic == MATCHES else None
                        if cited is not None and emit.value["candidate_refs"] is None and cited not in existing.identities[CANDIDATE_SETS]:
                            # contract §6: the set precedes the first match that cites it.
                            existing.identities[CANDIDATE_SETS].add(cited)
                            _produce(producer, topic_prefix, candidate_sets[cited], message.partition(), None, output_format, codec)
                            summary.written[CANDIDATE_SETS] += 1
                        existing.identities[emit.topic].add(identity)
                        _produce(producer, topic_prefix, emit, message.partition(), message.key(), output_format, codec)
                        summary.written[emit.topic] += 1
                    if message.offset() + 1 >= ends[key]:
                        del ends[key]
                elapsed = max(time.monotonic() - started, 1e-9)
                progress.update(task, completed=summary.records_read, rate=summary.records_read / elapsed, lag=total - summary.records_read)
        summary.conflicted_scopes = sorted(conflicted)
        summary.views_left, summary.patterns_left = _workers_moved_on(
            bootstrap, worker_group, planned, catalogue.physical(PATTERN_REPARTITION, topic_prefix))
        if summary.views_left is None:
            _replay_views(processors, existing, conflicted, summary, producer, topic_prefix, output_format, codec)
        if summary.patterns_left is None:
            _replay_patterns(processors.values(), existing, config, summary, producer, topic_prefix, output_format, codec, consumer)
        remaining = producer.flush(30)
        if remaining:
            raise BufferError(f"{remaining} replay outputs were not delivered")
    finally:
        consumer.close()
    summary.seconds = time.monotonic() - started
    return summary


def _replay_views(
    processors: dict[int, LedgerProcessor], existing: _Ledger, conflicted: set[str], summary: ReplaySummary,
    producer: Producer, topic_prefix: str, output_format: str, codec: Codec,
) -> None:
    """The views of a replay (module docstring): each key's final row,
    written when it differs from the topic's latest."""
    final_statistics: dict[str, tuple[int, dict]] = {}
    final_revisions: dict[tuple, tuple[int, Emit]] = {}
    final_review_status: dict[tuple, tuple[int, Emit]] = {}
    # The views of the whole replay as one batch (contract §8): the final
    # value of every key the replayed events changed.
    for partition, processor in processors.items():
        for emit in processor.end_batch():
            if emit.topic == STATISTICS:
                final_statistics[emit.value["scope_id"]] = (partition, emit.value)
            elif emit.topic == REVISION_STATISTICS:
                final_revisions[revision_id(emit.value)] = (partition, emit)
            elif emit.topic == REVIEW_STATUS:
                final_review_status[(emit.value["scope_id"], emit.value["candidate_id"])] = (partition, emit)
    for scope_id, (partition, record) in sorted(final_statistics.items()):
        if scope_id in conflicted:
            # The replay decided a frozen outcome otherwise, so its view of
            # this scope is not the ledger's: keep the published one.
            summary.suppressed[STATISTICS] += 1
        elif _facts(existing.latest_statistics.get(scope_id)) != _facts(record):
            _produce(producer, topic_prefix, Emit(STATISTICS, scope_id, record), partition, None, output_format, codec)
            summary.written[STATISTICS] += 1
        else:
            summary.suppressed[STATISTICS] += 1
    for topic, final, latest in ((REVISION_STATISTICS, final_revisions, existing.latest_revisions),
                                 (REVIEW_STATUS, final_review_status, existing.latest_review_status)):
        for key, (partition, emit) in sorted(final.items()):
            if key[0] in conflicted or latest.get(key) == emit.value:
                summary.suppressed[topic] += 1
            else:
                _produce(producer, topic_prefix, emit, partition, None, output_format, codec)
                summary.written[topic] += 1


#: Operational gauges (contract §8): they depend on arrival order, not on the
#: ledger, so a replay that reads per-kind topics in another interleaving may
#: see other values; they never justify re-publishing a view.
GAUGES = ("pending_outcomes", "late_revisions")




def _replay_patterns(
    processors: Iterable[LedgerProcessor], existing: _Ledger, config: LedgerConfig, summary: ReplaySummary,
    producer: Producer, topic_prefix: str, output_format: str, codec: Codec, consumer: Consumer,
) -> None:
    """The pattern stage of a replay (module docstring): the replayed
    scopes' counts through one PatternStage; new candidates and changed
    rows written to their key's partition of the repartition topic."""
    stage = PatternStage(threshold=config.pattern_threshold)
    candidates = [emit for processor in processors for contribution in processor.contributions() for emit in stage.apply(contribution.value)]
    rows = stage.end_batch()
    repartition = catalogue.physical(PATTERN_REPARTITION, topic_prefix)
    partitions = len(consumer.list_topics(repartition, timeout=10).topics[repartition].partitions)
    for emit in candidates:
        if emit.value["candidate_id"] in existing.pattern_candidates:
            summary.suppressed[PATTERN_CANDIDATES] += 1
            continue
        existing.pattern_candidates.add(emit.value["candidate_id"])
        _produce(producer, topic_prefix, emit, repartition_partition(emit.key.encode("utf-8"), partitions), None, output_format, codec)
        summary.written[PATTERN_CANDIDATES] += 1
    for emit in rows:
        if existing.latest_patterns.get((emit.value["group"], emit.value["signature_key"])) == emit.value:
            summary.suppressed[SIGNATURE_PATTERNS] += 1
            continue
        _produce(producer, topic_prefix, emit, repartition_partition(emit.key.encode("utf-8"), partitions), None, output_format, codec)
        summary.written[SIGNATURE_PATTERNS] += 1


def _facts(record: dict | None) -> bytes:
    """Canonical JSON of a statistics record without its gauges."""
    if record is None:
        return b""
    return canonical_json({k: v for k, v in record.items() if k not in GAUGES})


def _produce(
    producer: Producer, topic_prefix: str, emit: Emit, partition: int, raw_key: bytes | None, output_format: str, codec: Codec
) -> None:
    value = encode_emit(emit, output_format, codec, topic_prefix)
    produce(producer, catalogue.physical(emit.topic, topic_prefix), emit_key(emit, raw_key), value, partition)


def _position(message: Any, topic_prefix: str, codec: Codec) -> int:
    """journal_position of an input record, or -1 when it does not decode."""
    try:
        _, value = codec.decode_source(catalogue.logical(message.topic(), topic_prefix), message.value())
        position = value.get("journal_position")
        return position if isinstance(position, int) else -1
    except Exception:
        return -1
