"""contract §19 (rev. 3), the exact edges, on the golden vectors of
tests/ledger/golden_vectors.json (worked out by hand from the rules):
blank text, White_Space collapsing, ratios as exact fractions rounded half
to even with thresholds compared on the fraction, 64-bit integers decided
the same under any interpreter setting, and the truncation note of a dead
letter that survives the message cap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import recurrence_ledger
from recurrence_ledger.ledger.admission import dice
from recurrence_ledger.ledger.intake import MAX_DEAD_LETTER_MESSAGE, BadRecord, Coordinates, dead_letter, decode_json, ingest_journal_line
from recurrence_ledger.ledger.normalize import canonical_json, is_blank, normalize
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.ledger.ratios import published_ratio
from recurrence_ledger.ledger.statistics import revision_figures
from tests.ledger.test_normalize_unicode import revision_2_normalize

VECTORS = json.loads((Path(__file__).parent / "golden_vectors.json").read_text(encoding="utf-8"))


def reason_of(raw: bytes) -> str | None:
    """The BadRecord reason of decoding ``raw`` as JSON; None when it decodes."""
    try:
        decode_json(raw)
    except BadRecord as bad:
        return bad.reason
    return None


# --------------------------------------------------------------------- §19.1 blank


@pytest.mark.parametrize("vector", VECTORS["blank"]["vectors"], ids=lambda v: ascii(v["text"]))
def test_blank(vector):
    assert is_blank(vector["text"]) is vector["blank"]
    assert (vector["text"].strip() == "") is vector["revision_2"]  # what revision 2 said (str.strip)


@pytest.mark.parametrize("vector", [v for v in VECTORS["blank"]["vectors"] if v["blank"]], ids=lambda v: ascii(v["text"]))
def test_a_blank_text_has_an_empty_key(vector):
    """Blank is stricter than "normalizes to empty": a blank cue or check
    subject is rejected by both rules."""
    assert normalize(vector["text"]) == ""


# --------------------------------------------------------------------- §19.2 White_Space


@pytest.mark.parametrize(("text", "key", "revision_2_key"), VECTORS["white_space"]["vectors"], ids=ascii)
def test_white_space_runs(text, key, revision_2_key):
    assert normalize(text) == key
    assert revision_2_normalize(text) == revision_2_key


# --------------------------------------------------------------------- §19.3 ratios


@pytest.mark.parametrize("vector", VECTORS["ratios"]["vectors"], ids=lambda v: f"{v['numerator']}/{v['denominator']}")
def test_a_ratio_is_published_from_its_exact_fraction(vector):
    published = published_ratio(vector["numerator"], vector["denominator"])
    assert published == vector["published"]
    if published is not None:
        assert canonical_json(published) == json.dumps(vector["published"]).encode()  # at most 4 places on the wire
        if "double" in vector:  # revision 2 rounded the binary double
            assert round(vector["numerator"] / vector["denominator"], 4) == vector["double"] != published


@pytest.mark.parametrize("vector", VECTORS["low_yield"]["vectors"], ids=lambda v: f"{v['selected']}-{v['recurred']}-{v['avoided']}")
def test_low_yield_compares_the_fraction(vector):
    figures = revision_figures({"selected": vector["selected"], "recurred": vector["recurred"], "avoided": vector["avoided"]})
    assert (figures["yield"], figures["low_yield"]) == (vector["yield"], vector["low_yield"])
    assert figures["low_yield"] == (vector["selected"] >= 3 and 10 * vector["avoided"] < 3 * (vector["avoided"] + vector["recurred"]))


def test_a_yield_of_0_29999_is_low_although_it_is_published_as_0_3():
    """The issue's example: revision 2 rounded first and compared 0.3 < 0.3."""
    figures = revision_figures({"selected": 100_000, "recurred": 70_001, "avoided": 29_999})
    assert figures["yield"] == 0.3
    assert figures["low_yield"] is True


@pytest.mark.parametrize("vector", VECTORS["dice"]["vectors"], ids=lambda v: f"{v['first'][:12]}~{v['second'][:12]}")
def test_dice_scores(vector):
    assert dice(vector["first"], vector["second"]) == vector["score"]


def words(prefix: str, first: int, last: int) -> list[str]:
    return [f"{prefix}{number}" for number in range(first, last + 1)]


def test_near_duplicates_sort_by_the_exact_score_not_the_published_one():
    """A candidate of 65 bigrams (t1 … t66). Head "A" shares all 65 of its 97
    bigrams: 130/162 = 65/81 = 0.80247 → 0.8025. Head "B" shares 63 of its
    92: 126/157 = 0.80255 → 0.8025. Same published score; B is the nearer,
    so it comes first although "A" < "B"."""
    from tests.ledger.test_admission import FAILED, candidate, decisions
    from tests.journal import Ledger, experience

    scope = "svc"
    head_a = " ".join(words("t", 1, 66) + words("x", 1, 32))
    head_b = " ".join(words("t", 1, 64) + words("y", 1, 29))
    ledger = Ledger().feed(FAILED, experience(scope, 10, "A", cue=head_a), experience(scope, 11, "B", cue=head_b))
    ledger.feed(candidate("C1", cue=" ".join(words("t", 1, 66))))
    rows = decisions(ledger)["C1"]["near_duplicates"]
    assert [(row["artifact_ref"]["artifact_id"], row["score"]) for row in rows] == [("B", 0.8025), ("A", 0.8025)]


# --------------------------------------------------------------------- §19.4 integers


@pytest.mark.parametrize("vector", VECTORS["json_integers"]["vectors"], ids=lambda v: v["json"][:40])
def test_integers_outside_64_bits(vector):
    assert reason_of(vector["json"].encode()) == vector["reason"]


def long_literal(vector: dict) -> bytes:
    return ("[" + vector["sign"] + "9" * vector["digits"] + "]").encode()


@pytest.mark.parametrize("limit", [640, 4300, 0])
def test_long_integers_get_one_reason_under_any_digit_limit(limit):
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(limit)
    try:
        for vector in VECTORS["json_integers"]["long"]:
            assert reason_of(long_literal(vector)) == vector["reason"], vector
    finally:
        sys.set_int_max_str_digits(before)


PROBE = """
import json, sys
from recurrence_ledger.ledger.intake import BadRecord, Coordinates, decode_json, ingest_journal_line
from recurrence_ledger.ledger.processor import LedgerProcessor

def reason(raw):
    try:
        decode_json(raw)
    except BadRecord as bad:
        return bad.reason
    return None

def journal_reason(literal):
    line = ('{"topic":"task-outcomes","value":{"scope_id":"s","journal_position":%s,'
            '"source_ref":{"source_type":"task_outcome","source_id":"O1"},"status":"failed"}}' % literal).encode()
    [letter] = ingest_journal_line(LedgerProcessor(), line, Coordinates("source-journal", None, 0, None))
    return letter.value["reason"]

print(json.dumps({"limit": sys.get_int_max_str_digits(),
                  "5000": reason(b"[" + b"9" * 5000 + b"]"), "20": reason(b"[" + b"1" + b"0" * 19 + b"]"),
                  "journal_5000": journal_reason("9" * 5000), "journal_20": journal_reason("1" + "0" * 19)}))
"""


@pytest.mark.parametrize("setting", [None, "640", "0"])
def test_the_reason_does_not_depend_on_pythonintmaxstrdigits(setting):
    """A fresh interpreter per setting (the variable is read at start-up):
    a 5,000-digit and a 20-digit integer are invalid_value under each."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONINTMAXSTRDIGITS"}
    env["PYTHONPATH"] = str(Path(recurrence_ledger.__file__).parents[1])
    if setting is not None:
        env["PYTHONINTMAXSTRDIGITS"] = setting
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result == {"limit": 4300 if setting is None else int(setting), "5000": "invalid_value", "20": "invalid_value",
                      "journal_5000": "invalid_value", "journal_20": "invalid_value"}


# --------------------------------------------------------------------- §19.5 truncated dead letters


@pytest.mark.parametrize("vector", VECTORS["dead_letter_truncation"]["vectors"], ids=lambda v: f"{v['raw_bytes']}-{v['message'][1]}")
def test_the_truncation_note_survives_the_message_cap(vector):
    char, count = vector["message"]
    letter = dead_letter(Coordinates("task-outcomes", 0, 7, "s"), b"x" * vector["raw_bytes"], "bad_magic_byte", char * count).value
    expected_char, expected_count = vector["expected"]
    assert letter["message"] == expected_char * expected_count + vector["note"]
    assert len(letter["message"]) <= MAX_DEAD_LETTER_MESSAGE


def test_a_big_bad_record_keeps_its_note_end_to_end():
    """A 300 KB journal line: the dead letter carries its first 262,144
    bytes and its message ends with the note."""
    line = b'{"topic":"task-outcomes","value":' + b"[" * 300_000
    [letter] = ingest_journal_line(LedgerProcessor(), line, Coordinates("source-journal", None, 0, None))
    assert letter.value["reason"] == "malformed_json"
    assert letter.value["message"].endswith(f" [raw truncated to the first 262144 of {len(line)} bytes]")
