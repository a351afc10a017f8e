"""A batch run's caught-up check (``runtime.catch_up.drained``): a partition
is drained by its group only when nothing lies beyond the group's position,
and never while a transaction is still open on it — the last stable offset
alone would call a repartition partition caught up while another member's
last batch (or a killed member's, until the broker aborts it) may still
commit counts into it (contract §23.5)."""

from __future__ import annotations

from recurrence_ledger.runtime.catch_up import Drained, PartitionLag, drained


def test_a_position_at_the_high_watermark_is_drained():
    assert drained(committed=120, low=0, stable_end=120, end=120) is Drained.YES
    assert drained(committed=-1, low=40, stable_end=40, end=40) is Drained.YES  # nothing committed, the log starts at its end


def test_an_open_transaction_beyond_the_position_is_not_drained_though_the_stable_end_is_reached():
    # The member's committed offset is at the last stable offset: a
    # read_committed reader sees nothing more, yet a transaction holds
    # offsets 120..129 and may still commit them.
    assert drained(committed=120, low=0, stable_end=120, end=130) is Drained.OPEN_TRANSACTION
    assert drained(committed=-1, low=0, stable_end=0, end=3) is Drained.OPEN_TRANSACTION


def test_offsets_short_of_a_stable_end_must_be_read():
    # A transactional topic: the committed offset stops one short of the end
    # (the commit marker), or records of a committed transaction wait.
    assert drained(committed=129, low=0, stable_end=130, end=130) is Drained.READ
    assert drained(committed=100, low=0, stable_end=130, end=130) is Drained.READ
    assert drained(committed=-1, low=10, stable_end=130, end=130) is Drained.READ


def test_the_lag_says_a_transaction_is_still_open():
    lag = PartitionLag("p-pattern-contributions-repartition", 4, 120, 130, "held by member w2", open_transaction=True)
    assert str(lag) == ("p-pattern-contributions-repartition[4] (committed 120, end 130, lag ≤ 10; a transaction still open on it; "
                        "held by member w2)")
    assert str(PartitionLag("p-outcomes", 0, -1, 7, "not assigned")) == "p-outcomes[0] (committed none, end 7, lag ≤ 7; not assigned)"
