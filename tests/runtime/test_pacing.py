"""The worker's commit pacing (``runtime.pacing.Pacer``): the interval and
max_batch stay upper bounds; below them a transaction closes once the
input is drained and it is at least a tenth of the interval old, or as old
as a commit costs the loop in CPU, when that is more."""

from __future__ import annotations

import pytest

from recurrence_ledger.runtime.pacing import Pacer


def test_the_interval_is_the_upper_bound_whatever_the_input():
    pacer = Pacer(0.1, 2_000)
    pacer.committed(0.5)  # a commit costing more CPU than the interval: the floor is capped at it
    assert pacer.floor == 0.1
    assert pacer.due(0.1, 2_000) and pacer.due(0.25, 2_000)
    assert not pacer.due(0.099, 2_000)  # a full chunk: the input is not drained


def test_a_drained_input_commits_once_the_transaction_is_a_tenth_of_the_interval_old():
    pacer = Pacer(0.1, 2_000)
    assert pacer.floor == pytest.approx(0.01)  # nothing measured yet: 100 ms / 10
    assert not pacer.due(0.0, 0) and not pacer.due(0.009, 3)
    assert pacer.due(0.0101, 0) and pacer.due(0.05, 1_999)
    pacer.committed(0.002)  # a commit cheaper than the tenth: the tenth stays the floor
    assert pacer.floor == pytest.approx(0.01)


def test_commits_costly_in_cpu_raise_the_floor_smoothly():
    pacer = Pacer(0.1, 100)
    pacer.committed(0.020)
    assert pacer.floor == pytest.approx(0.020)
    assert not pacer.due(0.015, 0) and pacer.due(0.020, 0)
    pacer.committed(0.060)
    assert pacer.floor == pytest.approx(0.030)  # 0.020 + 0.25 × (0.060 − 0.020)
    pacer.committed(0.030)
    assert pacer.floor == pytest.approx(0.030)
