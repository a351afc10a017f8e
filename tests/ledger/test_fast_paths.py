"""The core's fast paths give exactly what their definitions give: ratios
rounded in integers against ``fractions.Fraction`` (contract §4, §19),
blank ASCII text against the per-character rule (§2, §19), ``low_yield``
against the exact fraction (§14), the unknown reasons in the contract's
order (§17), and the JSON Lines form against canonical JSON (§11)."""

from __future__ import annotations

import random
import unicodedata
from fractions import Fraction

from recurrence_ledger.ledger.normalize import WHITE_SPACE, canonical_json, canonical_json_line, is_blank
from recurrence_ledger.ledger.ratios import published_ratio, published_ratio_of_fraction
from recurrence_ledger.ledger.statistics import LOW_YIELD, LOW_YIELD_MIN_SELECTED, is_low_yield, reason_counts
from recurrence_ledger.ledger.verdicts import UNKNOWN_REASONS


def test_published_ratio_rounds_like_the_fraction():
    rng = random.Random(23)
    pairs = [(n, d) for d in range(1, 300) for n in range(0, d + 1)]
    pairs += [(rng.randrange(0, 10**12), rng.randrange(1, 10**12)) for _ in range(20_000)]
    pairs += [(rng.randrange(0, 2**64), rng.randrange(1, 2**64)) for _ in range(5_000)]
    pairs += [(n, d) for d in (-7, -3, -1) for n in range(-20, 21)] + [(5, 0), (0, 0)]
    # exact ties at 5 decimals, which round half to even
    pairs += [(k, 20_000) for k in range(0, 20_001)]
    assert [published_ratio(n, d) for n, d in pairs] == [published_ratio_of_fraction(n, d) for n, d in pairs]


def _blank_by_definition(text: str) -> bool:
    return all(char in WHITE_SPACE or unicodedata.category(char) in ("Cc", "Cf") for char in text)


def test_blank_ascii_text_by_the_per_character_rule():
    ascii_chars = [chr(code) for code in range(128)]
    texts = ["", *ascii_chars, *(a + b for a in ascii_chars for b in ascii_chars), " \t\x00\x7f ", "\x1c\x1d\x1e\x1f", "ci:run/7", " x "]
    assert [is_blank(text) for text in texts] == [_blank_by_definition(text) for text in texts]
    assert is_blank("\u200b\u00a0") and not is_blank("\u200bx")  # not ASCII: the per-character rule


def test_low_yield_compares_the_exact_fraction():
    for selected in (LOW_YIELD_MIN_SELECTED - 1, LOW_YIELD_MIN_SELECTED, 50):
        for avoided in range(0, 40):
            for recurred in range(0, 40):
                verdicts = avoided + recurred
                want = selected >= LOW_YIELD_MIN_SELECTED and verdicts > 0 and Fraction(avoided, verdicts) < LOW_YIELD
                assert is_low_yield(selected, recurred, avoided) is want


def test_reason_counts_are_every_reason_in_the_contracts_order():
    assert list(reason_counts(None)) == list(reason_counts({})) == list(UNKNOWN_REASONS)
    counts = {"check_failed": 2, "ambiguous": 1}
    assert list(reason_counts(counts).items()) == [(reason, counts.get(reason, 0)) for reason in UNKNOWN_REASONS]
    assert reason_counts({"no_longer_a_reason": 3, "ambiguous": 1}) == {reason: int(reason == "ambiguous") for reason in UNKNOWN_REASONS}
    zeros = reason_counts(None)
    zeros["ambiguous"] = 9  # a fresh dict each time
    assert reason_counts(None)["ambiguous"] == 0


def test_a_json_lines_line_is_the_canonical_json_and_a_line_feed():
    value = {"b": [1, {"é": None, "a": 0.3}], "a": "x\u2028"}
    assert canonical_json_line(value) == canonical_json(value) + b"\n"
