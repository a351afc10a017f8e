"""Where a partition's restore starts, and when the worker refuses to run:
the changelog lost state the committed input offsets say existed
(runtime.changelog_guard.plan_restore, broker-free)."""

from __future__ import annotations

import pytest

from recurrence_ledger.runtime.changelog_guard import ChangelogLost, RestorePlan, plan_restore

TOPIC = "p.ledger-ledger-state-changelog"
CONSUMED = {"p.source-journal": 120}


def plan(**kwargs) -> RestorePlan:
    return plan_restore(partition=1, changelog_topic=TOPIC, group_id="p.ledger", **kwargs)


def test_a_deleted_and_recreated_changelog_with_committed_offsets_is_refused():
    with pytest.raises(ChangelogLost) as refused:
        plan(consumed=CONSUMED, low=0, high=0, local_from=None)
    text = str(refused.value)
    assert refused.value.partition == 1
    assert f"{TOPIC}[1]" in text and "it is empty" in text and "p.source-journal[1]@120" in text
    assert "replay --from earliest" in text and "--reseed-changelog" not in text  # no local store to reseed from


def test_a_local_store_beyond_the_end_of_a_recreated_changelog_is_refused_and_named_for_a_reseed():
    with pytest.raises(ChangelogLost) as refused:
        plan(consumed=CONSUMED, low=0, high=0, local_from=None, kept_checkpoint=57, kept_reason="its topic_id is 'A', this one's 'B'",
             reseed_hint=True)
    assert "it is empty" in str(refused.value) and "--reseed-changelog" in str(refused.value)
    with pytest.raises(ChangelogLost, match="younger than the local store"):  # recreated, then a few records written
        plan(consumed=CONSUMED, low=0, high=3, local_from=None, kept_checkpoint=57, kept_reason="its topic_id is 'A', this one's 'B'")
    with pytest.raises(ChangelogLost, match="the changelog ends at offset 0"):  # same topic id, checkpoint beyond the end
        plan(consumed=CONSUMED, low=0, high=0, local_from=58, reseed_hint=True)


def test_a_changelog_truncated_at_its_start_is_refused_unless_the_local_tail_is_still_there():
    with pytest.raises(ChangelogLost, match="first records were deleted"):
        plan(consumed=CONSUMED, low=40, high=90, local_from=None)
    with pytest.raises(ChangelogLost, match=r"were deleted \(the changelog starts at offset 40\)"):
        plan(consumed=CONSUMED, low=40, high=90, local_from=12)
    with pytest.raises(ChangelogLost, match="its records up to offset 90 were deleted"):
        plan(consumed=CONSUMED, low=90, high=90, local_from=None)
    assert plan(consumed=CONSUMED, low=40, high=90, local_from=60) == RestorePlan(60)  # the tail it needs is there
    assert plan(consumed=CONSUMED, low=40, high=90, local_from=90) == RestorePlan(90, done=True)


def test_an_intact_changelog_is_restored_and_a_kept_store_of_the_old_topic_wiped_first():
    assert plan(consumed=CONSUMED, low=0, high=90, local_from=None) == RestorePlan(None)
    reason = "its topic_id is 'A', this one's 'B'"  # e.g. the topics copied to a new cluster
    assert plan(consumed=CONSUMED, low=0, high=90, local_from=None, kept_checkpoint=57, kept_reason=reason) == RestorePlan(None, reason)


def test_without_committed_offsets_nothing_is_refused_a_mismatched_store_is_wiped():
    """A new deployment, or the group's offsets deleted with the changelog (a
    deliberate rebuild from the beginning); also a group reset by hand while
    the changelog is intact (the state is whole, re-read records are the
    same identities and content)."""
    # An empty changelog is done at once (nothing to wait for); a full one is read from its start.
    assert plan(consumed={}, low=0, high=0, local_from=None) == RestorePlan(None, done=True)
    assert plan(consumed={}, low=90, high=90, local_from=None) == RestorePlan(None, done=True)
    assert plan(consumed={}, low=0, high=90, local_from=None) == RestorePlan(None)
    wiped = plan(consumed={}, low=0, high=0, local_from=58)
    assert wiped.start is None and "beyond the end" in wiped.wipe and wiped.done
    wiped = plan(consumed={}, low=40, high=90, local_from=12)
    assert wiped.start is None and "before the start" in wiped.wipe and not wiped.done
    assert plan(consumed={}, low=0, high=0, local_from=None, kept_checkpoint=57, kept_reason="topic_id") == RestorePlan(None, "topic_id", done=True)
    assert plan(consumed={}, low=0, high=90, local_from=30) == RestorePlan(30)
