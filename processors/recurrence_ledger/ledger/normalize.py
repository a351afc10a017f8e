"""contract §4: normalization, canonical JSON and digests.

Pure functions of their arguments; the byte-level outputs are pinned by golden
vectors in ``tests/ledger/golden_vectors.json``.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from typing import Any

import orjson

_STRIP_CATEGORIES = ("P", "Z", "C")

#: The code points with the Unicode ``White_Space`` property, as inclusive
#: ranges: the White_Space lines of the Unicode Character Database's
#: PropList.txt (https://www.unicode.org/Public/UCD/latest/ucd/PropList.txt),
#: unchanged since Unicode 6.3 removed U+180E. Python has no accessor for
#: the property: ``str.isspace``/``str.split`` also take U+001C–U+001F
#: (contract §19 rev. 3).
WHITE_SPACE_RANGES: tuple[tuple[int, int], ...] = (
    (0x0009, 0x000D), (0x0020, 0x0020), (0x0085, 0x0085), (0x00A0, 0x00A0), (0x1680, 0x1680),
    (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
)
#: :data:`WHITE_SPACE_RANGES` as a set of one-character strings.
WHITE_SPACE: frozenset[str] = frozenset(chr(code) for first, last in WHITE_SPACE_RANGES for code in range(first, last + 1))
_WHITE_SPACE_RUN = re.compile("[" + "".join(f"\\U{first:08x}-\\U{last:08x}" for first, last in WHITE_SPACE_RANGES) + "]+")
#: The characters ``str.split()`` splits at besides White_Space (pinned by
#: tests/ledger/test_normalize_unicode.py).
_SPLIT_NOT_WHITE_SPACE = re.compile("[\x1c-\x1f]")
#: General categories that count as blank besides White_Space: controls
#: and format characters (zero-width space, word joiner, BOM, bidi marks).
_BLANK_CATEGORIES = ("Cc", "Cf")


def _strippable(char: str) -> bool:
    return unicodedata.category(char)[0] in _STRIP_CATEGORIES


#: Texts up to this many code points have their key cached (check names and
#: observation texts repeat across outcomes: "lint", a CI job name).
_CACHED_LENGTH = 256
#: Keys kept in the cache: with texts ≤ _CACHED_LENGTH code points at most
#: some 30 MiB, in practice far less.
_CACHE_SIZE = 16_384


def normalize(text: str) -> str:
    """Return the comparison key of ``text`` (contract §4).

    A pure function of ``text``; keys of texts up to 256 code points are
    kept in a bounded LRU cache (``_normalize_cached``).

    Steps, in order: Unicode's compatibility caseless form
    NFKC(casefold(NFKC(text))); every run of ``White_Space`` characters
    becomes one space (:func:`collapse_white_space`);
    leading and trailing characters whose Unicode category is punctuation
    (P*), separator (Z*) or other (C*: control, format such as U+200B or a
    BOM) are stripped. Inner punctuation is kept.

    The second NFKC matters because full case folding can undo a
    composition: "ΐ" (U+0390) folds to ι + ̈ + ́, and capital "Ϊ" followed by
    a combining acute folds to ϊ + ́; only recomposing after the fold gives
    both spellings the same key (U+0390). 26 code points get a different key
    than under revision 1's casefold(NFKC(text)). Revision 3 collapses
    White_Space only, where revision 2 collapsed what ``str.split()`` splits
    at: a text with U+001C–U+001F between other characters keeps them (both
    pinned by tests/ledger/test_normalize_unicode.py).

    >>> normalize("  OpenAPI   Codegen Drift!! ")
    'openapi codegen drift'

    The result is a comparison key, never a stored identity; "" matches
    nothing (callers must check).
    """
    if len(text) <= _CACHED_LENGTH:
        return _normalize_cached(text)
    return _normalize_uncached(text)


def _normalize_uncached(text: str) -> str:
    """:func:`normalize` computed."""
    if text.isascii():
        folded = text.lower()  # NFKC is the identity on ASCII, and casefold is lower
    else:
        folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    collapsed = collapse_white_space(folded)
    if collapsed.isascii() and collapsed[:1].isalnum() and collapsed[-1:].isalnum():
        return collapsed  # fast path: nothing to strip
    start, end = 0, len(collapsed)
    while start < end and _strippable(collapsed[start]):
        start += 1
    while end > start and _strippable(collapsed[end - 1]):
        end -= 1
    return collapsed[start:end]


def collapse_white_space(text: str) -> str:
    """normalize() step 2: every run of White_Space characters
    (:data:`WHITE_SPACE`) becomes one space, and none is left at either end.

    >>> collapse_white_space("\\tport\\u00a0\\u00a0bound\\u2028"), collapse_white_space("a\\x1fb")
    ('port bound', 'a\\x1fb')
    """
    if _SPLIT_NOT_WHITE_SPACE.search(text) is None:
        return " ".join(text.split())  # the same runs, faster
    return _WHITE_SPACE_RUN.sub(" ", text).strip(" ")


_normalize_cached = functools.lru_cache(maxsize=_CACHE_SIZE)(_normalize_uncached)


def is_blank(text: str) -> bool:
    """Whether ``text`` is blank (contract §2, §19 rev. 3): every character
    has the Unicode ``White_Space`` property (:data:`WHITE_SPACE`) or the
    general category Cc (control) or Cf (format: U+200B zero-width space,
    U+2060 word joiner, U+FEFF byte-order mark, …). "" is blank.

    >>> is_blank("\\u200b\\u2060\\ufeff"), is_blank(" \\t\\u3000"), is_blank("ci:run/7")
    (True, True, False)
    """
    if text.isascii():  # ASCII's blank characters: the controls U+0000–U+001F, U+007F and the space
        return not text.strip(_ASCII_BLANK)
    return all(char in WHITE_SPACE or unicodedata.category(char) in _BLANK_CATEGORIES for char in text)


#: The blank ASCII characters (:func:`is_blank`): Cc and the one White_Space that is not Cc.
_ASCII_BLANK = "".join(map(chr, range(0x21))) + "\x7f"


def nfc_length(text: str) -> int:
    """Length of ``text`` for every length limit (contract §3 rev. 2): the
    number of code points of its NFC form, so canonically equivalent
    spellings (composed "é" or "e" + combining acute) are either all within
    a limit or all over it. NFC can also lengthen a text (e.g. U+0344 becomes
    two code points). ASCII is its own NFC form."""
    if text.isascii():
        return len(text)
    return len(unicodedata.normalize("NFC", text))


def canonical_json(value: Any) -> bytes:
    """Canonical JSON bytes of a JSON-compatible value (contract §4).

    UTF-8, keys sorted, no insignificant whitespace, no ASCII escaping —
    byte for byte what ``json.dumps(value, sort_keys=True, separators=(",",
    ":"), ensure_ascii=False)`` gives for our value types, produced by orjson
    (about 10x faster; pinned by the golden vectors).
    Floats appear only as ratios published with 4 decimals (yield,
    repeat_failure_rate, Dice scores: ``ratios.published_ratio``), never NaN
    or infinite; orjson writes their shortest round-trip form, the same as
    ``json.dumps``, so at most 4 decimals. Raises ``ValueError`` on a lone
    surrogate, an integer outside 64 bits or a non-JSON type.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError as error:
        raise ValueError(f"not canonical-JSON encodable: {error}") from None


def canonical_json_line(value: Any) -> bytes:
    """:func:`canonical_json` of ``value`` followed by a line feed (one
    line of a JSON Lines file, contract §11), in one call."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError as error:
        raise ValueError(f"not canonical-JSON encodable: {error}") from None


def digest_bytes(data: bytes) -> str:
    """``"sha256:" + hex(sha256(data))``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """digest(x) = ``"sha256:" + hex(sha256(canonical_json(x)))`` (contract §4)."""
    return digest_bytes(canonical_json(value))
