"""contract §4 (rev. 2): normalize() is Unicode's compatibility caseless
form NFKC(casefold(NFKC(s))) followed by the whitespace and edge rules;
(rev. 3, §19.2) the whitespace rule collapses runs of ``White_Space`` only.

Pins how many single code points get a different key than under revision
1's casefold(NFKC(s)), and which code points change the key of a text they
stand inside from revision 2 to revision 3 — on the Unicode version of this
runtime (contract §10: a deployment pins its Unicode version; a new one
must be looked at here and in docs/upgrading.md).
"""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path

import pytest

from recurrence_ledger.ledger.normalize import WHITE_SPACE, canonical_json, digest, is_blank, normalize

VECTORS = json.loads((Path(__file__).parent / "golden_vectors.json").read_text(encoding="utf-8"))

#: Unicode version → the code points whose single-character key changed
#: from revision 1 to revision 2. Every one is a lowercase letter whose full
#: case folding expands to a base letter plus combining marks that NFKC
#: recomposes: ǰ, ΐ, ΰ, ẖ ẗ ẘ ẙ, and Greek letters with psili, dialytika,
#: perispomeni or ypogegrammeni (U+1F50–U+1FF7).
CHANGED = {
    "14.0.0": [
        0x01F0, 0x0390, 0x03B0, 0x1E96, 0x1E97, 0x1E98, 0x1E99, 0x1F50, 0x1F52, 0x1F54, 0x1F56, 0x1FB6, 0x1FB7,
        0x1FC6, 0x1FC7, 0x1FD2, 0x1FD3, 0x1FD6, 0x1FD7, 0x1FE2, 0x1FE3, 0x1FE4, 0x1FE6, 0x1FE7, 0x1FF6, 0x1FF7,
    ],
}


#: Unicode version → the code points whose key changed from revision 2 to
#: revision 3 (§19.2) inside a text ("a" + c + "b"): str.split() split at
#: them, White_Space does not hold them. Alone (or at an edge) they are
#: stripped either way, so no single code point's key changed.
CHANGED_REVISION_3 = {"14.0.0": [0x1C, 0x1D, 0x1E, 0x1F]}


def _strip_edges(collapsed: str) -> str:
    start, end = 0, len(collapsed)
    while start < end and unicodedata.category(collapsed[start])[0] in "PZC":
        start += 1
    while end > start and unicodedata.category(collapsed[end - 1])[0] in "PZC":
        end -= 1
    return collapsed[start:end]


def revision_1_normalize(text: str) -> str:
    """normalize() as revision 1 defined it: casefold(NFKC(text)), then
    revision 2's whitespace rule and the edge rule."""
    return _strip_edges(" ".join(unicodedata.normalize("NFKC", text).casefold().split()))


def revision_2_normalize(text: str) -> str:
    """normalize() as revision 2 defined it: NFKC(casefold(NFKC(text))),
    runs of what ``str.split()`` splits at become one space, then the edge
    rule."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return _strip_edges(" ".join(folded.split()))


def every_code_point():
    """Every code point as a one-character string (surrogates excluded: no
    valid UTF-8 text holds one)."""
    for code_point in range(sys.maxunicode + 1):
        if not 0xD800 <= code_point <= 0xDFFF:
            yield chr(code_point)


def test_the_two_spellings_of_the_golden_vector_give_one_key():
    vector = VECTORS["normalize_compatibility_caseless"]
    capital, small = vector["texts"]
    assert capital == "\u03a0\u03a1\u03a9\u03aa\u0301 BATCH FAILED"  # capital iota with dialytika, then a combining acute
    assert small == "\u03c0\u03c1\u03c9\u0390 batch failed"  # U+0390 precomposed
    assert normalize(capital) == normalize(small) == vector["key"] == small
    assert " ".join(f"U+{ord(c):04X}" for c in vector["key"]) == vector["key_code_points"]
    assert canonical_json(vector["key"]).decode() == vector["preimage"]
    assert canonical_json(vector["key"])[7:9] == b"\xce\x90"  # U+0390 in UTF-8, after the quote and πρω
    assert digest(vector["key"]) == vector["digest"]
    # Under revision 1 the two spellings had different keys (neither U+0390).
    assert [revision_1_normalize(text) for text in vector["texts"]] == vector["revision_1_keys"]
    assert len(set(vector["revision_1_keys"])) == 2


def test_26_code_points_change_key_from_revision_1_and_none_from_revision_2():
    version = unicodedata.unidata_version
    assert version in CHANGED, f"Unicode {version} is not pinned here: count the changed code points and update docs/upgrading.md"
    keys = {char: normalize(char) for char in every_code_point()}
    changed = [ord(char) for char, key in keys.items() if key != revision_1_normalize(char)]
    assert changed == CHANGED[version]
    assert len(changed) == 26
    # Revision 3 changes no single code point's key (see CHANGED_REVISION_3).
    assert [ord(char) for char, key in keys.items() if key != revision_2_normalize(char)] == []


@pytest.mark.parametrize("code_point", CHANGED["14.0.0"])
def test_each_changed_key_is_the_nfkc_form_of_the_revision_1_key(code_point):
    """What an operator can check on stored keys: a revision-1 key changes
    exactly when it is not in NFKC form, and becomes its NFKC form."""
    char = chr(code_point)
    old = revision_1_normalize(char)
    assert not unicodedata.is_normalized("NFKC", old)
    assert normalize(char) == unicodedata.normalize("NFKC", old)
    assert unicodedata.is_normalized("NFKC", normalize(char))


def test_keys_are_stable_under_normalize():
    """normalize(normalize(s)) == normalize(s) for every single code point
    (a stored key compared again gives itself)."""
    unstable = [char for char in every_code_point() if normalize(normalize(char)) != normalize(char)]
    assert unstable == []


def test_white_space_is_the_proplist_set():
    """The constant against this runtime's database: Python's whitespace
    (str.isspace: bidi classes WS, B, S or category Zs) is White_Space plus
    U+001C–U+001F, and every White_Space character is a separator or a
    control."""
    spaces = {char for char in every_code_point() if char.isspace()}
    assert spaces - WHITE_SPACE == {"\x1c", "\x1d", "\x1e", "\x1f"}
    assert WHITE_SPACE <= spaces
    assert len(WHITE_SPACE) == 25
    assert {unicodedata.category(char) for char in WHITE_SPACE} == {"Cc", "Zs", "Zl", "Zp"}


def test_str_split_splits_at_white_space_and_u001c_to_u001f_only():
    """The premise of normalize's fast path (str.split for texts without
    U+001C–U+001F)."""
    split_at = {char for char in every_code_point() if len(f"a{char}b".split()) == 2}
    assert split_at == WHITE_SPACE | {"\x1c", "\x1d", "\x1e", "\x1f"}


def test_u001c_to_u001f_change_key_from_revision_2_inside_a_text():
    version = unicodedata.unidata_version
    assert version in CHANGED_REVISION_3, f"Unicode {version} is not pinned here: list the changed code points and update docs/upgrading.md"
    changed = [ord(char) for char in every_code_point() if normalize(f"a{char}b") != revision_2_normalize(f"a{char}b")]
    assert changed == CHANGED_REVISION_3[version]
    for code_point in changed:
        assert normalize(f"a{chr(code_point)}b") == f"a{chr(code_point)}b"  # kept, not a space
        assert revision_2_normalize(f"a{chr(code_point)}b") == "a b"


def test_every_blank_character_has_an_empty_key():
    """is_blank (contract §2, §19.1): White_Space, Cc or Cf — and such a
    character alone always normalizes to "", so a blank cue is also one
    that normalizes to empty."""
    blank = [char for char in every_code_point() if is_blank(char)]
    assert {unicodedata.category(char) for char in blank} == {"Cc", "Cf", "Zs", "Zl", "Zp"}
    assert all(normalize(char) == "" for char in blank)
