"""contract §21.5: a partition's state records the holdout policy it was
built under — the rate and a digest of the salt, never the salt — and
another policy is refused, naming both, unless accepted."""

from __future__ import annotations

import hashlib
from fractions import Fraction

import pytest

from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.ledger.state import HOLDOUT_POLICY_KEY, HoldoutPolicyChanged, pin_holdout_policy
from recurrence_ledger.ledger.state import holdout_policy as recorded_policy
from recurrence_ledger.store.memory import ChangelogStore

A = LedgerConfig(holdout_salt="salt-a", holdout_rate=Fraction(1, 4))
B = LedgerConfig(holdout_salt="salt-b", holdout_rate=Fraction(1, 4))
UNSET = LedgerConfig()


def holdout_policy(config: LedgerConfig) -> dict:
    """The record of ``config``'s holdout policy."""
    return recorded_policy(config.holdout_salt, config.holdout_rate)


def test_the_record_is_the_rate_and_a_digest_of_the_salt():
    assert holdout_policy(A) == {"rate": "1/4", "salt_sha256": hashlib.sha256(b"salt-a").hexdigest()[:16]}
    assert holdout_policy(UNSET) == {"rate": None, "salt_sha256": None}


def test_a_new_state_records_its_policy_once_and_keeps_it_across_a_restart():
    store = ChangelogStore()
    assert pin_holdout_policy(store, holdout_policy(A)) is None
    changes = store.changes()
    store.dirty.clear()
    assert pin_holdout_policy(store, holdout_policy(A)) == holdout_policy(A)
    assert store.changes() == []
    restored = ChangelogStore()
    for key, value in changes:
        restored.restore(key, value)
    assert pin_holdout_policy(restored, holdout_policy(A)) == holdout_policy(A)


@pytest.mark.parametrize(("built", "now"), [(A, B), (A, UNSET), (UNSET, A), (A, LedgerConfig(holdout_salt="salt-a", holdout_rate=Fraction(1, 3)))])
def test_another_policy_is_refused_naming_both_unless_accepted(built, now):
    store = {HOLDOUT_POLICY_KEY: holdout_policy(built)}
    with pytest.raises(HoldoutPolicyChanged) as error:
        pin_holdout_policy(store, holdout_policy(now))
    message = str(error.value)
    assert "--accept-holdout-change" in message and "salt-a" not in message
    assert ("no holdout policy" in message) == (UNSET in (built, now))
    assert store == {HOLDOUT_POLICY_KEY: holdout_policy(built)}  # nothing written
    assert pin_holdout_policy(store, holdout_policy(now), accept_change=True) == holdout_policy(built)
    assert store == {HOLDOUT_POLICY_KEY: holdout_policy(now)}
