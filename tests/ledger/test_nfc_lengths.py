"""contract §3 (rev. 2): every length limit counts code points of the NFC
form of the text as written, so canonically equivalent spellings are either
all accepted or all rejected — at the boundary, for published cues and
check subjects, ids, texts and admission candidates' cues and check
subjects."""

from __future__ import annotations

import unicodedata

import pytest

from recurrence_ledger.ledger.intake import BadRecord, validate
from recurrence_ledger.ledger.normalize import nfc_length
from tests.journal import Ledger, check, experience, mutated, outcome
from tests.ledger.test_admission import FAILED, S, candidate, decisions


def spellings(length: int) -> dict[str, str]:
    """A text of ``length`` NFC code points, three ways: composed é
    (U+00E9), decomposed e + U+0301 (twice as many code points as sent),
    and Hangul syllables written as jamo (three per syllable)."""
    composed = "\u00e9" * length
    texts = {
        "composed": composed,
        "decomposed": unicodedata.normalize("NFD", composed),
        "jamo": unicodedata.normalize("NFD", "\ud55c" * length),  # 한 = ᄒ ᅡ ᆫ
    }
    assert all(nfc_length(text) == length for text in texts.values())
    assert len(texts["decomposed"]) == 2 * length and len(texts["jamo"]) == 3 * length
    return texts


SPELLINGS = ("composed", "decomposed", "jamo")
EXPERIENCE = experience(S, 1, "E1")["value"]
OUTCOME = outcome(S, 2, "O1", checks=[check("port already bound")])["value"]

#: (input topic, record, path of the string, limit)
LIMITS = {
    "recall_cue": ("experience-revisions", EXPERIENCE, ("content", "failure", "signature", "recall_cue"), 512),
    "check_subject": ("experience-revisions", EXPERIENCE, ("content", "failure", "verification", "check_subject"), 512),
    "artifact_id": ("experience-revisions", EXPERIENCE, ("artifact_ref", "artifact_id"), 512),
    "scope_id": ("task-outcomes", OUTCOME, ("scope_id",), 512),
    "source_id": ("task-outcomes", OUTCOME, ("source_ref", "source_id"), 512),
    "lesson": ("experience-revisions", EXPERIENCE, ("content", "lesson"), 16_384),
    "check_name": ("task-outcomes", OUTCOME, ("checks", 0, "name"), 16_384),
}


def outcome_of_validation(topic: str, value: dict) -> str:
    try:
        validate(topic, value)
    except BadRecord as bad:
        return bad.reason
    return "accepted"


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("name", LIMITS)
def test_a_text_at_the_limit_is_accepted_in_every_spelling(name, spelling):
    topic, record, path, limit = LIMITS[name]
    text = spellings(limit)[spelling]
    assert outcome_of_validation(topic, mutated(record, path, text)) == "accepted"


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("name", LIMITS)
def test_a_text_one_over_the_limit_is_too_long_in_every_spelling(name, spelling):
    topic, record, path, limit = LIMITS[name]
    text = spellings(limit + 1)[spelling]
    assert outcome_of_validation(topic, mutated(record, path, text)) == "too_long"


def test_a_512_character_cue_is_applied_and_matched_in_either_spelling():
    composed, decomposed = spellings(512)["composed"], spellings(512)["decomposed"]
    ledger = Ledger().feed(
        experience(S, 1, "E1", cue=decomposed),
        outcome(S, 2, "O1", checks=[check(composed)]),
    )
    assert ledger.reasons() == []
    assert ledger.matches() == [("O1", "check", 0, "scope_heads", "matched", "E1r1")]
    ledger.feed(experience(S, 3, "E2", cue=spellings(513)["decomposed"]), experience(S, 4, "E3", cue=spellings(513)["composed"]))
    assert ledger.reasons() == ["too_long", "too_long"]


def test_a_text_that_nfc_lengthens_counts_its_nfc_form():
    """U+0344 (combining Greek dialytika tonos) is two code points in NFC:
    300 of them are 600 — over the cue limit, though 300 were sent."""
    cue = "q" + "\u0344" * 300
    assert (len(cue), nfc_length(cue)) == (301, 601)
    assert outcome_of_validation("experience-revisions", mutated(EXPERIENCE, LIMITS["recall_cue"][2], cue)) == "too_long"


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_admission_cue_and_check_subject_limits_count_the_nfc_form(spelling):
    at, over = spellings(512)[spelling], spellings(513)[spelling]
    ledger = Ledger().feed(
        FAILED,
        candidate("C-cue-512", cue=at),
        candidate("C-cue-513", cue=over),
        candidate("C-subject-512", subject=at),
        candidate("C-subject-513", subject=over),
    ).flush()
    assert ledger.reasons() == []
    reasons = {candidate_id: decision["reasons"] for candidate_id, decision in decisions(ledger).items()}
    assert reasons == {
        "C-cue-512": [],
        "C-cue-513": ["cue_too_long"],
        "C-subject-512": [],
        "C-subject-513": ["check_subject_too_long"],
    }
