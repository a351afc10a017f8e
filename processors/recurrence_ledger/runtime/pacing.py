"""When the worker commits its open transaction: a commit interval that
adapts to load (docs/kafka.md, "Commits and latency").

``commit_interval_ms`` (``RL_COMMIT_INTERVAL_MS``) and ``max_batch``
(``RL_MAX_BATCH``) stay the upper bounds: a transaction is committed once it
is ``commit_interval_ms`` old (checked after each consumed chunk of at most
``max_batch`` records, as before). Below that bound the worker commits as
soon as the input is drained — the last poll returned fewer records than
it asked for, so nothing more is waiting in the consumer — and the
transaction is at least :attr:`Pacer.floor` old: a tenth of the interval
(10 ms by default), or, when more, the loop's own CPU time per commit
(smoothed; views, their encoding, changelog records, produce calls — not
the time spent waiting for the broker):

- idle or light load: a transaction closes ~10 ms after its first record
  (plus the commit itself), not up to a whole interval later; while a
  commit waits for the broker, the records that arrive queue behind it
  and go into the next transaction, so a slow broker gives larger
  transactions, not more of them;
- a commit that costs the loop more CPU raises the floor, so commits take
  at most about half of the loop's CPU; the tenth of the interval bounds
  the commit rate (≤ 100 transactions/s by default) and so the broker's
  work for markers and offsets;
- under load the input is never drained, so transactions grow to the
  interval and to whole ``max_batch`` chunks (fewer commits, fewer view and
  changelog records per event: the backlog drain's throughput is
  unchanged).

Kafka Streams commits every ``commit.interval.ms`` (100 ms under
exactly-once) whatever the load, quixstreams every ``commit_interval``
(5 s by default) or ``commit_every`` records; neither shortens a
transaction when the input runs dry. The drained-input rule is the
consumer-side counterpart of librdkafka's ``linger.ms`` (send when the
batch is full or the linger is over, whichever is first).
"""

from __future__ import annotations

#: Weight of the newest commit's CPU time in :attr:`Pacer.floor` (an
#: exponentially weighted mean: a costly commit raises the floor at once by
#: a quarter of the difference, and is forgotten over about ten commits).
SMOOTHING = 0.25
#: The least age of a transaction closed early, as a fraction of the interval.
MIN_AGE_FRACTION = 0.1


class Pacer:
    """The commit policy of one worker loop (module docstring).

    ``interval_s``: the upper bound on a transaction's age (seconds,
    ``commit_interval_ms`` / 1000); ``max_batch``: records asked for per
    poll (``max_batch``). Ages are ``time.monotonic()`` seconds."""

    def __init__(self, interval_s: float, max_batch: int):
        self.interval_s = interval_s
        self.max_batch = max_batch
        self.min_age_s = interval_s * MIN_AGE_FRACTION
        self.commit_cpu_s = 0.0  #: smoothed CPU seconds of the loop per commit
        self.commits = 0

    @property
    def floor(self) -> float:
        """The least age (seconds) of a transaction committed before the
        interval: the larger of a tenth of the interval and the smoothed
        CPU time per commit, at most the interval."""
        return min(self.interval_s, max(self.min_age_s, self.commit_cpu_s))

    def due(self, age_s: float, polled: int) -> bool:
        """Whether to commit a transaction ``age_s`` old after a poll that
        returned ``polled`` records (0 when it timed out)."""
        if age_s >= self.interval_s:
            return True
        return polled < self.max_batch and age_s >= self.floor

    def committed(self, cpu_s: float) -> None:
        """A commit took ``cpu_s`` CPU seconds of the loop's thread
        (``time.thread_time`` around ``LedgerWorker._commit``)."""
        self.commit_cpu_s = cpu_s if self.commits == 0 else self.commit_cpu_s + SMOOTHING * (cpu_s - self.commit_cpu_s)
        self.commits += 1
