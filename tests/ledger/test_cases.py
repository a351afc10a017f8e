"""Each fixture case in tests/cases produces exactly the facts in its
.expected.json (contract §5–§8 end to end through the embedded runner)."""

from __future__ import annotations

import pytest

from recurrence_ledger.embedded import run_journal
from tests.conftest import CASE_NAMES, case, facts, read_outputs


@pytest.mark.parametrize("name", CASE_NAMES)
def test_case_produces_expected_facts(name, tmp_path):
    journal, expected = case(name)
    summary = run_journal(journal, tmp_path, show_progress=False, validate_outputs=True)
    got = facts(read_outputs(tmp_path))
    assert got == expected
    assert summary.dead_letters == expected["dead_letter"]
