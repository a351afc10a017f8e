"""The ``--from`` forms of ``recurrence-ledger replay``
(recurrence_ledger.runtime.replay.parse_start), without a broker; replay
itself on the real broker is tests/e2e/test_replay.py."""

from __future__ import annotations

import pytest

from recurrence_ledger.runtime.replay import parse_start


def test_parse_start_forms():
    assert parse_start("earliest").mode == "earliest"
    assert parse_start("position:42").position == 42
    assert parse_start("offsets:source-journal/0=5,task-outcomes/1=7").offsets == (("source-journal", 0, 5), ("task-outcomes", 1, 7))
    assert parse_start("timestamp:2026-11-29T10:00:00+00:00").timestamp_ms == 1_795_946_400_000
    for bad in ("latest", "offsets:recurrence-matches/0=1", "position:x"):
        with pytest.raises(ValueError):
            parse_start(bad)
