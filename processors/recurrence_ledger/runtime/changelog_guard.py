"""Where a partition's state restore starts, and when the worker must refuse
to run at all (:func:`plan_restore`, pure: unit-tested in
tests/runtime/test_changelog_guard.py).

The changelog and the input offsets are committed in the same transaction,
so they agree: input offsets committed beyond offset 0 (even at an input
partition's start, its processed records deleted since) mean the state built from those records is in the changelog. When the
changelog cannot give that state back — the topic was deleted and created
again (empty, or younger than the local store), records were deleted from
its start (``retention.ms`` on a ``compact,delete`` topic, DeleteRecords),
or a local store's checkpoint lies beyond its end or before its start — a
worker that restored what is there and carried on from the committed
offsets would silently run on lost state: every later match, observation
and statistic would differ from what the journal says. Kafka Streams treats
the same situation (``OffsetOutOfRange`` on a changelog under exactly-once:
``TaskCorruptedException``) by wiping the store and restoring from scratch
only because it resets the task's input offsets with it; here the input
offsets are the group's committed ones, so the worker refuses
(:class:`ChangelogLost`, exit :data:`CHANGELOG_LOST_EXIT`) and keeps any
local store in place: it may be the only intact copy of the state
(``recurrence-ledger worker --reseed-changelog`` writes it back).

When no input offset is committed beyond offset 0 (a new
deployment, or the consumer group deleted together with the changelog: a
deliberate rebuild from the beginning), nothing says state existed: a
local store that does not match the changelog is wiped and the changelog
restored as it is.

A consumer group whose offsets were moved by hand while the changelog is
intact is not refused: the state is whole; records read again are the same
identities with the same content, which the core ignores (contract §3),
and records skipped are the operator's choice (``replay`` completes them).
A changelog recreated with another partition count is refused before this
point, with every topic's count (``kafka_admin.check_copartitioned``).
"""

from __future__ import annotations

from dataclasses import dataclass

from recurrence_ledger.errors import RecurrenceLedgerError

#: Exit code of a worker that refuses to run because a partition's changelog
#: lost state its consumer group's committed offsets say existed
#: (docs/operating.md, "A lost or truncated changelog").
CHANGELOG_LOST_EXIT = 5


class ChangelogLost(RecurrenceLedgerError):
    """A partition's changelog lacks state its committed input offsets say
    existed (module docstring). ``partition``: the partition number."""

    def __init__(self, message: str, partition: int):
        super().__init__(message)
        self.partition = partition


@dataclass(frozen=True)
class RestorePlan:
    """How to restore one partition: from changelog offset ``start`` (None:
    its beginning), after wiping the local store when ``wipe`` (the reason)
    is set; ``done``: nothing to read (the store is at the changelog's end)."""

    start: int | None
    wipe: str | None = None
    done: bool = False


def plan_restore(*, partition: int, changelog_topic: str, group_id: str, consumed: dict[str, int], low: int, high: int,
                 local_from: int | None, kept_checkpoint: int | None = None, kept_reason: str | None = None,
                 reseed_hint: bool = False) -> RestorePlan:
    """Decide partition ``partition``'s restore (module docstring).

    - ``consumed``: input topic → the group's committed offset of this
      partition, only those beyond offset 0 (empty: no
      state can have existed);
    - ``low`` / ``high``: the changelog partition's watermarks;
    - ``local_from``: a trusted local store's restore offset (one past its
      checkpoint), None to read the whole changelog;
    - ``kept_checkpoint`` / ``kept_reason``: a local store not trusted for a
      tail restore (``kept_reason``: why, e.g. its topic id is the deleted
      topic's) but still on disk, and the changelog offset its data
      reflects (None: unknown) — wiped only when this plan says so;
    - ``reseed_hint``: the local store is a candidate for
      ``--reseed-changelog`` (named in the error).

    Raises :class:`ChangelogLost` when the changelog cannot give back the
    state ``consumed`` says existed."""
    if not consumed:
        if local_from is not None and not low <= local_from <= high:
            where = "beyond the end" if local_from > high else "before the start"
            return RestorePlan(None, f"its checkpoint (offset {local_from - 1}) is {where} of {changelog_topic}[{partition}] "
                                     f"(offsets {low}–{high}) and no input offset is committed: a new deployment's changelog",
                               done=high <= low)
        if local_from is not None:
            return RestorePlan(local_from, done=local_from == high)
        return RestorePlan(None, kept_reason, done=high <= low)  # an empty changelog: nothing to wait for
    lost: str | None = None
    if local_from is not None:
        if local_from > high:
            lost = (f"the local store reflects it up to offset {local_from - 1}, but the changelog ends at offset {high} "
                    "(deleted and created again, or truncated)")
        elif local_from < low:
            lost = f"records after the local store's checkpoint (offset {local_from - 1}) were deleted (the changelog starts at offset {low})"
        else:
            return RestorePlan(local_from, done=local_from == high)
    elif high <= low:
        lost = "it is empty" + (f" (its records up to offset {low} were deleted)" if low > 0 else " (deleted and created again?)")
    elif low > 0:
        lost = f"its first records were deleted (it starts at offset {low}): a restore would miss them"
    elif kept_checkpoint is not None and kept_checkpoint >= high:
        lost = (f"it is younger than the local store ({kept_reason}; the store reflects offset {kept_checkpoint}, "
                f"the changelog ends at {high})")
    if lost is None:
        return RestorePlan(None, kept_reason)
    offsets = ", ".join(f"{topic}[{partition}]@{offset}" for topic, offset in sorted(consumed.items()))
    kept = ("; the local --state-dir store is kept: if it is intact, `worker --reseed-changelog` writes it back to the changelog"
            if reseed_hint else "")
    raise ChangelogLost(
        f"refusing to run partition {partition}: its state changelog {changelog_topic}[{partition}] lost state — {lost} — "
        f"while consumer group {group_id} has committed input offsets {offsets}; restoring it and carrying on "
        f"would silently lose the ledger's state{kept}; or rebuild the state from the inputs: stop the workers, run "
        f"`replay --from earliest`, start them under a new --app-id (docs/operating.md, \"A lost or truncated changelog\")",
        partition)
