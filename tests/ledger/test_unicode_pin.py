"""contract §10 (rev. 2): the state records the Unicode version it was built
with; another version is refused, naming both, unless accepted."""

from __future__ import annotations

import unicodedata

import pytest

from recurrence_ledger.ledger.state import UNICODE_VERSION_KEY, UnicodeVersionChanged, pin_unicode_version
from recurrence_ledger.store.memory import ChangelogStore


def test_a_new_state_records_the_runtime_version_once():
    store = ChangelogStore()
    assert pin_unicode_version(store) is None
    assert store.data == {UNICODE_VERSION_KEY: unicodedata.unidata_version}
    changes = store.changes()
    store.dirty.clear()
    assert pin_unicode_version(store) == unicodedata.unidata_version
    assert store.changes() == []  # nothing more to write to the changelog
    restored = ChangelogStore()
    for key, value in changes:
        restored.restore(key, value)
    assert pin_unicode_version(restored) == unicodedata.unidata_version  # survives a restart


def test_another_recorded_version_is_refused_naming_both():
    store = {UNICODE_VERSION_KEY: "13.0.0"}
    with pytest.raises(UnicodeVersionChanged) as error:
        pin_unicode_version(store, runtime="14.0.0")
    assert (error.value.recorded, error.value.runtime) == ("13.0.0", "14.0.0")
    assert "Unicode 13.0.0" in str(error.value) and "Unicode 14.0.0" in str(error.value)
    assert "--accept-unicode-change" in str(error.value)
    assert store == {UNICODE_VERSION_KEY: "13.0.0"}  # unchanged


def test_accepting_the_change_records_the_new_version():
    store = {UNICODE_VERSION_KEY: "13.0.0"}
    assert pin_unicode_version(store, accept_change=True, runtime="14.0.0") == "13.0.0"
    assert store == {UNICODE_VERSION_KEY: "14.0.0"}
    assert pin_unicode_version(store, runtime="14.0.0") == "14.0.0"
