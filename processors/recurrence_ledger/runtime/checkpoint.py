"""Checkpointing: one Kafka transaction carrying a batch's outputs, its state
changes and its consumed offsets (docs/architecture.md, "The worker").

The worker produces a batch's output records through :meth:`Checkpoint.
produce` (the first one begins the transaction); :meth:`Checkpoint.commit`
then produces the changelog records, sends the consumed offsets to the
transaction with the consumer's group metadata (KIP-447,
``send_offsets_to_transaction``) and commits it. Either everything of the
batch becomes visible to ``read_committed`` readers, or nothing does.

Errors follow the transactional producer's classes (librdkafka's
transactional API, as confluent-kafka raises them as ``KafkaException``
carrying a ``KafkaError``):

- *retriable* (``KafkaError.retriable()``, e.g. the coordinator is moving or
  the broker restarting): the same call is retried with a growing pause
  (0.2 s × attempt, at most 2 s) for up to ``retry_budget_s``;
- *abortable* (``txn_requires_abort()``), any other non-fatal error, or a
  retriable one that outlived the budget: the transaction is aborted and
  :class:`CheckpointAborted` raised — the caller rewinds (state from the
  changelog, consumer positions to the committed offsets) and processes the
  batch again;
- *fatal* (``fatal()``: the producer was fenced — by the broker after a
  stall outlived ``transaction.timeout.ms``, or by a newer instance with the
  same transactional id): the producer can never be used again, so
  :class:`RestartRequired` is raised and the process exits with
  :data:`RESTART_EXIT` for its supervisor to restart it.

An ``abort_transaction`` that fails retriably (it timed out while the broker
restarts: librdkafka lets it be called again) is retried like the other
calls; one that still fails, or fails otherwise, raises
:class:`RestartRequired` too (the broker aborts the transaction itself at
``transaction.timeout.ms``, or the restarted worker fences it at once). So
no transactional failure ends the worker with the generic exit code 1. A
commit that blocks longer than :data:`COMMIT_WATCHDOG_S` ends the process
the same way, and so does one transactional call still blocked
:data:`CALL_GRACE_S` after its own timeout (:meth:`Checkpoint.watch`).

The module talks to the producer only through confluent-kafka's Producer
methods, so its error paths are unit-tested with a producer that raises
scripted errors (tests/runtime/test_checkpoint.py); the worker's fault tests
cover it against the real broker.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from confluent_kafka import KafkaException, TopicPartition

from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.runtime.faults import RuntimeHooks

#: Exit code of a worker that stops so that its supervisor restarts it,
#: because one of its Kafka clients cannot recover by itself (a commit
#: blocked past its timeout; a consumer in librdkafka's fatal state). Its
#: open transaction is aborted by the broker or fenced by the restarted
#: worker, so outputs stay exactly once (tests/e2e/test_faults.py).
RESTART_EXIT = 3
from recurrence_ledger.kafka.kafka_io import produce

log = logging.getLogger("recurrence_ledger.worker")

#: Seconds a retriable transactional error is retried before the batch is aborted.
RETRY_BUDGET_S = 60.0
#: Seconds each transactional call may block (librdkafka's timeout argument).
CALL_TIMEOUT_S = 10.0
#: Seconds an abort may block.
ABORT_TIMEOUT_S = 30.0
#: Seconds one commit may block before the process exits for a restart.
COMMIT_WATCHDOG_S = 120.0
#: Seconds past its own timeout one transactional call may block before the
#: process exits for a restart: after a broker restart, librdkafka's
#: send_offsets_to_transaction / commit_transaction / abort_transaction can
#: block well beyond their timeout (seen in the broker-restart test, every
#: few runs; librdkafka issues 3013 and 3779 report the same).
CALL_GRACE_S = 15.0
#: Records produced between two ``poll(0)`` of the producer: each costs
#: about as much as a produce (0.3–0.8 µs, BENCHMARKS.md "Kafka worker, per
#: stage"); a transactional producer has no delivery callbacks of ours to
#: serve, only its error and statistics events, and librdkafka's queue is
#: drained by its own threads.
SERVE_EVERY = 256


class CheckpointAborted(RecurrenceLedgerError):
    """The transaction was aborted (its error is ``cause``): nothing of the
    batch is visible; the caller must rewind and process it again."""

    def __init__(self, cause: KafkaException):
        super().__init__(f"transaction not committed ({cause.args[0]})")
        self.cause = cause


class RestartRequired(RecurrenceLedgerError):
    """The transactional producer cannot go on in this process (a fatal
    error, an abort that failed): the worker stops with ``exit_code``
    (:data:`RESTART_EXIT`) so that its supervisor restarts it; its open
    transaction is aborted by the broker or fenced by the restarted
    worker, so outputs stay exactly once."""

    exit_code = RESTART_EXIT


class ChangelogUntracked(RecurrenceLedgerError):
    """A committed transaction's changelog records lack delivery reports, so
    the changelog offset a local store would record is unknown: the worker
    stops (a restart restores the tail from the store's last checkpoint)."""


class Checkpoint:
    """The open transaction of one worker (module docstring).

    ``producer``: a transactional confluent-kafka Producer whose
    ``init_transactions`` was called. ``group_metadata``: returns the
    consumer's group metadata (``Consumer.consumer_group_metadata``).
    ``sleep`` / ``clock``: injectable for tests.
    """

    def __init__(
        self,
        producer: Any,
        group_metadata: Callable[[], Any],
        hooks: RuntimeHooks | None = None,
        retry_budget_s: float = RETRY_BUDGET_S,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        track_changelog: bool = False,
    ):
        self.producer = producer
        self.group_metadata = group_metadata
        self.hooks = hooks or RuntimeHooks()
        self.retry_budget_s = retry_budget_s
        self.sleep = sleep
        self.clock = clock
        self.in_transaction = False
        self.produced = 0  #: records produced in the open transaction
        self.committing_since: float | None = None  #: ``clock()`` when the running commit began
        self.call_deadline: float | None = None  #: ``clock()`` past which the running transactional call is hung
        #: Track the changelog records' offsets (a store with a local
        #: checkpoint needs them): ``commit`` then returns them.
        self.track_changelog = track_changelog
        self._delivered: dict[tuple[str, int], int] = {}  # (changelog topic, partition) → last offset delivered
        self._undelivered = 0

    def watch(self, limit_s: float = COMMIT_WATCHDOG_S) -> None:
        """Exit the process (:data:`RESTART_EXIT`) as soon as :meth:`overdue`
        says so (checked every second, in a daemon thread). The open
        transaction is aborted by the broker, so a supervisor's restart
        keeps outputs exactly once (tests/e2e/test_faults.py)."""

        def watchdog() -> None:
            while True:
                time.sleep(1.0)
                why = self.overdue(self.clock(), limit_s)
                if why is not None:
                    log.critical("%s: exiting for a restart", why)
                    os._exit(RESTART_EXIT)

        threading.Thread(target=watchdog, name="commit-watchdog", daemon=True).start()

    def overdue(self, now: float, limit_s: float = COMMIT_WATCHDOG_S) -> str | None:
        """Why this process must exit for a restart at ``now`` (a ``clock()``
        reading), or None: one commit has been blocked for more than
        ``limit_s`` seconds, or one transactional call is still blocked
        :data:`CALL_GRACE_S` after its own timeout (librdkafka did not
        return: waiting longer only delays the restart that recovers)."""
        call_deadline, since = self.call_deadline, self.committing_since
        if call_deadline is not None and now > call_deadline:
            return f"a transactional call has been blocked {CALL_GRACE_S:.0f} s past its timeout"
        if since is not None and now - since > limit_s:
            return f"a transaction commit has been blocked for {limit_s:.0f} s"
        return None

    def produce(self, topic: str, key: bytes | None, value: bytes | None, partition: int, on_delivery: Callable | None = None) -> None:
        """Produce one record to ``topic[partition]`` in the open
        transaction, beginning one when none is open (``on_delivery``: the
        delivery report callback, if any). The producer's events are served
        (``poll(0)``) at the first record of a transaction and every
        :data:`SERVE_EVERY` records after it (and by the commit).

        A transaction can fail before its commit (librdkafka failed to add a
        partition to it, e.g. of a topic deleted meanwhile): the producer
        then refuses every record (``_STATE``, "Erroneous state"). That is
        handled as a failed commit is: the transaction is aborted and
        CheckpointAborted raised (the caller rewinds), or RestartRequired
        for a fatal error."""
        if not self.in_transaction:
            self._begin()
            self.produced = 0
        try:
            produce(self.producer, topic, key, value, partition, on_delivery, serve=self.produced % SERVE_EVERY == 0)
        except KafkaException as error:
            self._failed(error, "the transaction failed before its commit")
        self.produced += 1

    def commit(self, changelog: Iterable[tuple[str, int, bytes, bytes | None]], offsets: list[TopicPartition]) -> dict[tuple[str, int], int]:
        """Produce the ``changelog`` records ``(topic, partition, key,
        value)``, send ``offsets`` (the next offset to consume per input
        partition) and commit. A no-op without an open transaction and
        nothing to write. With ``track_changelog``, returns the offset of
        the last changelog record committed per (changelog topic,
        partition) (from the delivery reports; ``{}`` otherwise).

        Raises CheckpointAborted after aborting the transaction, the
        KafkaException of a fatal error (module docstring), or
        ChangelogUntracked when a changelog record's delivery report is
        missing after the commit (the transaction is committed; a local
        checkpoint must not be written)."""
        self.committing_since = self.clock()
        self._delivered, self._undelivered = {}, 0
        try:
            self._commit(changelog, offsets)
        finally:
            self.committing_since = None
        if not self.track_changelog:
            return {}
        self.producer.poll(0)  # delivery reports not served by commit_transaction itself
        if self._undelivered:
            self.producer.flush(CALL_TIMEOUT_S)  # serves the remaining delivery reports
        if self._undelivered:
            raise ChangelogUntracked(f"{self._undelivered} changelog records committed without a delivery report")
        return dict(self._delivered)

    def _delivery(self, error: Any, message: Any) -> None:
        if error is None:
            self._undelivered -= 1
            where, offset = (message.topic(), message.partition()), message.offset()
            if offset > self._delivered.get(where, -1):
                self._delivered[where] = offset

    def _commit(self, changelog: Iterable[tuple[str, int, bytes, bytes | None]], offsets: list[TopicPartition]) -> None:
        for topic, partition, key, value in changelog:
            if self.track_changelog:
                self._undelivered += 1
            self.produce(topic, key, value, partition, self._delivery if self.track_changelog else None)
        if not self.in_transaction:
            if offsets:  # offsets alone (e.g. only records of revoked partitions): still a transaction
                self._begin()
            else:
                return
        try:
            if offsets:
                self._retrying(lambda timeout: self.producer.send_offsets_to_transaction(offsets, self.group_metadata(), timeout), CALL_TIMEOUT_S)
            self.hooks.at("offsets_sent")
            self._retrying(self.producer.commit_transaction, CALL_TIMEOUT_S)
        except KafkaException as error:
            self._failed(error, "transaction not committed")
        self.in_transaction = False
        self.hooks.at("committed")

    def _failed(self, error: KafkaException, why: str) -> NoReturn:
        """The open transaction failed with ``error``: RestartRequired when
        the producer failed fatally, else the transaction is aborted
        (``why``, logged with the error) and CheckpointAborted raised."""
        if error.args[0].fatal():
            raise RestartRequired(f"the transactional producer failed fatally ({error.args[0]}): exiting for a restart") from error
        self.abort(f"{why} ({error.args[0]})")
        raise CheckpointAborted(error) from error

    def init_transactions(self) -> None:
        """``init_transactions`` (fences this transactional id's previous
        incarnation), retrying retriable errors (a broker still restarting)
        for up to ``retry_budget_s``; RestartRequired when it fails."""
        try:
            self._retrying(self.producer.init_transactions, CALL_TIMEOUT_S)
        except KafkaException as error:
            raise RestartRequired(f"cannot initialise the transactional producer ({error.args[0]}): exiting for a restart") from error

    def _begin(self) -> None:
        try:
            self.producer.begin_transaction()
        except KafkaException as error:  # the producer is in its fatal state (begin has no retriable errors)
            raise RestartRequired(f"cannot begin a transaction ({error.args[0]}): exiting for a restart") from error
        self.in_transaction = True

    def abort(self, why: str) -> None:
        """Abort the open transaction (if any), retrying a retriable failure
        (a timeout while the broker restarts) for up to ``retry_budget_s``.
        Raises RestartRequired when the abort fails for good."""
        if not self.in_transaction:
            return
        log.warning("%s: aborting the transaction", why)
        self.in_transaction = False
        try:
            self._retrying(self.producer.abort_transaction, ABORT_TIMEOUT_S)
        except KafkaException as error:
            raise RestartRequired(f"aborting the open transaction failed ({error.args[0]}): exiting for a restart; "
                                  "the broker aborts it at transaction.timeout.ms, or the restarted worker at once") from error

    def _retrying(self, operation: Callable[[float], Any], timeout_s: float) -> None:
        """Run a transactional call, ``operation(timeout_s)`` (its own
        timeout in seconds), retrying retriable errors for up to
        ``retry_budget_s``; then re-raise. While a call runs,
        :attr:`call_deadline` is set for the watchdog (:meth:`overdue`)."""
        deadline = self.clock() + self.retry_budget_s
        attempt = 0
        while True:
            self.call_deadline = self.clock() + timeout_s + CALL_GRACE_S
            try:
                operation(timeout_s)
                return
            except KafkaException as error:
                attempt += 1
                if not error.args[0].retriable() or self.clock() >= deadline:
                    raise
                log.warning("retriable transaction error (%s): retrying", error.args[0])
            finally:
                self.call_deadline = None
            self.sleep(min(0.2 * attempt, 2.0))
