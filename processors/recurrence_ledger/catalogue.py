"""The topic catalogue (contract §1): every topic the ledger reads or writes,
with its key, value schema, cleanup policy and retention.

The catalogue is data: ``topics/catalogue.toml``, shipped in the package
through the link ``processors/recurrence_ledger/topics`` (package data
``topics/*.toml``), read and checked once when this module is imported
(:func:`load`; a broken file raises :class:`CatalogueError`). Every topic
name is written there once; this module gives each its Python name
(``SOURCE_JOURNAL``, ``MATCHES``…), which every other module imports.
``topics create``/``list``/``delete``, the ACL printer, the Schema
Registry subjects and the topic table of docs/contract.md §1
(:func:`markdown_table`) all come from it.

A deployment may prefix every name (``--topic-prefix`` / ``RL_TOPIC_PREFIX``,
e.g. "prod."; the prefix is passed in, this module reads no environment).
Input topics must all have the same partition count (co-partitioning by
scope_id); output topics get the same count so a scope's outputs stay on
the partition of its inputs.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, model_validator
from pydantic.dataclasses import dataclass

from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.wording import counted

#: The catalogue file (topics/catalogue.toml in the repository).
CATALOGUE_FILE = Path(__file__).resolve().parent / "topics" / "catalogue.toml"

#: Retention for "long retention" input topics and append-only ledgers: -1 = forever.
FOREVER = -1
SEVEN_DAYS_MS = 7 * 24 * 3600 * 1000
#: Largest record the ledger's topics and producers accept (bytes): the
#: topics' max.message.bytes and the producers' message.max.bytes.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
#: Room left in a message for the key and the record overhead (bytes).
RECORD_OVERHEAD_BYTES = 64 * 1024
#: Default largest output value the worker produces (bytes).
DEFAULT_MAX_OUTPUT_BYTES = MAX_MESSAGE_BYTES - RECORD_OVERHEAD_BYTES


class CatalogueError(RecurrenceLedgerError):
    """The topic catalogue file is missing, is not TOML, or breaks its rules
    (a field missing, unknown or of the wrong type; a name, Python name or
    schema id used twice; a direction that does not fit the role). The
    message names the file and every problem."""


_Text = Annotated[StrictStr, Field(min_length=1)]


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class TopicSpec:
    """One topic of contract §1: one ``[[topic]]`` of the catalogue file.

    ``name``: logical name. ``direction``: "in" or "out". ``key``: what the
    record key is. ``schema``: Avro record name under schemas/ (the value).
    ``cleanup_policy``: "delete" or "compact". ``retention_ms``: -1 forever.
    ``schema_id``: the id written in the Confluent wire-format frame.
    ``constant``: its Python name in this module. ``role``: "input",
    "fact" (a ledger fact), "view", "dead-letter" or "repartition" (direction
    "internal": the worker's own repartition topic, contract §23.5). ``contract``,
    ``about``: the contract section of the value and a note, for the docs.
    """

    name: Annotated[StrictStr, Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]
    direction: Literal["in", "out", "internal"]
    key: _Text
    schema: Annotated[StrictStr, Field(pattern=r"^[A-Z][A-Za-z0-9]*$")]
    cleanup_policy: Literal["delete", "compact"]
    retention_ms: Annotated[StrictInt, Field(ge=FOREVER)]
    schema_id: Annotated[StrictInt, Field(ge=1, lt=2**31)]
    constant: Annotated[StrictStr, Field(pattern=r"^[A-Z][A-Z0-9_]*$")]
    role: Literal["input", "fact", "view", "dead-letter", "repartition"]
    contract: StrictStr = ""
    about: StrictStr = ""

    def config(self) -> dict[str, str]:
        """Topic configs for AdminClient.create_topics."""
        config = {"cleanup.policy": self.cleanup_policy, "retention.ms": str(self.retention_ms)}
        if self.direction != "in":
            # A CandidateSet carries a scope's whole frozen scope_heads set
            # (contract §6), which passes 1 MiB at ~25k heads in a scope.
            config["max.message.bytes"] = str(MAX_MESSAGE_BYTES)
        if self.cleanup_policy == "compact":
            config.pop("retention.ms")
            config["min.cleanable.dirty.ratio"] = "0.1"
        return config


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class PreviousSchema:
    """An earlier form of a record (``[[previous_schema]]``), still read and
    never written: its id, record name and schema file
    ``schemas/recurrence_ledger.<file>.avsc``."""

    schema_id: Annotated[StrictInt, Field(ge=1, lt=2**31)]
    schema: _Text
    file: _Text


class Catalogue(BaseModel):
    """The catalogue file, checked: topics in catalogue order and the
    previous schema ids."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    topic: Annotated[tuple[TopicSpec, ...], Field(min_length=1)]
    previous_schema: tuple[PreviousSchema, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Catalogue:
        problems = []
        for field in ("name", "constant"):
            values = [getattr(spec, field) for spec in self.topic]
            problems += [f"{field} {value!r} is used by more than one topic" for value in sorted({v for v in values if values.count(v) > 1})]
        schema_by_id: dict[int, str] = {}
        id_by_schema: dict[str, int] = {}
        for spec in self.topic:
            if (spec.direction == "in") != (spec.role == "input"):
                problems.append(f"topic {spec.name!r}: direction {spec.direction!r} does not fit role {spec.role!r}")
            elif (spec.direction == "internal") != (spec.role == "repartition"):
                problems.append(f"topic {spec.name!r}: direction {spec.direction!r} does not fit role {spec.role!r}")
            if schema_by_id.setdefault(spec.schema_id, spec.schema) != spec.schema:
                problems.append(f"schema id {spec.schema_id} is given to {schema_by_id[spec.schema_id]!r} and {spec.schema!r}")
            if id_by_schema.setdefault(spec.schema, spec.schema_id) != spec.schema_id:
                problems.append(f"schema {spec.schema!r} has two schema ids, {id_by_schema[spec.schema]} and {spec.schema_id}")
        for previous in self.previous_schema:
            if previous.schema_id in schema_by_id:
                problems.append(f"previous schema id {previous.schema_id} is also a current schema id")
            if previous.schema not in id_by_schema:
                problems.append(f"previous schema id {previous.schema_id}: {previous.schema!r} is the schema of no topic")
        if problems:
            raise ValueError("; ".join(problems))
        return self


def load(path: Path = CATALOGUE_FILE) -> Catalogue:
    """Read and check a catalogue file (TOML). Raises CatalogueError naming
    the file and, for a file that breaks the rules, every problem with
    where it is (``topic 14 (dead-letter).schema_id: …``)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise CatalogueError(f"topic catalogue {path}: {error}") from None
    try:
        return Catalogue.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(f"{_where(data, problem['loc'])}: {problem['msg']}" for problem in error.errors(include_url=False))
        raise CatalogueError(f"topic catalogue {path}: {problems}") from None


def _where(data: dict, loc: tuple) -> str:
    """A validation error's location in the file's words: ``[[topic]]``
    entries by number (from 1) and name."""
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int) and parts:
            entries = data.get(parts[-1])
            entry = entries[part] if isinstance(entries, list) and part < len(entries) else None
            name = entry.get("name") if isinstance(entry, dict) else None
            parts[-1] += f" {part + 1}" + (f" ({name})" if isinstance(name, str) else "")
        else:
            parts.append(str(part))
    return ".".join(parts) or "file"


_LOADED = load()
CATALOGUE: tuple[TopicSpec, ...] = _LOADED.topic
_NAMES: dict[str, str] = {spec.constant: spec.name for spec in CATALOGUE}


def _name(constant: str) -> str:
    try:
        return _NAMES[constant]
    except KeyError:
        raise CatalogueError(f"topic catalogue {CATALOGUE_FILE}: no topic has constant = {constant!r}") from None


# Logical topic names (contract §1), from the file.
SOURCE_JOURNAL = _name("SOURCE_JOURNAL")
EXPERIENCE_REVISIONS = _name("EXPERIENCE_REVISIONS")
HANDOFF_REVISIONS = _name("HANDOFF_REVISIONS")
HANDOFF_RECEIPTS = _name("HANDOFF_RECEIPTS")
TASK_OUTCOMES = _name("TASK_OUTCOMES")
EXPERIENCE_CANDIDATES = _name("EXPERIENCE_CANDIDATES")
REVIEW_DECISIONS = _name("REVIEW_DECISIONS")
MATCHES = _name("MATCHES")
OBSERVATIONS = _name("OBSERVATIONS")
REVIEW_CANDIDATES = _name("REVIEW_CANDIDATES")
HOLDOUT_OBSERVATIONS = _name("HOLDOUT_OBSERVATIONS")
STATISTICS = _name("STATISTICS")
REVISION_STATISTICS = _name("REVISION_STATISTICS")
REVIEW_STATUS = _name("REVIEW_STATUS")
ADMISSION_DECISIONS = _name("ADMISSION_DECISIONS")
CANDIDATE_SETS = _name("CANDIDATE_SETS")
SIGNATURE_PATTERNS = _name("SIGNATURE_PATTERNS")
PATTERN_CANDIDATES = _name("PATTERN_CANDIDATES")
PATTERN_REPARTITION = _name("PATTERN_REPARTITION")
DEAD_LETTER = _name("DEAD_LETTER")

#: Schema ids of the Confluent wire-format frame, by record name, in id
#: order. Without a Schema Registry these fixed ids are the registry
#: (``recurrence_ledger.serde.codec``); a deployment with a registry
#: registers schemas/*.avsc under these ids' subjects.
SCHEMA_IDS: dict[str, int] = dict(sorted(((spec.schema, spec.schema_id) for spec in CATALOGUE), key=lambda item: item[1]))
#: Ids of earlier forms of a record, still read and never written: id →
#: (record name, schema file ``schemas/recurrence_ledger.<file>.avsc``).
#: RecurrenceMatches written before rev. 2 (candidate_refs always a list)
#: stay readable on their topic.
PREVIOUS_SCHEMA_IDS: dict[int, tuple[str, str]] = {previous.schema_id: (previous.schema, previous.file) for previous in _LOADED.previous_schema}

BY_NAME: dict[str, TopicSpec] = {spec.name: spec for spec in CATALOGUE}
INPUT_TOPICS: tuple[str, ...] = tuple(spec.name for spec in CATALOGUE if spec.direction == "in")
#: Output topics in catalogue order: the order of the embedded runner's files
#: and of every per-topic listing.
OUTPUT_TOPICS: tuple[str, ...] = tuple(spec.name for spec in CATALOGUE if spec.direction == "out")
#: Internal topics (direction "internal"): written and read by the worker
#: itself — the pattern stage's repartition topic (contract §23.5).
INTERNAL_TOPICS: tuple[str, ...] = tuple(spec.name for spec in CATALOGUE if spec.direction == "internal")
#: The immutable ledger facts (contract §10): compared byte for byte between runners.
LEDGER_TOPICS: tuple[str, ...] = tuple(spec.name for spec in CATALOGUE if spec.role == "fact")
#: The views (compacted tables, contract §8): compared by final value per key.
VIEW_TOPICS: tuple[str, ...] = tuple(spec.name for spec in CATALOGUE if spec.role == "view")
#: What the view follower reads (``recurrence_ledger.read.follower``): the
#: views (the signature patterns of contract §23 included: projected per
#: pattern group) and the ledger topics its read models are built from.
FOLLOWED_TOPICS: tuple[str, ...] = (*VIEW_TOPICS, OBSERVATIONS, REVIEW_CANDIDATES)
SCHEMA_BY_ID: dict[int, str] = {schema_id: name for name, schema_id in SCHEMA_IDS.items()}


def changelog_name(app_id: str) -> str:
    """Logical name of a deployment's compacted state changelog (the worker's
    store; Kafka Streams' ``<application.id>-<store>-changelog``)."""
    return f"{app_id}-ledger-state-changelog"


def pattern_changelog_name(app_id: str) -> str:
    """Logical name of the pattern stage's compacted state changelog
    (contract §23.5: the second stage's own store)."""
    return f"{app_id}-pattern-state-changelog"


def replay_group(group_id: str) -> str:
    """Consumer group of the replay jobs of the deployment whose group is
    ``group_id`` (it commits no offsets)."""
    return f"{group_id}-replay"


def view_follower_group(app_id: str, topic_prefix: str = "") -> str:
    """Consumer group of a deployment's view followers (``view follow``, or
    in a worker's process): ``<prefix><app_id>-view``; it commits its
    offsets there."""
    return physical(f"{app_id}-view", topic_prefix)


def physical(name: str, topic_prefix: str) -> str:
    """The Kafka topic name of logical topic ``name`` in the deployment whose
    prefix is ``topic_prefix`` ("" for none)."""
    return topic_prefix + name


def logical(physical_name: str, topic_prefix: str) -> str:
    """The logical name of a physical topic (inverse of :func:`physical`).
    Raises KeyError for a topic outside the catalogue."""
    if not physical_name.startswith(topic_prefix) or physical_name[len(topic_prefix):] not in BY_NAME:
        raise KeyError(physical_name)
    return physical_name[len(topic_prefix):]


_ROLE_NOTES = {"fact": "ledger fact", "view": "view"}


def _retention(spec: TopicSpec) -> str:
    if spec.cleanup_policy == "compact":
        return "compact"
    if spec.retention_ms == FOREVER:
        return "delete (kept forever)"
    weeks, rest = divmod(spec.retention_ms, SEVEN_DAYS_MS)
    if rest or not weeks:
        return f"delete ({spec.retention_ms} ms)"
    return f"delete ({counted(weeks, 'week')})"


def _value(spec: TopicSpec) -> str:
    notes = [note for note in (_ROLE_NOTES.get(spec.role, ""), spec.about) if note]
    section = f" ({spec.contract})" if spec.contract else ""
    return f"{spec.schema}{section}" + (f": {', '.join(notes)}" if notes else "")


def _schema_id(spec: TopicSpec) -> str:
    earlier = sorted(schema_id for schema_id, (schema, _) in PREVIOUS_SCHEMA_IDS.items() if schema == spec.schema)
    return str(spec.schema_id) + (f" (earlier: {', '.join(map(str, earlier))})" if earlier else "")


def markdown_table() -> str:
    """The topic table of docs/contract.md §1 (Markdown, one row per topic
    in catalogue order, ending in a newline): topic, direction, record key,
    value, cleanup and default retention, fixed schema id. The doc holds
    it verbatim (tests/test_catalogue.py)."""
    rows = [
        "| topic | direction | record key | value | cleanup (default retention) | fixed schema id |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for spec in CATALOGUE:
        rows.append(f"| `{spec.name}` | {spec.direction} | {spec.key} | {_value(spec)} | {_retention(spec)} | {_schema_id(spec)} |")
    return "\n".join(rows) + "\n"
