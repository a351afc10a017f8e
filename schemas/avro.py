"""Avro codecs for the wire contract in ``schemas/*.avsc`` (fastavro).

Each ``.avsc`` file is named ``recurrence_ledger.<Name>.avsc`` so that
``fastavro.schema.load_schema`` resolves named types across files. Values are
the same JSON-compatible dicts the core emits (pydantic ``model_dump(mode=
"json")`` shape); optional fields are Avro unions with null.

Framing (the Confluent Schema Registry wire format) lives in
``schemas.codec``; this module only encodes/decodes the Avro body.
"""

from __future__ import annotations

import io
from functools import cache
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import load_schema

SCHEMA_DIR = Path(__file__).resolve().parent
NAMESPACE = "recurrence_ledger"

#: Top-level record schemas that travel on topics (CONTRACT §1).
TOPIC_RECORDS = (
    "SourceEvent",
    "ExperienceRevision",
    "HandoffRevision",
    "HandoffReceipt",
    "TaskOutcome",
    "RecurrenceMatch",
    "RecurrenceObservation",
    "ReviewCandidate",
    "ScopeStatistics",
    "DeadLetter",
)


@cache
def parsed_schema(name: str) -> Any:
    """The parsed fastavro schema of record ``name`` (e.g. "TaskOutcome").

    Raises FileNotFoundError for an unknown name and
    fastavro.schema.SchemaParseException for an invalid file.
    """
    return load_schema(str(SCHEMA_DIR / f"{NAMESPACE}.{name}.avsc"))


def encode(name: str, value: dict) -> bytes:
    """Schemaless Avro body of ``value`` under schema ``name``.

    Raises ValueError/TypeError (fastavro) when ``value`` does not fit.
    """
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, parsed_schema(name), value, strict=True)
    return buffer.getvalue()


def decode(name: str, body: bytes) -> dict:
    """Decode a schemaless Avro body under schema ``name``.

    Raises EOFError, ValueError, UnicodeDecodeError or similar on bad bytes;
    the caller maps any exception to ``undecodable_avro`` (CONTRACT §9).
    """
    stream = io.BytesIO(body)
    value = fastavro.schemaless_reader(stream, parsed_schema(name))
    if stream.tell() != len(body):
        raise ValueError(f"{len(body) - stream.tell()} trailing bytes after the Avro record")
    return value
