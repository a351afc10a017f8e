"""contract §4 (rev. 2): normalize() is Unicode's compatibility caseless
form NFKC(casefold(NFKC(s))) followed by the whitespace and edge rules.

Pins how many single code points get a different key than under revision
1's casefold(NFKC(s)) — on the Unicode version of this runtime (contract
§10: a deployment pins its Unicode version; a new one must be looked at
here and in docs/upgrading.md).
"""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path

import pytest

from recurrence_ledger.ledger.normalize import canonical_json, digest, normalize

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


def revision_1_normalize(text: str) -> str:
    """normalize() as revision 1 defined it: casefold(NFKC(text)), then the
    same whitespace and edge rules."""
    collapsed = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    start, end = 0, len(collapsed)
    while start < end and unicodedata.category(collapsed[start])[0] in "PZC":
        start += 1
    while end > start and unicodedata.category(collapsed[end - 1])[0] in "PZC":
        end -= 1
    return collapsed[start:end]


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


def test_26_code_points_change_key_from_revision_1():
    version = unicodedata.unidata_version
    assert version in CHANGED, f"Unicode {version} is not pinned here: count the changed code points and update docs/upgrading.md"
    changed = [ord(char) for char in every_code_point() if normalize(char) != revision_1_normalize(char)]
    assert changed == CHANGED[version]
    assert len(changed) == 26


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
