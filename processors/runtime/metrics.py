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
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

#: The dead-letter reason codes of contract §9. Their counters exist from the
#: start at 0, so that the first dead letter of a reason is an increase that
#: Prometheus sees (a series born at 1 has no increase) — the dead-letter
#: alert of deploy/prometheus/rules.yml relies on it.
DEAD_LETTER_REASONS: tuple[str, ...] = (
    "malformed_json", "invalid_envelope", "unknown_topic", "missing_field", "unexpected_field", "wrong_type", "too_long",
    "invalid_value", "identity_conflict", "position_conflict", "too_many_pending", "oversized_record", "key_mismatch",
    "bad_magic_byte", "unknown_schema_id", "schema_mismatch", "undecodable_avro", "oversized_output", "internal_error",
)


class WorkerMetrics:
    """The worker's metrics in their own registry (so tests and several
    workers in one process do not collide)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.records = Counter("recurrence_ledger_records", "Input records processed.", ["topic"], registry=self.registry)
        self.dead_letters = Counter("recurrence_ledger_dead_letters", "Records sent to dead-letter.", ["reason"], registry=self.registry)
        self.outputs = Counter("recurrence_ledger_outputs", "Output records committed.", ["topic"], registry=self.registry)
        self.pending = Gauge("recurrence_ledger_pending_outcomes", "Outcomes pending provenance.", registry=self.registry)
        self.lag = Gauge("recurrence_ledger_consumer_lag", "High watermark minus position.", ["topic", "partition"], registry=self.registry)
        self.latency = Histogram(
            "recurrence_ledger_processing_latency_seconds",
            "Record timestamp to transaction commit.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self._pending_by_scope: dict[str, int] = {}
        for reason in DEAD_LETTER_REASONS:
            self.dead_letters.labels(reason)

    def serve(self, port: int, address: str = "127.0.0.1") -> None:
        """Start the HTTP text endpoint (``/metrics``) in a daemon thread."""
        start_http_server(port, addr=address, registry=self.registry)

    def statistics(self, records: list[dict]) -> None:
        """Update the pending gauge from committed statistics records."""
        for record in records:
            self._pending_by_scope[record["scope_id"]] = record["pending_outcomes"]
        self.pending.set(sum(self._pending_by_scope.values()))
