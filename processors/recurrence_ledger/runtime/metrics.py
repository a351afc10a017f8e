"""Prometheus metrics of the worker (prometheus-client), served as text on
``--metrics-port``.

| metric | type | labels | meaning |
| --- | --- | --- | --- |
| ``recurrence_ledger_records_total`` | counter | topic | input records processed (committed or not yet) |
| ``recurrence_ledger_dead_letters_total`` | counter | reason | records sent to dead-letter, by reason code (every contract §9 code from 0) |
| ``recurrence_ledger_outputs_total`` | counter | topic | output records committed |
| ``recurrence_ledger_pending_outcomes`` | gauge | | outcomes held for missing provenance (sum over this worker's scopes, contract §5) |
| ``recurrence_ledger_consumer_lag`` | gauge | topic, partition | high watermark − position, per assigned input partition |
| ``recurrence_ledger_processing_latency_seconds`` | histogram | | record timestamp → its transaction committed |
| ``recurrence_ledger_checkpoint_seconds`` | histogram | | one checkpoint: view records, changelog, offsets and commit of a transaction |
| ``recurrence_ledger_gc_pause_seconds`` | histogram | generation | one pause of CPython's cyclic garbage collector (``gc.callbacks``) |

The last two say where publish → visible latency goes when it is high
(docs/operating.md, "Latency"). Under ``worker --processes N`` every metric
has a first label ``process`` (:class:`WorkerMetrics`).
"""

from __future__ import annotations

import gc
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from recurrence_ledger.catalogue import STATISTICS
from recurrence_ledger.settings import DEFAULT_METRICS_HOST

#: The dead-letter reason codes of contract §9. Their counters exist from the
#: start at 0, so that the first dead letter of a reason is an increase that
#: Prometheus sees (a series born at 1 has no increase) — the dead-letter
#: alert of deploy/prometheus/rules.yml relies on it.
DEAD_LETTER_REASONS: tuple[str, ...] = (
    "malformed_json", "invalid_envelope", "unknown_topic", "missing_field", "unexpected_field", "wrong_type", "too_long",
    "invalid_value", "identity_conflict", "position_conflict", "too_many_pending", "already_decided", "unknown_candidate",
    "oversized_record", "key_mismatch",
    "bad_magic_byte", "unknown_schema_id", "schema_mismatch", "undecodable_avro", "oversized_output", "internal_error",
)


class ProcessLabelled:
    """A labelled metric whose first label, ``process``, is fixed: its
    ``labels(*values)`` is the metric's ``labels(process, *values)``."""

    def __init__(self, metric: Any, process: str):
        self.metric = metric
        self.process = process

    def labels(self, *values: str) -> Any:
        """The child of ``(process, *values)``."""
        return self.metric.labels(self.process, *values)


class WorkerMetrics:
    """The worker's metrics in their own registry (so tests and several
    workers in one process do not collide).

    ``process``: the worker process's number under a supervisor (``worker
    --processes N``): every metric then has a first label ``process`` with
    it, and prometheus-client's multiprocess mode (the supervisor sets
    ``PROMETHEUS_MULTIPROC_DIR``) lets the supervisor serve every process's
    metrics from one endpoint; the gauges count live processes only."""

    def __init__(self, process: str | None = None) -> None:
        self.registry = CollectorRegistry()
        self.process = process
        names = ["process"] if process is not None else []

        def make(kind: Any, name: str, help_text: str, labels: list[str] = (), **options: Any) -> Any:  # type: ignore[assignment]
            if kind is Gauge:
                options["multiprocess_mode"] = "livesum"
            metric = kind(name, help_text, [*names, *labels], registry=self.registry, **options)
            if process is None:
                return metric
            return ProcessLabelled(metric, process) if labels else metric.labels(process)

        self.records = make(Counter, "recurrence_ledger_records", "Input records processed.", ["topic"])
        self.dead_letters = make(Counter, "recurrence_ledger_dead_letters", "Records sent to dead-letter.", ["reason"])
        self.outputs = make(Counter, "recurrence_ledger_outputs", "Output records committed.", ["topic"])
        self.pending = make(Gauge, "recurrence_ledger_pending_outcomes", "Outcomes pending provenance.")
        self.lag = make(Gauge, "recurrence_ledger_consumer_lag", "High watermark minus position.", ["topic", "partition"])
        self.latency = make(
            Histogram,
            "recurrence_ledger_processing_latency_seconds",
            "Record timestamp to transaction commit.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.checkpoint = make(
            Histogram, "recurrence_ledger_checkpoint_seconds", "One checkpoint (views, changelog, offsets, commit).",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
        )
        self.gc_pause = make(
            Histogram, "recurrence_ledger_gc_pause_seconds", "One pause of the cyclic garbage collector.", ["generation"],
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
        )
        self._pending_by_scope: dict[str, int] = {}
        self._gc_started = 0.0
        self.gc_summary: dict[int, tuple[int, float, float]] = {}  # generation -> (collections, seconds, longest)
        for reason in DEAD_LETTER_REASONS:
            self.dead_letters.labels(reason)
        self._records_by_topic: dict[str, Any] = {}

    def record(self, topic: str) -> None:
        """One input record of physical ``topic`` processed (the
        ``records`` counter; its child per topic is looked up once:
        ``labels()`` costs ~2 µs a call, three times the increment)."""
        counter = self._records_by_topic.get(topic)
        if counter is None:
            counter = self._records_by_topic[topic] = self.records.labels(topic)
        counter.inc()

    def watch_gc(self) -> None:
        """Time every collection of CPython's cyclic GC into ``gc_pause``
        (a ``gc.callbacks`` entry; call once per process)."""
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            pause = time.perf_counter() - self._gc_started
            generation = info["generation"]
            self.gc_pause.labels(str(generation)).observe(pause)
            count, total, longest = self.gc_summary.get(generation, (0, 0.0, 0.0))
            self.gc_summary[generation] = (count + 1, total + pause, max(longest, pause))

    def describe_gc(self) -> str:
        """One line: collections, total and longest pause per generation."""
        return "; ".join(
            f"gen{generation} {count}× {total * 1000:.0f} ms (longest {longest * 1000:.1f} ms)"
            for generation, (count, total, longest) in sorted(self.gc_summary.items())
        ) or "none"

    def serve(self, port: int, address: str = DEFAULT_METRICS_HOST) -> None:
        """Start the HTTP text endpoint (``/metrics``) in a daemon thread."""
        start_http_server(port, addr=address, registry=self.registry)

    def statistics(self, records: list[dict]) -> None:
        """Update the pending gauge from committed statistics records."""
        for record in records:
            self._pending_by_scope[record["scope_id"]] = record["pending_outcomes"]
        self.pending.set(sum(self._pending_by_scope.values()))

    def update_lag(self, consumer: Consumer) -> None:
        """Consumer lag per partition assigned to ``consumer`` (its cached
        watermarks; a partition without them yet is skipped). A partition
        with no position yet — nothing consumed from it and no committed
        offset, as an input topic the deployment does not use — starts at
        its low watermark (auto.offset.reset=earliest), so its lag is
        high − low: 0 for an empty one."""
        for tp in consumer.position(consumer.assignment()):
            try:
                low, high = consumer.get_watermark_offsets(tp, cached=True)
            except KafkaException:
                continue
            position = tp.offset if tp.offset >= 0 else low
            if high >= 0 and position >= 0:
                self.lag.labels(tp.topic, str(tp.partition)).set(max(0, high - position))


class BatchStats:
    """What the open transaction reports to :class:`WorkerMetrics` once it
    commits: its input records' timestamps (seconds; the latency
    histogram), its outputs per logical topic, and the ScopeStatistics it
    produced (the pending-outcomes gauge). Dropped when it aborts."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget the batch (a commit, an abort, lost partitions)."""
        self.timestamps: list[float] = []
        self.outputs: dict[str, int] = {}
        self.statistics: list[dict] = []

    def output(self, topic: str, value: dict) -> None:
        """One output record of logical ``topic`` with ``value``."""
        self.outputs[topic] = self.outputs.get(topic, 0) + 1
        if topic == STATISTICS:
            self.statistics.append(value)

    def committed(self, metrics: WorkerMetrics, committed_at: float) -> None:
        """The batch committed at ``committed_at`` (wall clock, seconds):
        observe it into ``metrics``, then forget it."""
        for timestamp in self.timestamps:
            metrics.latency.observe(max(0.0, committed_at - timestamp))
        for topic, count in self.outputs.items():
            metrics.outputs.labels(topic).inc(count)
        metrics.statistics(self.statistics)
        self.clear()
