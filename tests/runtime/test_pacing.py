"""The worker's commit pacing (``runtime.pacing.Pacer``): the interval and
max_batch stay upper bounds; below them a transaction closes once the
input is drained and it is at least as old as a commit takes."""

from __future__ import annotations

import pytest

from recurrence_ledger.runtime.pacing import SMOOTHING, Pacer


def test_the_interval_is_the_upper_bound_whatever_the_input():
    pacer = Pacer(0.1, 2_000)
    pacer.committed(0.5)  # a slow commit: the floor is capped at the interval
    assert pacer.floor == 0.1
    assert pacer.due(0.1, 2_000) and pacer.due(0.25, 2_000)
    assert not pacer.due(0.099, 2_000)  # a full chunk: the input is not drained


def test_a_drained_input_commits_once_the_transaction_is_as_old_as_a_commit():
    pacer = Pacer(0.1, 2_000)
    assert pacer.due(0.0, 0)  # no commit measured yet: at once
    pacer.committed(0.008)
    assert pacer.floor == 0.008
    assert not pacer.due(0.005, 3) and not pacer.due(0.007, 0)
    assert pacer.due(0.008, 1_999) and pacer.due(0.02, 0)


def test_the_floor_follows_the_commits_smoothly():
    pacer = Pacer(0.1, 100)
    pacer.committed(0.004)
    pacer.committed(0.012)
    assert pacer.floor == pytest.approx(0.006)  # 0.004 + 0.25 × 0.008
    assert pacer.floor == pytest.approx(0.004 + SMOOTHING * (0.012 - 0.004))
    pacer.committed(0.006)
    assert pacer.floor == pytest.approx(0.006)  # 0.006 + 0.25 × 0
