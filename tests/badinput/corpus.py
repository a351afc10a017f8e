"""The bad-input corpus (contract §3, §9): malformed and hostile records, each
with the dead-letter reason code it must get, and the hostile records that are
valid and must not be dead-lettered.

Every :class:`Entry` is one record:

- ``target``: ``"journal"`` — a line of a journal file for the embedded
  runner (``recurrence_ledger.ledger.intake.ingest_journal_line``) — or the logical
  Kafka input topic it is published on (``"source-journal"`` or a per-kind
  topic such as ``"task-outcomes"``), read by the worker through
  ``recurrence_ledger.serde.codec.decode_source`` then ``intake.ingest``;
- ``key`` / ``value``: the record's key and value bytes exactly as they are
  written (``None``: a null key or a tombstone); journal lines have no key;
- ``expected_reason``: the reason code of the one dead letter it must cause
  (the table in ``processors/recurrence_ledger/ledger/intake.py``);
- ``after``: how many records of the minimum case
  (``tests/cases/minimum_case.jsonl``) must come before it. Conflicting
  duplicates and position collisions (§3 immutability) conflict with a valid
  record of that case, so they only make sense after it: each is a small
  sequence "valid record, then the bad one";
- ``defects``: path → why this entry fails there, for a known defect not
  yet fixed (the tests mark those cases ``xfail(strict=True)``, so a fix
  shows as an XPASS to clean up). Paths: ``"embedded"`` (the journal path),
  ``"decode"`` (the worker's decode path without a broker, including that
  the dead letter fits in a Kafka message), ``"worker"`` (the real worker).
  Empty today: the defects the corpus found (a 5000-digit JSON integer
  escaping as ValueError, enum fields of the wrong type reported as
  invalid_value, C1 controls accepted in ids, Avro records over 1 MiB
  accepted, dead letters of records over ~740 KB too big to produce, which
  crashed the worker) were fixed in commit 8c2b7a1.

A journal line read from Kafka is a ``source-journal`` record published as
is (what ``recurrence_ledger.kafka.kafka_io.publish_journal`` does with a bad line), keyed
by its scope_id when one can be read, else without a key:
:func:`as_source_journal` gives its key and the reason it
must get there — the same code for a line the worker reads as JSON (its
first byte after JSON whitespace starts a JSON value, or a BOM: contract
§9), and ``bad_magic_byte`` for any other (neither JSON nor an Avro frame,
``recurrence_ledger.ledger.intake.is_json_value``).

The conflicts are built against the minimum case's own records, so running
the corpus between its records must leave its outputs unchanged.

Hostile records that are *valid* live in :data:`HOSTILE_VALID_CUES` (Unicode
tricks in recall cues, with the match behaviour contract §4's normalize
requires) and :data:`HOSTILE_VALID_REPLAYS` (duplicates that are identical
after validation, which §3 says change nothing).
"""

from __future__ import annotations

import base64
import json
import re
import struct
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from recurrence_ledger.ledger.intake import MAX_DEAD_LETTER_RAW, Coordinates, dead_letter, validate
from recurrence_ledger.ledger.processor import Emit, LedgerProcessor
from recurrence_ledger.kafka.kafka_io import prepare_line
from recurrence_ledger.kafka.records import ingest_record
from recurrence_ledger.serde import codec
from tests.conftest import CASES
from tests.journal import mutated
from recurrence_ledger import catalogue

MINIMUM_CASE = CASES / "minimum_case.jsonl"
SCOPE = "migration-lock"
KEY = SCOPE.encode()
JOURNAL = "journal"
SOURCE_JOURNAL = catalogue.SOURCE_JOURNAL

#: librdkafka's default producer ``message.max.bytes``: a record the worker
#: produces (a dead letter included) larger than this makes ``produce()``
#: raise MSG_SIZE_TOO_LARGE; the broker's default limit is ~1 MiB.
MAX_PRODUCE_BYTES = 1_000_000
#: Raw records larger than this (key included) are not published in the
#: end-to-end test: a producer with default settings cannot send them.
MAX_E2E_RAW_BYTES = 990_000


class Entry(NamedTuple):
    """One bad record of the corpus (see the module docstring)."""

    id: str
    target: str
    key: bytes | None
    value: bytes | None
    expected_reason: str
    note: str
    after: int = 0
    defects: Mapping[str, str] = MappingProxyType({})


# --------------------------------------------------------------------- helpers


#: An admission candidate citing the minimum case's recurred
#: outcome, so the corpus covers the experience-candidates topic too.
CANDIDATE_LINE = json.dumps(
    {
        "topic": "experience-candidates",
        "value": {
            "candidate_id": "C1",
            "scope_id": SCOPE,
            "journal_position": 11,
            "artifact_id": None,
            "content": {
                "situation": "s", "action": "a", "outcome": "the build failed", "lesson": "l",
                "failure": {
                    "signature": {"recall_cue": "Schema migration lock timeout during a release deploy", "symptom": None},
                    "repair_surface": "experience_content",
                    "verification": {"condition": "Terminated idle session on db-primary", "check_subject": "migrations applied"},
                },
            },
            "cited_sources": [{"source_type": "task_outcome", "source_id": "job-recur"}],
        },
    }
).encode()


def _recurrence_line(position: int, source_id: str) -> bytes:
    """An unlinked failed outcome whose verified check names M4's cue: a
    recurrence of M4's head."""
    return json.dumps({"topic": "task-outcomes", "value": {
        "scope_id": SCOPE, "journal_position": position, "source_ref": {"source_type": "task_outcome", "source_id": source_id},
        "status": "failed", "handoff_receipt_ref": None, "observations": [],
        "checks": [{"name": "Schema migration lock timeout", "status": "failed", "basis": "verified",
                    "evidence": [{"kind": "exact", "ref": f"ci:deploy/{position}"}], "details": None}],
    }}).encode()


#: The candidate id of M4 r2's first run (contract §8: the digest of
#: ``{scope_id, artifact_ref, signature_key, run_start_position}``).
M4_R2_CANDIDATE = "sha256:da8de9e6488057ca462962b159796e9e2e5dc1bb46f57cfd05f1749cd5932a8e"
#: Two more recurrences of M4 r2 (with the minimum case's job-unlinked, its
#: run reaches the review threshold 3 and publishes a ReviewCandidate) and a
#: review decision that rejects it, so the corpus covers the
#: review-decisions topic too (contract §18).
REVIEW_LINES = [
    _recurrence_line(20, "job-again-1"),
    _recurrence_line(21, "job-again-2"),
    json.dumps({"topic": "review-decisions", "value": {
        "scope_id": SCOPE, "decision_id": "RD-1", "candidate_id": M4_R2_CANDIDATE, "journal_position": 22,
        "decision": "rejected", "reason": "the lock timeout is the database's, not the lesson's", "reviewer": "dba-on-call",
        "decided_at": "2025-03-01T09:30:00Z", "fix_revision": None,
    }}).encode(),
]


def valid_lines() -> list[bytes]:
    """The minimum case's journal lines, as bytes, without end of line, one
    admission candidate (:data:`CANDIDATE_LINE`) and :data:`REVIEW_LINES`.
    Raises FileNotFoundError when the fixture case is missing (a failure,
    never a skip)."""
    return [line for line in MINIMUM_CASE.read_bytes().splitlines() if line.strip()] + [CANDIDATE_LINE, *REVIEW_LINES]


VALID_RECORDS: list[dict] = [json.loads(line) for line in valid_lines()]


def jline(record: Any) -> bytes:
    """A journal line: compact JSON in UTF-8 with non-ASCII characters as
    they are, except lone surrogates, which only a ``\\uXXXX`` escape can
    carry (their UTF-8 form is not UTF-8)."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text).encode()


def zigzag(number: int) -> bytes:
    """Avro's zig-zag varint encoding of a long."""
    number = (number << 1) ^ (number >> 63)
    out = bytearray()
    while number & ~0x7F:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def avro_string(text: str | bytes) -> bytes:
    """An Avro string: zig-zag length, then the bytes."""
    data = text if isinstance(text, bytes) else text.encode()
    return zigzag(len(data)) + data


def source_event(record: dict) -> bytes:
    """A journal record as a framed Avro SourceEvent (what publish_journal
    writes), without validating it: the value must only fit the Avro schema."""
    return codec.encode("SourceEvent", {"topic": record["topic"], "value": record["value"]})


def per_kind(record: dict) -> bytes:
    """A journal record's value as a framed Avro record of its kind."""
    return codec.encode(catalogue.BY_NAME[record["topic"]].schema, record["value"])


def experience_record(position: int, artifact_id: str, revision: int = 1, cue: str = "Schema migration lock timeout",
                      subject: str = "migrations applied within the lock window", lesson: str = "corpus lesson") -> dict:
    """An experience-revisions record of the minimum case's scope."""
    return {"topic": "experience-revisions", "value": {
        "scope_id": SCOPE, "journal_position": position,
        "artifact_ref": {"family": "experience", "artifact_id": artifact_id, "revision": revision},
        "content": {"situation": "s", "action": "a", "outcome": "o", "lesson": lesson, "failure": {
            "signature": {"recall_cue": cue, "symptom": None},
            "repair_surface": "experience_content",
            "verification": {"condition": "Terminated idle session on db-primary", "check_subject": subject}}}}}


def check(name: str = "Schema migration lock timeout", status: str = "failed") -> dict:
    """A verified TaskCheck with exact evidence (a failure item when failed)."""
    return {"name": name, "status": status, "basis": "verified", "evidence": [{"kind": "exact", "ref": "ci:corpus"}], "details": None}


def outcome_record(position: int = 1000, source_id: str = "O-corpus", **fields: Any) -> dict:
    """A task-outcomes record of the minimum case's scope: an unlinked failed
    outcome whose check would recur on M4 — had it been accepted, the
    outputs would change, so a silently accepted bad record shows."""
    value = {
        "scope_id": SCOPE, "journal_position": position,
        "source_ref": {"source_type": "task_outcome", "source_id": source_id},
        "status": "failed", "handoff_receipt_ref": None, "observations": [], "checks": [check()],
    }
    value.update(fields)
    return {"topic": "task-outcomes", "value": value}


def handoff_record(position: int = 1002, artifact_id: str = "H-corpus", citations: int = 1, artifact: str = "M4",
                   memory: int = 0) -> dict:
    """A handoff-revisions record citing ``citations`` revisions of ``artifact``."""
    return {"topic": "handoff-revisions", "value": {
        "scope_id": SCOPE, "journal_position": position,
        "artifact_ref": {"family": "handoff", "artifact_id": artifact_id, "revision": 1},
        "artifact_citations": [
            {"artifact_ref": {"family": "experience", "artifact_id": artifact, "revision": 1 + i}} for i in range(citations)
        ],
        "memory_citations": [{"entry_id": f"m{i}", "version_id": "v"} for i in range(memory)],
    }}


def receipt_record(position: int = 1003, source_id: str = "R-corpus", **fields: Any) -> dict:
    """A handoff-receipts record selecting HM1 revision 1."""
    ref = {"family": "handoff", "artifact_id": "HM1", "revision": 1}
    value = {
        "scope_id": SCOPE, "journal_position": position,
        "source_ref": {"source_type": "handoff_receipt", "source_id": source_id},
        "status": "accepted", "selection": "exact", "selected_revision": ref, "current_revision": ref,
        "evidence_status": "available",
    }
    value.update(fields)
    return {"topic": "handoff-receipts", "value": value}


def with_position(record: dict, literal: str) -> bytes:
    """The journal line of ``record`` with its journal_position written as
    the JSON text ``literal`` (NaN, 1e999, a 5000-digit number…)."""
    value = record["value"]["journal_position"]
    text = json.dumps(record, separators=(",", ":"))
    needle = f'"journal_position":{value}'
    assert text.count(needle) == 1
    return text.replace(needle, f'"journal_position":{literal}').encode()


# --------------------------------------------------------------------- journal lines (embedded runner)


def _journal_entries() -> list[Entry]:
    M4 = VALID_RECORDS[0]
    HM1 = VALID_RECORDS[1]
    RM1 = VALID_RECORDS[2]
    O_PASS = VALID_RECORDS[3]
    probe = outcome_record()
    probe_line = jline(probe)
    experience = experience_record(1001, "E-corpus")
    entries: list[Entry] = []

    def add(id_: str, value: bytes, reason: str, note: str, after: int = 0, defects: Mapping[str, str] | None = None) -> None:
        entries.append(Entry(f"journal/{id_}", JOURNAL, None, value, reason, note, after, MappingProxyType(dict(defects or {}))))

    def field(id_: str, record: dict, path: tuple, value: Any, reason: str, note: str, delete: bool = False) -> None:
        add(id_, jline(mutated(record, ("value", *path), value, delete=delete)), reason, note)

    # -- not JSON / not UTF-8 ------------------------------------------------------
    add("truncated-json", valid_lines()[4][: len(valid_lines()[4]) // 2], "malformed_json", "a valid line cut in half")
    add("trailing-garbage", probe_line + b" trailing", "malformed_json", "a valid record followed by more text")
    add("two-objects", probe_line + probe_line, "malformed_json", "two JSON objects on one line")
    add("not-utf8", probe_line.replace(b"O-corpus", b"O-\xff\xfecorpus"), "malformed_json", "invalid UTF-8 bytes inside a string")
    add("overlong-utf8", probe_line.replace(b"O-corpus", b"O-\xc0\xafcorpus"), "malformed_json", "overlong UTF-8 encoding of '/'")
    add("cesu8-surrogate", probe_line.replace(b"O-corpus", b"O-\xed\xa0\x80corpus"), "malformed_json",
        "a UTF-16 surrogate encoded as UTF-8 bytes (CESU-8), which UTF-8 forbids")
    add("utf16", json.dumps(probe).encode("utf-16"), "malformed_json", "the record encoded as UTF-16 with a BOM")
    add("utf8-double-bom", b"\xef\xbb\xbf" * 2 + probe_line, "malformed_json",
        "two UTF-8 byte-order marks before the JSON: only one leading BOM is ignored (contract §9)")
    add("nul-bytes", b"\x00" * 16, "malformed_json", "NUL bytes only")
    add("nan", with_position(probe, "NaN"), "malformed_json", "NaN where the journal position goes")
    add("infinity", with_position(probe, "Infinity"), "malformed_json", "Infinity where the journal position goes")
    add("minus-infinity", with_position(probe, "-Infinity"), "malformed_json", "-Infinity where the journal position goes")
    add("repeated-key", with_position(probe, '1000,"journal_position":4'), "malformed_json",
        "the position given twice with conflicting values inside one record")
    add("deep-nesting", b'{"topic":"task-outcomes","value":' + b'{"a":' * 50_000 + b"1" + b"}" * 50_001,
        "malformed_json", "50,000 nested objects inside the envelope")
    add("deep-array", b"[" * 100_000 + b"]" * 100_000, "malformed_json", "100,000 nested arrays")
    add("huge-int-literal", with_position(probe, "9" * 5000), "invalid_value",
        "a 5000-digit integer where the position goes: outside 64 bits whatever CPython's digit limit (contract §19)")
    add("huge-int-unknown-field", with_position(probe, '1000,"retries":-' + "9" * 20), "invalid_value",
        "a 20-digit negative integer in an unknown field: outside 64 bits is invalid_value before any schema rule")
    add("huge-int-and-repeated-key", with_position(probe, "9" * 5000 + ',"journal_position":4'), "malformed_json",
        "a 5000-digit integer in a record that repeats a key: not JSON wins over the integer")

    # -- envelope ---------------------------------------------------------------------
    add("envelope-array", jline(["task-outcomes", probe["value"]]), "invalid_envelope", "an array instead of the envelope object")
    add("envelope-extra-key", jline({**probe, "partition": 0}), "invalid_envelope", "the envelope with a third key")
    add("envelope-topic-not-string", jline({"topic": ["task-outcomes"], "value": probe["value"]}), "invalid_envelope",
        "the topic as a list")
    add("envelope-missing-value", jline({"topic": "task-outcomes"}), "invalid_envelope", "no value")
    add("envelope-value-string", jline({"topic": "task-outcomes", "value": "x"}), "invalid_envelope", "the value a string, not an event object")
    add("envelope-value-array", jline({"topic": "task-outcomes", "value": []}), "invalid_envelope", "the value an array, not an event object")
    add("envelope-value-null", jline({"topic": "task-outcomes", "value": None}), "invalid_envelope", "the value null")
    add("envelope-null", b"null", "invalid_envelope", "JSON null")
    add("envelope-string", b'"task-outcomes"', "invalid_envelope", "a bare JSON string")

    # -- topic ------------------------------------------------------------------------
    for id_, topic, note in [
        ("unknown-topic-typo", "task-outcome", "singular: one letter off"),
        ("unknown-topic-output", "recurrence-observations", "an output topic"),
        ("unknown-topic-homoglyph", "task-\u043eutcomes", "Cyrillic 'о' in place of Latin 'o'"),
        ("unknown-topic-source-journal", "source-journal", "the journal topic is not an event kind"),
        ("unknown-topic-prefixed", "prod.task-outcomes", "a deployment-prefixed name"),
        ("unknown-topic-case", "Task-Outcomes", "capitalised"),
    ]:
        add(id_, jline({"topic": topic, "value": probe["value"]}), "unknown_topic", note)

    # -- schema: missing / unexpected / type --------------------------------------------
    field("missing-status", probe, ("status",), None, "missing_field", "no status", delete=True)
    field("missing-scope-id", probe, ("scope_id",), None, "missing_field", "no scope_id", delete=True)
    field("missing-nested", probe, ("checks", 0, "status"), None, "missing_field", "a check without status", delete=True)
    field("missing-failure-signature", experience, ("content", "failure", "signature"), None, "missing_field",
          "a failure block without its signature", delete=True)
    field("unexpected-field", probe, ("priority",), 1, "unexpected_field", "an unknown top-level field")
    field("unexpected-nested-field", probe, ("checks", 0, "severity"), "high", "unexpected_field", "an unknown field in a check")
    field("position-string", probe, ("journal_position",), "1000", "wrong_type", "the position as a string")
    field("position-bool", probe, ("journal_position",), True, "wrong_type", "the position as a boolean")
    field("position-float", probe, ("journal_position",), 1000.0, "wrong_type", "the position as 1000.0")
    add("position-exponent", with_position(probe, "1e3"), "wrong_type", "the position as 1e3 (a float in JSON)")
    add("position-inf-literal", with_position(probe, "1e999"), "wrong_type", "1e999 overflows to inf: a float")
    field("position-null", probe, ("journal_position",), None, "wrong_type", "a null position")
    field("checks-object", probe, ("checks",), {"0": check()}, "wrong_type", "checks as an object keyed by index")
    field("status-number", probe, ("status",), 3, "wrong_type", "the outcome status as a number")
    field("cue-number", experience, ("content", "failure", "signature", "recall_cue"), 42, "wrong_type", "a numeric cue")

    # -- values and §3 field rules ---------------------------------------------------------
    field("position-negative", probe, ("journal_position",), -1, "invalid_value", "a negative position")
    field("position-2-63", probe, ("journal_position",), 2**63, "invalid_value", "one past the Avro long range")
    field("position-huge", probe, ("journal_position",), 10**40, "invalid_value", "a 41-digit position")
    field("revision-zero", experience, ("artifact_ref", "revision"), 0, "invalid_value", "revision 0 (revisions are ≥ 1)")
    field("revision-negative", experience, ("artifact_ref", "revision"), -7, "invalid_value", "a negative revision")
    field("status-bogus", probe, ("status",), "exploded", "invalid_value", "an outcome status outside the enum")
    field("check-status-case", probe, ("checks", 0, "status"), "FAILED", "invalid_value", "an enum value in upper case")
    field("experience-family-handoff", experience, ("artifact_ref", "family"), "handoff", "invalid_value",
          "an Experience revision whose ref names the handoff family")
    field("receipt-ref-wrong-type", probe, ("handoff_receipt_ref",), {"source_type": "task_outcome", "source_id": "RM1"},
          "invalid_value", "a receipt ref whose source_type is task_outcome")
    field("scope-control-char", probe, ("scope_id",), "migration\x1flock", "invalid_value", "U+001F (the store's separator) in an id")
    field("scope-nul", probe, ("scope_id",), "migration\x00lock", "invalid_value", "NUL in an id")
    field("scope-empty", probe, ("scope_id",), "", "invalid_value", "an empty scope_id")
    field("scope-c1-control", probe, ("scope_id",), "migration\x85lock", "invalid_value", "U+0085 NEXT LINE (a C1 control) in an id")
    field("scope-lone-surrogate", probe, ("scope_id",), "migration\ud800lock", "invalid_value",
          "a lone surrogate (\\ud800 escape): no canonical form")
    field("unexpected-key-lone-surrogate", probe, ("\udfff",), 1, "invalid_value", "an object key that is a lone surrogate")

    # -- Unicode tricks in cues that are NOT valid ----------------------------------------
    cue = ("content", "failure", "signature", "recall_cue")
    field("cue-lone-surrogate", experience, cue, "Schema \ud800 timeout", "invalid_value", "a lone surrogate inside a cue")
    field("cue-zero-width-only", experience, cue, "\u200b\u200d\u2060\ufeff", "invalid_value",
          "ZWSP, ZWJ, word joiner and BOM only: normalizes to the empty string")
    field("cue-punctuation-and-format-only", experience, cue, "¡¿…!!\u00ad\u200e", "invalid_value",
          "punctuation, soft hyphen and LRM only: normalizes to the empty string")
    field("cue-empty", experience, cue, "", "invalid_value", "an empty cue")
    field("cue-whitespace-only", experience, cue, " \u00a0\u3000\t\u2028 ", "invalid_value",
          "ASCII, no-break, ideographic and line-separator spaces only")
    field("check-subject-bom-only", experience, ("content", "failure", "verification", "check_subject"), "\ufeff",
          "invalid_value", "a check_subject that is only a BOM")

    # -- bounds ------------------------------------------------------------------------------
    field("cue-513", experience, cue, "x" * 513, "too_long", "a cue one over MAX_FAILURE_CUE_LENGTH")
    field("cue-decomposed-over-512", experience, cue, "e\u0301" * 513, "too_long",
          "513 'é' written decomposed: 1,026 code points as sent, 513 in NFC; the bound counts the NFC form (rev. 2)")
    field("id-513", probe, ("source_ref", "source_id"), "O" * 513, "too_long", "a source_id over MAX_ID_LENGTH")
    field("lesson-16385", experience, ("content", "lesson"), "l" * 16_385, "too_long", "a text one over MAX_TEXT_LENGTH")
    field("observation-text-1mb-minus", probe, ("observations",),
          [{"text": "t" * 200_000, "basis": "verified", "evidence": []}], "too_long", "a 200,000-character observation")
    tenk = jline(handoff_record(citations=10_000))
    add("citations-10000", tenk, "too_long", "10,000 artifact citations (MAX_HANDOFF_CITATIONS is 64), ~800 KB")
    add("citations-65", jline(handoff_record(citations=65)), "too_long", "65 artifact citations")
    field("checks-300", probe, ("checks",), [check()] * 300, "too_long", "300 checks (MAX_ITEMS is 256)")
    field("evidence-65", probe, ("checks", 0, "evidence"), [{"kind": "exact", "ref": "r"}] * 65, "too_long",
          "65 evidence refs on one check")
    add("memory-citations-2000", jline(handoff_record(memory=2_000)), "too_long", "2,000 memory citations (max 1,024)")
    oversized = jline(mutated(experience, ("value", "content", "lesson"), "x" * 1_100_000))
    add("oversized-record", oversized, "oversized_record", "a 1.1 MB line (over MAX_RECORD_BYTES)")

    # -- §3 immutability: sequences after the record they conflict with ----------------------
    add("identity-conflict-experience", jline(mutated(M4, ("value", "content", "lesson"), "rewritten")), "identity_conflict",
        "M4 r1 again with another lesson: the first version stands", after=1)
    add("identity-conflict-moved", jline(mutated(M4, ("value", "journal_position"), 50)), "identity_conflict",
        "M4 r1 again, identical but at position 50", after=1)
    add("identity-conflict-nfkc-lookalike",
        jline(mutated(M4, ("value", "content", "failure", "signature", "recall_cue"), "Ｓｃｈｅｍａ migration lock timeout")),
        "identity_conflict", "M4 r1 again with a fullwidth cue that normalizes the same: normalize is a comparison key, "
        "never an identity", after=1)
    add("identity-conflict-handoff", jline(mutated(HM1, ("value", "artifact_citations"),
                                                   HM1["value"]["artifact_citations"] * 2)), "identity_conflict",
        "HM1 r1 again citing M4 r1 twice", after=2)
    add("identity-conflict-receipt", jline(mutated(RM1, ("value", "status"), "rejected")), "identity_conflict",
        "RM1 again, now rejected", after=3)
    add("identity-conflict-outcome", jline(mutated(O_PASS, ("value", "status"), "failed")), "identity_conflict",
        "job-pass again, now failed", after=4)
    add("position-conflict-outcome", jline(outcome_record(3, "O-collide")), "position_conflict",
        "a new outcome at RM1's position 3", after=3)
    add("position-conflict-experience", jline(experience_record(1, "E99")), "position_conflict",
        "a new Experience revision at M4's position 1", after=1)
    add("position-conflict-receipt", jline(receipt_record(4, "R-collide")), "position_conflict",
        "a new receipt at job-pass's position 4", after=4)

    # -- §18 review decisions --------------------------------------------------------
    decision = json.loads(REVIEW_LINES[-1])
    everything = len(VALID_RECORDS)  # after RD-1, the decision that stands
    field("review-blank-reason", decision, ("reason",), "\u200b \u2060", "invalid_value",
          "a rejection whose reason is only a zero-width space, a space and a word joiner: blank (contract §19)")
    field("review-no-reason", decision, ("reason",), None, "invalid_value", "a rejection without a reason")
    field("review-reason-too-long", decision, ("reason",), "r" * 16_385, "too_long", "a reason of 16,385 characters (max 16,384)")
    field("review-fix-with-rejected", decision, ("fix_revision",), {"family": "experience", "artifact_id": "M4", "revision": 3},
          "invalid_value", "a fix_revision given with a rejection")
    field("review-fix-a-handoff", mutated(decision, ("value", "decision"), "approved"), ("fix_revision",),
          {"family": "handoff", "artifact_id": "HM1", "revision": 2}, "invalid_value", "a fix_revision that is a Handoff revision")
    field("review-decided-at-local", decision, ("decided_at",), "2025-03-01T10:30:00+01:00", "invalid_value",
          "decided_at with a +01:00 offset: not UTC")
    field("review-decided-at-no-date", decision, ("decided_at",), "2025-02-30T09:30:00Z", "invalid_value",
          "decided_at on 30 February")
    field("review-verdict", decision, ("decision",), "deferred", "invalid_value", "a decision that is neither approved nor rejected")
    field("review-candidate-not-a-digest", decision, ("candidate_id",), "M4 r2", "invalid_value", "a candidate_id that is no digest")
    field("review-reviewer-control", decision, ("reviewer",), "dba\non-call", "invalid_value", "a reviewer id with a line feed")
    add("review-second-decision", jline(mutated(mutated(decision, ("value", "decision_id"), "RD-2"), ("value", "reason"), "again")),
        "already_decided", "a second decision for M4 r2's candidate: RD-1 stands", after=everything)
    add("review-identity-conflict", jline(mutated(decision, ("value", "reason"), "another reason")), "identity_conflict",
        "RD-1 again with another reason", after=everything)
    return entries


# --------------------------------------------------------------------- Kafka records (worker)


def _kafka_entries() -> list[Entry]:
    M4 = VALID_RECORDS[0]
    RM1 = VALID_RECORDS[2]
    probe = outcome_record()
    experience = experience_record(1001, "E-corpus")
    receipt = receipt_record()
    frame = source_event(probe)  # a valid SourceEvent frame (new outcome O-corpus)
    body = frame[5:]
    header = frame[:5]
    # SourceEvent body: topic string, union branch index, then the event, whose
    # first field is scope_id.
    topic_part = avro_string("task-outcomes")
    assert body.startswith(topic_part + zigzag(3) + avro_string(SCOPE))
    event_at = len(topic_part) + 1
    scope_at = event_at + len(avro_string(SCOPE)) - len(SCOPE)
    outcome_frame = per_kind(probe)
    outcome_body = outcome_frame[5:]
    entries: list[Entry] = []

    def add(id_: str, target: str, value: bytes | None, reason: str, note: str, *, key: bytes | None = KEY,
            after: int = 0, defects: Mapping[str, str] | None = None) -> None:
        entries.append(Entry(f"{target}/{id_}", target, key, value, reason, note, after, MappingProxyType(dict(defects or {}))))

    sj = SOURCE_JOURNAL
    # -- framing -------------------------------------------------------------------------
    add("truncated-avro", sj, frame[: len(frame) // 2], "undecodable_avro", "a valid SourceEvent cut in half")
    add("header-only", sj, header, "undecodable_avro", "the 5-byte frame header and no body")
    add("truncated-header", sj, header[:3], "bad_magic_byte", "3 bytes: shorter than the frame header")
    add("trailing-byte", sj, frame + b"\x00", "undecodable_avro", "a valid frame plus one byte")
    add("magic-1", sj, b"\x01" + frame[1:], "bad_magic_byte", "magic byte 1")
    add("magic-ff", sj, b"\xff" + frame[1:], "bad_magic_byte", "magic byte 0xff")
    add("empty-value", sj, b"", "bad_magic_byte", "an empty (not null) value")
    add("json-array", sj, jline(["task-outcomes", probe["value"]]), "invalid_envelope",
        "a JSON array on source-journal: JSON, but not the envelope object (like a journal line)")
    add("json-string", sj, b'"just a string"', "invalid_envelope", "a JSON string on source-journal")
    add("json-deep-array", sj, b"[" * 100_000, "malformed_json", "100,000 nested '[' on source-journal: JSON nested too deeply")
    add("whitespace-then-garbage", sj, b" \r\n\x07garbage", "bad_magic_byte", "JSON whitespace, then byte 0x07")
    add("whitespace-only", sj, b" \t\r\n", "malformed_json", "JSON whitespace only: JSON text without a value")
    add("schema-id-999", sj, b"\x00" + struct.pack(">I", 999) + body, "unknown_schema_id", "frame with schema id 999")
    add("schema-id-max", sj, b"\x00\xff\xff\xff\xff" + body, "unknown_schema_id", "frame with schema id 2^32-1")
    add("schema-of-per-kind-topic", sj, outcome_frame, "unknown_schema_id",
        "a TaskOutcome frame (id 5) on source-journal, which carries SourceEvent (id 1)")
    dead = dead_letter(Coordinates("x", 0, 0, SCOPE), frame, "undecodable_avro", "x").value
    add("dead-letter-fed-back", sj, codec.encode("DeadLetter", dead), "unknown_schema_id",
        "a DeadLetter record (id 10) published back onto the input")
    add("body-of-other-schema", sj, codec.frame("SourceEvent", outcome_body), "undecodable_avro",
        "a TaskOutcome body under the SourceEvent schema id")
    add("union-index-out-of-range", sj, header + topic_part + zigzag(7) + body[event_at:], "undecodable_avro",
        "SourceEvent union branch 7 of 4")
    add("non-utf8-string", sj, header + body[:scope_at] + b"\xff" * len(SCOPE) + body[scope_at + len(SCOPE):],
        "undecodable_avro", "invalid UTF-8 bytes in the Avro scope_id")
    add("cesu8-surrogate-string", sj, header + body[:event_at] + avro_string(b"\xed\xa0\x80") + body[scope_at + len(SCOPE):],
        "undecodable_avro", "a surrogate encoded as UTF-8 in an Avro string")
    add("huge-string-length", sj, header + body[:event_at] + zigzag(2**40) + body[scope_at:], "undecodable_avro",
        "an Avro string length of 2^40")
    add("negative-string-length", sj, header + body[:event_at] + zigzag(-5) + body[scope_at:], "undecodable_avro",
        "a negative Avro string length")
    add("unknown-kind", sj, source_event({"topic": "recurrence-matches", "value": probe["value"]}), "unknown_topic",
        "a SourceEvent whose topic names an output topic")
    add("kind-source-journal", sj, source_event({"topic": "source-journal", "value": probe["value"]}), "unknown_topic",
        "a SourceEvent whose topic is source-journal itself")
    add("kind-union-mismatch", sj, codec.encode("SourceEvent", {"topic": "task-outcomes", "value": (
        "recurrence_ledger.ExperienceRevision", experience["value"])}), "missing_field",
        "topic task-outcomes but the union carries an ExperienceRevision: it lacks the TaskOutcome fields")
    add("tombstone", sj, None, "missing_field", "a null value (tombstone)")
    add("json-envelope-missing-topic", sj, jline({"value": probe["value"]}), "invalid_envelope", "JSON envelope without topic")
    add("json-envelope-topic-number", sj, jline({"topic": 4, "value": probe["value"]}), "invalid_envelope", "a numeric topic")
    add("json-nan", sj, with_position(probe, "NaN"), "malformed_json", "JSON with NaN")
    add("json-not-utf8", sj, jline(probe).replace(b"O-corpus", b"O-\xffcorpus"), "malformed_json", "JSON with invalid UTF-8")
    add("json-huge-int", sj, with_position(probe, "9" * 5000), "invalid_value", "JSON with a 5000-digit integer")
    add("json-20-digit-int", sj, with_position(probe, "1" + "0" * 19), "invalid_value", "JSON with the 20-digit integer 10^19")
    oversized_json = jline(mutated(experience, ("value", "content", "lesson"), "x" * 1_100_000))
    add("json-oversized", sj, oversized_json, "oversized_record", "a 1.1 MB JSON record")
    big_valid = mutated(probe, ("value", "observations"),
                        [{"text": "x" * 16_000, "basis": "declared", "evidence": []}] * 100)
    add("avro-oversized-valid", sj, source_event(big_valid), "oversized_record",
        "a 1.6 MB Avro record within every field bound: over MAX_RECORD_BYTES like its JSON form")

    # -- schema-valid Avro that breaks §3 ----------------------------------------------------
    add("avro-negative-position", sj, source_event(mutated(probe, ("value", "journal_position"), -1)), "invalid_value",
        "an Avro long position of -1")
    add("avro-min-long-position", sj, source_event(mutated(probe, ("value", "journal_position"), -(2**63))), "invalid_value",
        "position -2^63")
    add("avro-revision-zero", sj, source_event(mutated(experience, ("value", "artifact_ref", "revision"), 0)),
        "invalid_value", "revision 0")
    add("avro-citations-10000", sj, source_event(handoff_record(citations=10_000)), "too_long", "10,000 citations in Avro")
    add("avro-cue-100k", sj, source_event(mutated(
        experience, ("value", "content", "failure", "signature", "recall_cue"), "drift " * 20_000)), "too_long",
        "a 120,000-character cue")
    add("avro-cue-zero-width", sj, source_event(mutated(
        experience, ("value", "content", "failure", "signature", "recall_cue"), "\u200b\u200c\u200d")), "invalid_value",
        "a cue of zero-width characters only")
    add("avro-control-in-id", sj, source_event(mutated(probe, ("value", "source_ref", "source_id"), "O\x1b[31m")),
        "invalid_value", "an ANSI escape sequence in a source_id")

    # -- keys (contract §1) -----------------------------------------------------------------
    add("no-key", sj, frame, "key_mismatch", "a valid record without key", key=None)
    add("wrong-key", sj, frame, "key_mismatch", "a valid record keyed by another scope", key=b"other-scope")
    add("non-utf8-key", sj, frame, "key_mismatch", "a key with invalid UTF-8", key=KEY + b"\xff")
    add("key-case", sj, frame, "key_mismatch", "the key in another case", key=SCOPE.upper().encode())
    add("empty-key", sj, frame, "key_mismatch", "an empty (not null) key", key=b"")

    # -- §3 immutability (source-journal only: one partition keeps their order) ---------------
    add("identity-conflict-experience", sj, source_event(mutated(M4, ("value", "content", "lesson"), "rewritten")),
        "identity_conflict", "M4 r1 again with another lesson, in Avro", after=1)
    add("identity-conflict-receipt", sj, source_event(mutated(RM1, ("value", "evidence_status"), "missing")),
        "identity_conflict", "RM1 again with evidence_status missing", after=3)
    add("position-conflict", sj, source_event(outcome_record(2, "O-collide")), "position_conflict",
        "a new outcome at HM1's position 2", after=2)

    # -- per-kind topics ----------------------------------------------------------------------
    to, er, hr, rc = "task-outcomes", "experience-revisions", "handoff-revisions", "handoff-receipts"
    add("wrong-magic", to, b"\x07not avro", "bad_magic_byte", "text that is neither JSON nor a frame")
    add("json-string", to, b'"just a string"', "wrong_type", "a JSON string: JSON, but not an event object")
    add("json-number", to, b" 42\n", "wrong_type", "a JSON number with whitespace around it")
    add("json-true", to, b"true", "wrong_type", "JSON true")
    add("json-null", to, b"null", "wrong_type", "JSON null (not a tombstone: the value has 4 bytes)")
    add("json-array", to, jline([probe["value"]]), "wrong_type", "the event inside a JSON array")
    add("json-deep-array", to, b"[" * 100_000, "malformed_json", "100,000 nested '[': JSON nested too deeply (contract §9)")
    add("json-like-word", to, b"nope", "malformed_json", "starts like JSON null, is not JSON")
    add("schema-of-other-kind", to, per_kind(experience), "unknown_schema_id", "an ExperienceRevision frame on task-outcomes")
    add("source-event-frame", to, frame, "unknown_schema_id", "a SourceEvent frame on a per-kind topic")
    add("truncated", to, outcome_frame[:-3], "undecodable_avro", "a TaskOutcome frame missing its last 3 bytes")
    status_at = len(avro_string(SCOPE)) + len(zigzag(1000)) + 1 + len(avro_string("O-corpus"))
    assert outcome_body[status_at:status_at + 1] == zigzag(1)  # "failed" is symbol 1 of OutcomeStatus
    add("enum-index-out-of-range", to, codec.frame("TaskOutcome", outcome_body[:status_at] + zigzag(57) + outcome_body[status_at + 1:]),
        "undecodable_avro", "OutcomeStatus symbol 57 of 5")
    add("journal-envelope-on-per-kind", to, jline(probe), "missing_field",
        "a journal line (envelope) as a per-kind value: the envelope is read as the event")
    add("tombstone", to, None, "missing_field", "a tombstone on a per-kind topic")
    add("json-unexpected-field", to, jline({**probe["value"], "retries": 3}), "unexpected_field", "JSON with an unknown field")
    add("json-wrong-type", to, jline({**probe["value"], "scope_id": 7}), "wrong_type", "JSON scope_id as a number")
    add("json-enum-wrong-type", to, jline({**probe["value"], "checks": [{**check(), "basis": None}]}), "wrong_type",
        "JSON check basis (an enum) as null")
    add("json-repeated-key", to, jline(probe["value"]).replace(b'"status":"failed"', b'"status":"failed","status":"completed"'),
        "malformed_json", "JSON with the status given twice")
    garbage = b"\x07" + b"A" * 900_000
    add("big-garbage", to, garbage, "bad_magic_byte",
        "900 KB that is neither JSON nor a frame: its dead letter must still fit in a Kafka message")
    add("json-no-key", to, jline(probe["value"]), "key_mismatch", "a valid JSON outcome without key", key=None)
    add("cue-513", er, per_kind(mutated(experience, ("value", "content", "failure", "signature", "recall_cue"), "c" * 513)),
        "too_long", "an Avro cue of 513 characters")
    add("cue-bom-only", er, per_kind(mutated(experience, ("value", "content", "failure", "signature", "recall_cue"), "\ufeff\ufeff")),
        "invalid_value", "an Avro cue of BOMs only")
    add("json-deep-nesting", er, b'{"scope_id":' + b"[" * 100_000 + b"]" * 100_000 + b"}", "malformed_json",
        "100,000 nested arrays as the scope_id")
    add("citations-10000", hr, per_kind(handoff_record(citations=10_000)), "too_long", "10,000 Avro citations")
    add("memory-citations-20000", hr, per_kind(handoff_record(memory=20_000)), "too_long", "20,000 Avro memory citations")
    add("family-experience", hr, per_kind(mutated(handoff_record(), ("value", "artifact_ref", "family"), "experience")),
        "invalid_value", "a Handoff revision whose ref names the experience family")
    add("source-type-outcome", rc, per_kind(mutated(receipt, ("value", "source_ref", "source_type"), "task_outcome")),
        "invalid_value", "a receipt whose source_type is task_outcome")
    receipt_body = per_kind(receipt)[5:]
    add("non-utf8-string", rc, codec.frame("HandoffReceipt", avro_string(b"\xc3\x28" * 6) + receipt_body[len(avro_string(SCOPE)):]),
        "undecodable_avro", "invalid UTF-8 in an Avro scope_id")
    add("wrong-key", rc, per_kind(receipt), "key_mismatch", "a valid receipt keyed by another scope", key=b"billing-api")
    return entries


JOURNAL_ENTRIES: list[Entry] = _journal_entries()
KAFKA_ENTRIES: list[Entry] = _kafka_entries()
CORPUS: list[Entry] = JOURNAL_ENTRIES + KAFKA_ENTRIES
assert len({entry.id for entry in CORPUS}) == len(CORPUS), "corpus ids must be distinct"
assert len({(entry.target, entry.key, entry.value) for entry in CORPUS}) == len(CORPUS), "corpus records must be distinct"


def gap(entry: Entry, index: int) -> int:
    """Where the ``index``-th entry of its list goes among the minimum case's
    records: after ``gap`` of them. Entries spread over every gap, and a
    conflict never comes before the record it conflicts with."""
    return max(entry.after, index % (len(VALID_RECORDS) + 1))


def as_source_journal(entry: Entry) -> tuple[bytes | None, str]:
    """``(key, reason)`` of a journal entry published as is on
    source-journal with the key ``publish`` gives the line
    (``kafka_io.prepare_line``: its scope_id when one can be read, else no
    key), and the reason the worker gives it: the journal's reason when the line is JSON (it starts
    with a UTF-8 BOM, or its first byte after JSON whitespace is ``{``,
    ``[``, ``"``, a digit, ``-``, ``t``, ``f`` or ``n``: contract §9) —
    the worker judges the value before the key — else ``bad_magic_byte``,
    or ``unknown_schema_id`` when it starts with byte 0, which reads as a
    frame header naming id 0."""
    assert entry.target == JOURNAL
    prepared = prepare_line(entry.value)
    if entry.value[:1] == b"\x00":  # read as a frame header with schema id 0
        return prepared.key, "unknown_schema_id"
    first = entry.value.lstrip(b" \t\n\r")[:1]
    is_json = entry.value.startswith(b"\xef\xbb\xbf") or (first != b"" and first in b'{["-0123456789tfn')  # §9
    return prepared.key, (entry.expected_reason if is_json else "bad_magic_byte")


# --------------------------------------------------------------------- the worker's decode path, without a broker


def kafka_ingest(processor: LedgerProcessor, logical_topic: str, key: bytes | None, value: bytes | None,
                 partition: int = 0, offset: int = 0) -> list[Emit]:
    """One Kafka record through the worker's path without a broker
    (``recurrence_ledger.kafka.records.ingest_record``: the value decoded
    and validated, then the key; a bad record becomes one dead letter).
    Anything else raised is a defect and propagates (the worker would park
    it as internal_error)."""
    text_key = key.decode("utf-8", "replace") if key is not None else None
    return ingest_record(processor, logical_topic, key, value, Coordinates(logical_topic, partition, offset, text_key))


def publish_form(line: bytes) -> tuple[bytes, bytes]:
    """``(key, value)`` of a valid journal line as publish_journal writes it
    on source-journal (Avro SourceEvent keyed by scope_id)."""
    record = json.loads(line)
    event = validate(record["topic"], record["value"])
    return event["scope_id"].encode(), codec.encode("SourceEvent", {"topic": record["topic"], "value": event})


def wire_size(emit: Emit) -> int:
    """Bytes of the record the worker would produce for ``emit`` (Avro value
    plus key). Raises what ``codec.encode`` raises when it cannot be encoded."""
    value = codec.encode(catalogue.BY_NAME[emit.topic].schema, emit.value)
    return len(value) + len((emit.key or "").encode("utf-8", "surrogatepass"))


def raw_of(dead: dict) -> bytes:
    """The raw bytes a dead letter carries."""
    return base64.b64decode(dead["raw"])


def kept_raw(value: bytes | None) -> bytes:
    """The raw bytes the dead letter of ``value`` must carry: all of them, or
    the first MAX_DEAD_LETTER_RAW of a bigger record, so that the dead letter
    itself fits in a Kafka message (the original stays at its coordinates)."""
    return (value or b"")[:MAX_DEAD_LETTER_RAW]


# --------------------------------------------------------------------- hostile but valid


class HostileCue(NamedTuple):
    """A valid Experience revision cue and a failed check name: ``matches``
    says whether contract §4's normalize makes them equal (a RecurrenceMatch
    ``matched`` in scope_heads mode) or not (``unmatched``)."""

    id: str
    cue: str
    check_name: str
    matches: bool
    note: str


HOSTILE_VALID_CUES: list[HostileCue] = [
    HostileCue("leading-bom", "\ufeffOpenAPI codegen drift", "OpenAPI codegen drift", True, "a leading BOM (Cf) is stripped"),
    HostileCue("trailing-zwsp", "OpenAPI codegen drift\u200b", "openapi codegen drift", True, "a trailing ZWSP (Cf) is stripped"),
    HostileCue("inner-zwj", "Open\u200dAPI codegen drift", "OpenAPI codegen drift", False,
               "an inner ZWJ is kept: only leading and trailing characters are stripped"),
    HostileCue("inner-zwj-both", "Open\u200dAPI codegen drift", "open\u200dapi CODEGEN drift", True,
               "the same inner ZWJ on both sides matches"),
    HostileCue("inner-zwsp", "OpenAPI\u200bcodegen drift", "OpenAPI codegen drift", False, "an inner ZWSP is not whitespace"),
    HostileCue("fullwidth", "ＯｐｅｎＡＰＩ\u3000ｃｏｄｅｇｅｎ\u3000ｄｒｉｆｔ", "openapi codegen drift", True,
               "fullwidth letters and ideographic spaces fold under NFKC"),
    HostileCue("nbsp-runs", "Port\u00a0\u00a0already \t bound", "port already bound", True,
               "no-break spaces and tabs collapse to one space"),
    HostileCue("sharp-s", "Straße closed", "STRASSE CLOSED", True, "case folding maps ß to ss"),
    HostileCue("ligature", "ﬁle not found", "file not found", True, "NFKC splits the fi ligature"),
    HostileCue("combining-accent", "caf\u00e9 crash", "cafe\u0301 crash", True, "precomposed and decomposed é are equal under NFKC"),
    HostileCue("kelvin-sign", "\u212aelvin overflow", "kelvin overflow", True, "KELVIN SIGN folds to k"),
    HostileCue("circled-digit", "\u2460 failure", "1 failure", True, "circled one is 1 under NFKC"),
    HostileCue("dotted-capital-i", "\u0130stanbul timeout", "istanbul timeout", False,
               "İ folds to i + combining dot above, not to i"),
    HostileCue("cyrillic-homoglyph", "\u041epenAPI codegen drift", "OpenAPI codegen drift", False,
               "a Cyrillic О looks like O but is another letter: no fuzzy or confusable matching"),
    HostileCue("inner-em-dash", "closed\u2014retry", "closed \u2014 retry", False, "inner punctuation is kept, spacing matters"),
    HostileCue("bidi-override-wrapped", "\u202eOpenAPI codegen drift\u202c", "OpenAPI codegen drift", True,
               "RLO / PDF (Cf) around the cue are stripped"),
    HostileCue("leading-nul", "\x00\x07OpenAPI codegen drift", "OpenAPI codegen drift", True,
               "leading control characters (Cc) are stripped; cues are not ids"),
    HostileCue("punctuation-wrapped", "¡¡OpenAPI codegen drift!!", "«OpenAPI codegen drift»", True,
               "leading and trailing punctuation are stripped"),
    HostileCue("nfkc-expanding-512", "\ufdfa" * 512, "\ufdfa" * 512, True,
               "512 characters that NFKC expands 18-fold: the bound counts what was sent"),
    HostileCue("emoji-zwj-sequence", "deploy \U0001F468\u200d\U0001F4BB failed", "Deploy \U0001F468\u200d\U0001F4BB FAILED", True,
               "an emoji ZWJ sequence inside the cue is kept as is"),
]


class Replay(NamedTuple):
    """A record that repeats a minimum-case record (``after`` records in):
    after validation it is identical, so it is a duplicate (contract §3)
    and must emit nothing at all — no dead letter either."""

    id: str
    target: str
    key: bytes | None
    value: bytes
    after: int
    note: str


def _replays() -> list[Replay]:
    lines = valid_lines()
    M4, O_PASS = VALID_RECORDS[0], VALID_RECORDS[3]
    without_defaults = mutated(mutated(O_PASS, ("value", "checks", 0, "details"), delete=True),
                               ("value", "handoff_receipt_ref"), O_PASS["value"]["handoff_receipt_ref"])
    reordered = {"value": dict(reversed(list(M4["value"].items()))), "topic": M4["topic"]}
    _, avro_m4 = publish_form(lines[0])
    return [
        Replay("exact-line", JOURNAL, None, lines[0], 1, "M4 r1's line again, byte for byte"),
        Replay("reordered-keys", JOURNAL, None, json.dumps(reordered, indent=2).replace("\n", " ").encode(), 1,
               "M4 r1 with keys reordered and extra whitespace"),
        Replay("defaults-omitted", JOURNAL, None, jline(without_defaults), 4,
               "job-pass with the check's details (default null) omitted"),
        Replay("ascii-escaped", JOURNAL, None, json.dumps(M4, ensure_ascii=True).encode(), 1, "M4 r1 with \\u escapes"),
        Replay("avro-after-json", SOURCE_JOURNAL, KEY, avro_m4, 1, "M4 r1 again as Avro on source-journal"),
        Replay("json-on-source-journal", SOURCE_JOURNAL, KEY, lines[0], 1, "M4 r1 again as a JSON source-journal value"),
        Replay("per-kind-avro", "experience-revisions", KEY, per_kind(json.loads(lines[0])), 1,
               "M4 r1 again on its per-kind topic"),
    ]


HOSTILE_VALID_REPLAYS: list[Replay] = _replays()


def reason_codes_from_input() -> set[str]:
    """Reason codes of the table in ``processors/recurrence_ledger/ledger/intake.py``'s
    docstring, except internal_error (the core raised: never caused by input
    alone, by definition), too_many_pending (a policy limit reached only
    after thousands of valid waiting candidates; tested with a small limit in
    tests/ledger/test_admission_under_hostile_input.py), unknown_candidate
    (contract §18: a decision whose candidate is not published waits, and is
    dead-lettered by what follows it — the horizon, the end of the journal
    or the candidate; tested in tests/ledger/test_review_decisions.py),
    oversized_output (the
    worker's output limit; tested with a small limit in
    tests/e2e/test_faults.py) and schema_mismatch (only with a Schema
    Registry, which this corpus's fixed-id frames do not use; tested in
    tests/schemas/test_registry_codec.py and tests/e2e/test_schema_registry.py)."""
    from recurrence_ledger.ledger import intake

    table = intake.__doc__[intake.__doc__.index("\nreason ") + 1:]
    codes = set()
    for line in table.splitlines()[2:]:  # after the header row and its rule
        if line.startswith("="):
            break
        if line[:1].strip():  # a continuation line of the meaning column starts with spaces
            codes.add(line.split()[0])
    assert codes, "the reason-code table of processors/recurrence_ledger/ledger/intake.py moved"
    return codes - {"internal_error", "too_many_pending", "oversized_output", "schema_mismatch", "unknown_candidate"}
