"""The view follower's review metrics (contract §18): the time-to-decision
buckets, ``decided_at`` as seconds, and the methods that set the review
gauges and observe the time to decision
(``recurrence_ledger.read.follower.FollowerMetrics``, whose module docstring
lists the metrics)."""

from __future__ import annotations

import datetime
import logging
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from recurrence_ledger.ledger.models import RFC3339_UTC

if TYPE_CHECKING:
    from prometheus_client import Gauge, Histogram

    from recurrence_ledger.read.history import ReadModels
    from recurrence_ledger.read.records import AppliedCounts

log = logging.getLogger("recurrence_ledger.follower")

#: Buckets of the time to decision (seconds): an hour to a month.
DECISION_BUCKETS_S = (3600, 4 * 3600, 12 * 3600, 86400, 2 * 86400, 4 * 86400, 7 * 86400, 14 * 86400, 30 * 86400)

_DECIDED_AT = re.compile(RFC3339_UTC)


def rfc3339_seconds(timestamp: str) -> float:
    """Seconds since the epoch of an RFC 3339 UTC timestamp as contract §18's
    ``decided_at`` takes it (``2025-01-02T03:04:05.123Z``; ``t``/``T``, a
    fraction of up to 9 digits, ``Z``, ``z`` or ``+00:00``:
    ``ledger.models.RFC3339_UTC``). Raises ValueError for anything else,
    a date or time that does not exist included."""
    found = _DECIDED_AT.fullmatch(timestamp)
    if found is None:
        raise ValueError(f"not an RFC 3339 UTC timestamp: {timestamp!r}")
    *parts, fraction, _zone = found.groups()
    whole = datetime.datetime(*(int(part) for part in parts), tzinfo=datetime.timezone.utc).timestamp()
    digits = fraction[1:] if fraction else ""
    return whole + (int(digits) / 10 ** len(digits) if digits else 0.0)


class ReviewMetricsMixin:
    """The review half of ``FollowerMetrics``: it sets ``namespace``,
    ``reviews``, ``repairs``, ``oldest_open`` and ``decision``."""

    namespace: str
    reviews: Gauge
    repairs: Gauge
    oldest_open: Gauge
    decision: Histogram

    def show_reviews(self, models: ReadModels) -> None:
        """Set the review gauges from the read models (one MULTI/EXEC).
        Raises redis errors."""
        gauges = models.review_gauges()
        for status, count in gauges.statuses.items():
            self.reviews.labels(self.namespace, status).set(count)
        for status, count in gauges.repairs.items():
            self.repairs.labels(self.namespace, status).set(count)
        self.oldest_open.labels(self.namespace).set(math.nan if gauges.oldest_open_ms is None else gauges.oldest_open_ms / 1000)

    def decided(self, counts: AppliedCounts, read_again: Mapping[tuple[str, int], int] | None = None) -> None:
        """Observe the time to decision of each candidate ``counts`` filed
        as decided for the first time (never below 0: decided_at is the
        reviewer's clock; one that does not parse is logged and left out),
        except one filed by a record below ``read_again``'s offset for its
        (logical topic, partition): a partition read again after Redis lost
        the view files its decisions again, observed when first read."""
        for topic, partition, offset, timestamp_ms, decided_at in counts.decisions:
            if read_again and offset < read_again.get((topic, partition), 0):
                continue
            try:
                seconds = rfc3339_seconds(decided_at) - timestamp_ms / 1000
            except ValueError as error:
                log.warning("time to decision not measured: %s", error)
                continue
            self.decision.labels(self.namespace).observe(max(0.0, seconds))
