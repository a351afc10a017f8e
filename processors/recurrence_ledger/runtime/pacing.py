"""When the worker commits its open transaction: a commit interval that
adapts to load (docs/kafka.md, "Commits and latency").

``commit_interval_ms`` (``RL_COMMIT_INTERVAL_MS``) and ``max_batch``
(``RL_MAX_BATCH``) stay the upper bounds: a transaction is committed once it
is ``commit_interval_ms`` old (checked after each consumed chunk of at most
``max_batch`` records, as before). Below that bound the worker commits as
soon as the input is drained — the last poll returned fewer records than
it asked for, so nothing more is waiting in the consumer — and the
transaction is at least as old as a commit takes (:attr:`Pacer.floor`:
the smoothed duration of the last commits, views and changelog included):

- idle or light load: each transaction closes a few milliseconds after its
  records, so publish → visible is about one commit, not half an interval;
  committing no more often than a commit lasts keeps commits at most about
  half of the loop's time;
- under load the input is never drained, so transactions grow to the
  interval and to whole ``max_batch`` chunks (fewer commits, fewer view and
  changelog records per event: the backlog drain's throughput is
  unchanged); in between, a commit that takes longer lets more records
  queue behind it, and the next transaction is larger by itself.

Kafka Streams commits every ``commit.interval.ms`` (100 ms under
exactly-once) whatever the load, quixstreams every ``commit_interval``
(5 s by default) or ``commit_every`` records; neither shortens a
transaction when the input runs dry. The drained-input rule is the
consumer-side counterpart of librdkafka's ``linger.ms`` (send when the
batch is full or the linger is over, whichever is first).
"""

from __future__ import annotations

#: Weight of the newest commit duration in :attr:`Pacer.floor` (an
#: exponentially weighted mean: a slow commit raises the floor at once by a
#: quarter of the difference, and is forgotten over about ten commits).
SMOOTHING = 0.25


class Pacer:
    """The commit policy of one worker loop (module docstring).

    ``interval_s``: the upper bound on a transaction's age (seconds,
    ``commit_interval_ms`` / 1000); ``max_batch``: records asked for per
    poll (``max_batch``). Times are ``time.monotonic()`` seconds."""

    def __init__(self, interval_s: float, max_batch: int):
        self.interval_s = interval_s
        self.max_batch = max_batch
        self.floor = 0.0  #: smoothed seconds per commit: the least age of a transaction closed early
        self.commits = 0

    def due(self, age_s: float, polled: int) -> bool:
        """Whether to commit a transaction ``age_s`` old after a poll that
        returned ``polled`` records (0 when it timed out)."""
        if age_s >= self.interval_s:
            return True
        return polled < self.max_batch and age_s >= self.floor

    def committed(self, seconds: float) -> None:
        """A commit took ``seconds`` (wall time of ``LedgerWorker._commit``)."""
        self.floor = seconds if self.commits == 0 else self.floor + SMOOTHING * (seconds - self.floor)
        self.floor = min(self.floor, self.interval_s)
        self.commits += 1
