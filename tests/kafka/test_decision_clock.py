"""The ``decided_at`` of the decisions a process makes
(``recurrence_ledger.kafka.review.DecisionClock``): RFC 3339 UTC the
ReviewDecision model takes, and strictly later each time, across threads —
so two decisions a reviewer sends at once never share a ``decision_id``
(which would make the second one an ``identity_conflict`` under the first
one's id instead of ``already_decided``, contract §18)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from recurrence_ledger.kafka.review import DecisionClock, new_decision
from recurrence_ledger.ledger.models import ReviewDecision
from recurrence_ledger.read.review_metrics import rfc3339_seconds

CANDIDATE = {"candidate_id": "sha256:" + "a" * 64, "scope_id": "s", "artifact_ref": {"family": "experience", "artifact_id": "E", "revision": 1}}


def test_the_clock_gives_now_in_microseconds_and_never_the_same_value_twice_across_threads():
    clock = DecisionClock()
    before = time.time()
    with ThreadPoolExecutor(8) as pool:
        stamps = list(pool.map(lambda _: clock.now(), range(8_000)))
    after = time.time()
    assert len(set(stamps)) == len(stamps)
    seconds = sorted(rfc3339_seconds(stamp) for stamp in stamps)
    assert before - 1e-6 <= seconds[0] and seconds[-1] <= after + 0.01  # 8,000 microsecond steps at most ahead of the clock
    assert all(len(stamp) == len("2025-01-02T03:04:05.678901Z") and stamp.endswith("Z") for stamp in stamps)


def test_two_decisions_made_at_once_by_one_reviewer_have_different_ids():
    approve = new_decision(CANDIDATE, None, reviewer="ana", decision="approved", reason=None, fix_revision=None, journal_position=3)
    reject = new_decision(CANDIDATE, None, reviewer="ana", decision="rejected", reason="no", fix_revision=None, journal_position=3)
    assert approve["decision_id"] != reject["decision_id"] and approve["decided_at"] < reject["decided_at"]
    assert ReviewDecision.model_validate(reject).decided_at == reject["decided_at"]
