"""One assigned partition of a worker (:class:`Task`): its state store and
processor, the offsets to commit, and the records applied since the last
checkpoint — what a rollback re-applies. A :class:`PatternTask` is one
partition of the second stage (contract §23.5), driven the same way.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable
from typing import Any

from confluent_kafka import Message

from recurrence_ledger.ledger.patterns import PatternStage
from recurrence_ledger.ledger.processor import LedgerConfig, LedgerProcessor
from recurrence_ledger.ledger.state import (
    HoldoutPolicyChanged, UnicodeVersionChanged, describe_holdout_policy, holdout_policy, pin_holdout_policy, pin_unicode_version,
)
from recurrence_ledger.store.base import PartitionStore
from recurrence_ledger.store.memory import ChangelogStore

log = logging.getLogger("recurrence_ledger.worker")


class Task:
    """One assigned partition: its store, processor, pending offsets, and
    the records applied since the last checkpoint (to re-apply them after
    a rollback). ``ready`` is False until its store is restored.
    ``store``: the partition's store (default: a new in-memory
    ChangelogStore; ``store.rocksdb.RocksStore`` with ``--state-dir``)."""

    def __init__(self, partition: int, config: LedgerConfig, store: PartitionStore | None = None):
        self.partition = partition
        self.store = ChangelogStore() if store is None else store
        self.processor: Any = self._processor(config)
        self.offsets: dict[str, int] = {}  # physical input topic → next offset to commit
        self.applied: list[Message] = []
        self.ready = False

    def _processor(self, config: LedgerConfig) -> Any:
        """The partition's processor over :attr:`store`: the ledger (the
        scope stage)."""
        return LedgerProcessor(self.store, config)

    def rollback(self, reapply: Callable[[Message], Any]) -> int:
        """Undo the record that just failed: return the store and the
        processor to the rollback point (the last checkpoint, or the last
        rollback), apply the records applied since then again with
        ``reapply`` (their outputs are already produced and must be
        discarded), and make that state the new rollback point — so each
        record of a batch is re-applied at most once however many fail.
        Returns the number of records re-applied."""
        self.store.rollback()
        self.processor.rolled_back()
        for message in self.applied:
            reapply(message)
        reapplied = len(self.applied)
        self.mark()
        return reapplied

    def mark(self) -> None:
        """Make the current state the rollback point (pending changes and
        view marks kept for the next checkpoint)."""
        self.store.mark()
        self.processor.mark()
        self.applied.clear()

    def checkpointed(self, changelog_offset: int | None = None) -> None:
        """The checkpoint committed this task's changes (the last of them at
        ``changelog_offset`` on the changelog) and offsets. Raises
        store.StoreError when the store cannot record them."""
        self.store.reflects(self.offsets)
        self.store.flushed(changelog_offset)
        self.processor.mark()
        self.applied.clear()
        self.offsets.clear()

    def pin_unicode(self, accept_change: bool, changelog_topic: str) -> None:
        """contract §10: check the Unicode version recorded in the restored
        state against this runtime's, and record it (a new partition, or one
        restored from a changelog written before the pin existed). Raises
        UnicodeVersionChanged naming the partition of ``changelog_topic`` —
        the worker calls it from its main loop, so it stops before it
        processes anything — unless ``accept_change``.

        Then the state's layout is decided, while the store holds only what
        the changelog restored (``LedgerState.legacy_positions``: the
        partition records state format 3; one restored from a changelog
        written before formats keeps reading its old position records):
        StateFormatError for a format newer than this code's, also before
        anything is processed (docs/upgrading.md, "State format 3")."""
        try:
            previous = pin_unicode_version(self.store, accept_change)
        except UnicodeVersionChanged as error:
            raise UnicodeVersionChanged(error.recorded, error.runtime, f"partition {self.partition} of {changelog_topic}") from None
        self.processor.state.legacy_positions()
        if previous is not None and previous != unicodedata.unidata_version:
            log.warning(
                "partition %d: state built with Unicode %s, this runtime has Unicode %s: accepted "
                "(--accept-unicode-change), recording Unicode %s", self.partition, previous,
                unicodedata.unidata_version, unicodedata.unidata_version,
            )


    def pin_holdout(self, accept_change: bool, changelog_topic: str) -> None:
        """contract §21.5: check the holdout policy recorded in the
        restored state against this worker's, and record it (a new
        partition, or one restored from a changelog written before the
        pin). Raises HoldoutPolicyChanged naming the partition of
        ``changelog_topic`` — from the main loop, before anything is
        processed — unless ``accept_change``."""
        config = self.processor.config
        configured = holdout_policy(config.holdout_salt, config.holdout_rate)
        try:
            previous = pin_holdout_policy(self.store, configured, accept_change)
        except HoldoutPolicyChanged as error:
            raise HoldoutPolicyChanged(error.recorded, error.configured, f"partition {self.partition} of {changelog_topic}") from None
        if previous is not None and previous != configured:
            log.warning("partition %d: state built with %s, this worker has %s: accepted (--accept-holdout-change), recording it",
                        self.partition, describe_holdout_policy(previous), describe_holdout_policy(configured))


class PatternTask(Task):
    """One assigned partition of the pattern stage (contract §23.5): a
    ``PatternStage`` over its own store, changelogged to the pattern
    changelog; input: the same partition of the repartition topic. Its
    records hold only keys the scope stage normalized, so no Unicode pin."""

    def _processor(self, config: LedgerConfig) -> Any:
        return PatternStage(self.store, config.pattern_threshold)

    def pin_unicode(self, accept_change: bool, changelog_topic: str) -> None:
        """Nothing to pin (class docstring)."""

    def pin_holdout(self, accept_change: bool, changelog_topic: str) -> None:
        """Nothing to pin: the pattern stage assigns no arm."""
