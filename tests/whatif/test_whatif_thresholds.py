"""The near-duplicate threshold as a policy setting (contract §12 rule 5,
§20): ``LedgerConfig.near_duplicate_threshold`` is an exact fraction in
(0, 1], the bigram index finds exactly what scoring every head finds at any
such threshold, the default 4/5 changes nothing, and the command line reads
``4/5`` and ``0.8`` as the same exact value."""

from __future__ import annotations

from fractions import Fraction

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recurrence_ledger import policy
from recurrence_ledger.cli.options import parse_fraction
from recurrence_ledger.ledger import admission
from recurrence_ledger.ledger.normalize import normalize
from recurrence_ledger.ledger.processor import LedgerConfig
from tests.journal import Ledger, experience
from tests.ledger.test_admission import FAILED, S, candidate, decisions

THRESHOLDS = (Fraction(1, 100), Fraction(1, 2), Fraction(3, 5), Fraction(2, 3), Fraction(4, 5), Fraction(9, 10), Fraction(1))


def test_the_config_takes_the_policy_default_and_refuses_values_outside_zero_to_one():
    assert LedgerConfig().near_duplicate_threshold == policy.NEAR_DUPLICATE_THRESHOLD.default == Fraction(4, 5)
    for bad in (Fraction(0), Fraction(-1, 2), Fraction(6, 5), 0.8):
        with pytest.raises(ValueError):
            LedgerConfig(near_duplicate_threshold=bad)


def test_the_command_line_reads_a_fraction_or_a_decimal_exactly():
    assert parse_fraction("4/5") == parse_fraction("0.8") == parse_fraction(" 0.80 ") == Fraction(4, 5)
    assert parse_fraction("1") == 1 and parse_fraction("0.3333") == Fraction(3333, 10_000)
    assert parse_fraction("8e-1") == Fraction(4, 5) and parse_fraction(".8") == Fraction(4, 5)
    for bad in ("nan", "inf", "0", "-1/2", "6/5", "1/0", "four fifths", "", "1e-99999999", "8e-001", "0x1p-1", "0." + "8" * 64):
        with pytest.raises(typer.BadParameter):
            parse_fraction(bad)


def test_min_shared_and_the_length_filter_are_the_old_ones_at_four_fifths():
    for size in range(1, 40):
        assert admission.min_shared(size) == admission.min_shared(size, Fraction(4, 5)) == -(-2 * size // 3)


CUE_WORDS = st.sampled_from(["port", "already", "bound", "of", "the", "sandbox", "fix", "again", "now"])
CUES = st.lists(CUE_WORDS, min_size=1, max_size=7).map(" ".join)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(heads=st.lists(CUES, min_size=1, max_size=12), probes=st.lists(CUES, min_size=1, max_size=4), pick=st.sampled_from(THRESHOLDS))
def test_near_duplicates_equal_brute_force_at_any_threshold(heads, probes, pick):
    ledger = Ledger(LedgerConfig(near_duplicate_threshold=pick)).feed(
        FAILED, *[experience(S, 10 + i, f"E{i}", cue=cue) for i, cue in enumerate(heads)])
    ledger.feed(*[candidate(f"C{i}", cue=cue) for i, cue in enumerate(probes)])
    got = decisions(ledger)
    for i, cue in enumerate(probes):
        key, expected = normalize(cue), []
        for h, head_cue in enumerate(heads):
            head_key = normalize(head_cue)
            shared, total = admission.dice_parts(admission.cue_bigrams(key), admission.cue_bigrams(head_key))
            if total and Fraction(shared, total) >= pick:
                expected.append((-Fraction(shared, total), f"E{h}"))
        actual = [n["artifact_ref"]["artifact_id"] for n in got[f"C{i}"]["near_duplicates"]]
        assert actual == [artifact_id for _, artifact_id in sorted(expected)][: admission.MAX_NEAR_DUPLICATES]
        assert got[f"C{i}"]["near_duplicates_total"] == len(expected)
