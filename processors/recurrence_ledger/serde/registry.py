"""Avro values framed with Schema Registry ids (confluent-kafka's serdes).

With a Schema Registry (``--schema-registry-url`` / ``SCHEMA_REGISTRY_URL``)
the ledger speaks the standard Confluent Avro protocol instead of the fixed
ids of ``recurrence_ledger.catalogue.SCHEMA_IDS``:

- **subjects**: TopicNameStrategy, ``<physical topic>-value`` (the topic
  name with the deployment prefix);
- **outputs** are written with ``confluent_kafka.schema_registry.avro.
  AvroSerializer`` under our ``.avsc`` schemas (made self-contained by
  ``recurrence_ledger.serde.avro.schema_json``): registered on first use,
  or with auto-registration off only looked up, so each value carries the
  id the registry assigned;
- **inputs** may carry any registered schema id: ``AvroDeserializer`` with
  our schema as reader schema resolves the writer's schema to ours (Avro
  schema resolution), so a producer whose schema adds an optional field
  with a default still decodes. A writer schema that does not resolve is
  dead-lettered as ``schema_mismatch`` (its id in the message), an id the
  registry does not know as ``unknown_schema_id``. The decoded record then
  goes through the same intake validation as any other;
- **subjects' compatibility**: ``topics create`` registers our schema
  under every catalogue subject and sets it to BACKWARD
  (:func:`configure_subjects`).
- **deleting**: ``topics delete`` deletes the subjects of the deployment's
  deleted topics, soft then permanently (:func:`delete_subjects`).

A registry that does not answer is not a bad record: :class:`RegistryError`
(``recurrence_ledger.serde.wire``, imported by ``serde.codec``) is raised and nothing is
dead-lettered. The client caches every schema it has seen, so a running
worker needs the registry only for schema ids it has not met yet.

Client settings (basic auth, TLS) come from the Kafka client properties
names Confluent's clients use; see :func:`registry_settings`.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, prefix_schema_id_deserializer
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import OAuthTokenError, SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext
from fastavro import parse_schema
from fastavro.read import SchemaResolutionError

from recurrence_ledger.ledger.intake import BadRecord
from recurrence_ledger.redact import redact_url
from recurrence_ledger.serde import avro
from recurrence_ledger.serde.wire import Codec, RegistryError, schema_id_of
from recurrence_ledger import catalogue

try:  # the HTTP library the client uses (httpx2 or httpx)
    from confluent_kafka.schema_registry.common._httpx_compat import httpx as _httpx

    _UNREACHABLE: tuple[type[BaseException], ...] = (_httpx.HTTPError, OSError, OAuthTokenError)
except ImportError:  # pragma: no cover - older confluent-kafka
    _UNREACHABLE = (OSError, OAuthTokenError)

#: Compatibility level ``topics create`` sets on the catalogue's subjects.
BACKWARD = "BACKWARD"
#: The registry's error code for a subject it does not have (HTTP 404).
SUBJECT_NOT_FOUND = 40401
#: Seconds one registry request may take (the client's default is no limit).
REQUEST_TIMEOUT_S = 10.0

#: Property names (as in a Kafka client properties file; Confluent's clients
#: use the same) → SchemaRegistryClient configuration keys.
CLIENT_PROPERTIES: dict[str, str] = {
    "basic.auth.user.info": "basic.auth.user.info",
    "schema.registry.basic.auth.user.info": "basic.auth.user.info",
    "schema.registry.ssl.ca.location": "ssl.ca.location",
    "schema.registry.ssl.certificate.location": "ssl.certificate.location",
    "schema.registry.ssl.key.location": "ssl.key.location",
    "schema.registry.ssl.key.password": "ssl.key.password",
}
URL_PROPERTY = "schema.registry.url"
AUTO_REGISTER_PROPERTY = "auto.register.schemas"
#: Java clients pair basic.auth.user.info with this; USER_INFO (and URL:
#: credentials in the URL) is what the Python client does anyway.
CREDENTIALS_SOURCE_PROPERTY = "basic.auth.credentials.source"


@dataclass(frozen=True)
class RegistrySettings:
    """Where the Schema Registry is and how the ledger uses it.

    ``url``: base URL of the Confluent-compatible API (several, comma-separated,
    are tried in turn). ``auto_register``: register our output schemas on
    first use (True) or only look them up (False: they must have been
    registered, e.g. by ``topics create``). ``client``: further
    SchemaRegistryClient settings (``basic.auth.user.info``, ``ssl.*``),
    kept out of ``repr`` (credentials).
    """

    url: str
    auto_register: bool = True
    client: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:  # a URL may carry user:password (basic.auth.credentials.source=URL)
        urls = ",".join(redact_url(url.strip()) for url in self.url.split(","))
        return f"RegistrySettings(url={urls!r}, auto_register={self.auto_register!r})"

    def client_config(self) -> dict:
        """The SchemaRegistryClient configuration."""
        return {"url": self.url, "timeout": REQUEST_TIMEOUT_S, **self.client}


def _boolean(key: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"{key} must be true or false, not {text!r}")
    return lowered == "true"


def registry_settings(
    url: str | None = None, properties: Mapping[str, str] | None = None, auto_register: bool | None = None
) -> RegistrySettings | None:
    """The registry settings of a command, or None for no registry (the
    fixed-id framing).

    ``url`` (``--schema-registry-url`` / ``SCHEMA_REGISTRY_URL``) wins over
    the ``schema.registry.url`` of ``properties``, a Kafka client
    properties mapping, of which these keys are read (the others are the
    Kafka client's):

    - ``schema.registry.url``;
    - ``basic.auth.user.info`` (or ``schema.registry.basic.auth.user.info``):
      ``user:password``; ``basic.auth.credentials.source`` may say
      ``USER_INFO`` or ``URL`` (credentials in the URL);
    - ``schema.registry.ssl.ca.location``, ``schema.registry.ssl.certificate.location``,
      ``schema.registry.ssl.key.location``, ``schema.registry.ssl.key.password``
      (PEM files; Java key stores are not supported by the Python client);
    - ``auto.register.schemas`` (``true``/``false``), unless
      ``auto_register`` (``--auto-register/--no-auto-register``) is given.

    Raises ValueError for any other ``schema.registry.*`` key or a bad value,
    so that a setting is never silently ignored.
    """
    properties = properties or {}
    url = url or properties.get(URL_PROPERTY)
    if not url:
        return None
    client: dict[str, str] = {}
    from_properties = True
    for key, value in properties.items():
        if key in CLIENT_PROPERTIES:
            client[CLIENT_PROPERTIES[key]] = value
        elif key == CREDENTIALS_SOURCE_PROPERTY:
            if value.strip().upper() not in ("USER_INFO", "URL"):
                raise ValueError(f"{key}={value} is not supported: use USER_INFO with basic.auth.user.info, or URL")
        elif key == AUTO_REGISTER_PROPERTY:
            from_properties = _boolean(key, value)
        elif key.startswith("schema.registry.") and key != URL_PROPERTY:
            supported = ", ".join(sorted([URL_PROPERTY, *CLIENT_PROPERTIES]))
            raise ValueError(f"unsupported Schema Registry property {key} (supported: {supported})")
    return RegistrySettings(url, from_properties if auto_register is None else auto_register, client)


def subject(physical_topic: str) -> str:
    """The value subject of a topic (TopicNameStrategy)."""
    return f"{physical_topic}-value"


def _refusal(what: str, error: BaseException) -> RegistryError:
    if isinstance(error, SchemaRegistryError):
        return RegistryError(f"{what}: the Schema Registry answered HTTP {error.http_status_code} "
                             f"(error code {error.error_code}): {error.error_message}")
    return RegistryError(f"{what}: the Schema Registry did not answer: {type(error).__name__}: {error}")


class RegistryCodec(Codec):
    """Avro values framed with the ids of a Schema Registry (module
    docstring). ``client`` replaces the one built from ``settings`` (tests
    pass confluent-kafka's mock client)."""

    def __init__(self, settings: RegistrySettings, client: SchemaRegistryClient | None = None):
        self.settings = settings
        self.client = client if client is not None else SchemaRegistryClient.new_client(settings.client_config())
        self._serializers: dict[tuple[str, str], AvroSerializer] = {}
        self._readers: dict[str, AvroDeserializer] = {}
        #: the Avro body the reader of this thread decoded last (:meth:`_body_stream`)
        self._bodies = threading.local()
        #: schema id -> None when it parses as Avro, else why not
        self._writer_problems: dict[int, str | None] = {}

    # -- encoding -------------------------------------------------------------------
    def _serializer(self, schema: str, topic: str) -> AvroSerializer:
        serializer = self._serializers.get((schema, topic))
        if serializer is None:
            serializer = AvroSerializer(
                self.client,
                avro.schema_json(schema),
                conf={
                    "auto.register.schemas": self.settings.auto_register,
                    "subject.name.strategy.type": "TOPIC",
                    "validate.strict": True,
                },
            )
            self._serializers[(schema, topic)] = serializer
        return serializer

    def _encode_avro(self, schema: str, value: dict, topic: str | None) -> bytes:
        if not topic:
            raise ValueError("the registry codec needs the physical topic to name the subject")
        serializer = self._serializer(schema, topic)
        try:
            framed = serializer(avro.with_branches(schema, value), SerializationContext(topic, MessageField.VALUE))
        except SchemaRegistryError as error:
            raise _refusal(f"{subject(topic)}: {schema}", error) from error
        except _UNREACHABLE as error:
            raise _refusal(f"{subject(topic)}: {schema}", error) from error
        assert framed is not None
        return framed

    def prepare(self, schemas_by_topic: dict[str, str]) -> dict[str, int]:
        """Register (or, without auto-registration, look up) each topic's
        schema under its subject now, so that a refusal stops a worker
        before it consumes anything. Returns each topic's schema id.

        Raises RegistryError naming the subject when the registry refuses
        (an incompatible schema: HTTP 409; not registered while
        auto-registration is off: HTTP 404) or does not answer.
        """
        ids = {}
        for topic, schema in schemas_by_topic.items():
            ids[topic] = self.register(topic, schema)
        return ids

    def register(self, topic: str, schema: str) -> int:
        """The id of our ``schema`` under ``topic``'s subject: registered
        when auto-registration is on, else looked up. A registration refused
        with HTTP 409 (or 500: Apicurio, its insert losing the race) is looked up before it counts as a refusal: some
        registries (Apicurio's Confluent API) answer 409 "already exists" to
        all but one of several processes registering a new subject at once
        (the worker processes of one deployment starting together), where
        Confluent's registers the same schema idempotently; an incompatible
        schema is not found and stays refused. Raises RegistryError."""
        name = subject(topic)
        definition = Schema(avro.schema_json(schema), "AVRO")
        try:
            if self.settings.auto_register:
                try:
                    registered = self.client.register_schema_full_response(name, definition)
                except SchemaRegistryError as conflict:
                    if conflict.http_status_code not in (409, 500):  # Apicurio: 500 when its insert loses the race (a unique key)
                        raise
                    try:
                        registered = self.client.lookup_schema(name, definition)
                    except SchemaRegistryError:
                        raise conflict from None
            else:
                registered = self.client.lookup_schema(name, definition)
        except SchemaRegistryError as error:
            hint = "" if self.settings.auto_register or error.http_status_code != 404 else (
                " (auto-registration is off: register it first, e.g. with `recurrence-ledger topics create`)")
            raise _refusal(f"{name}: our {schema} schema{hint}", error) from error
        except _UNREACHABLE as error:
            raise _refusal(f"{name}: our {schema} schema", error) from error
        assert registered.schema_id is not None
        return registered.schema_id

    # -- decoding -------------------------------------------------------------------
    def _reader(self, schema: str) -> AvroDeserializer:
        reader = self._readers.get(schema)
        if reader is None:
            reader = AvroDeserializer(self.client, avro.schema_json(schema),
                                      conf={"subject.name.strategy.type": "TOPIC", "schema.id.deserializer": self._body_stream})
            self._readers[schema] = reader
        return reader

    def _body_stream(self, payload: bytes, ctx: SerializationContext | None, schema_id: object) -> io.BytesIO:
        """The readers' schema id step (the framing's prefix, as
        confluent-kafka reads it), remembering the body's stream so that
        :meth:`_decode_avro` can see whether the record used all of it:
        the deserializer itself ignores bytes left after the record."""
        stream = prefix_schema_id_deserializer(payload, ctx, schema_id)
        self._bodies.stream = stream
        return stream

    def _writer_problem(self, schema_id: int) -> str | None:
        """Why the writer schema ``schema_id`` cannot be an Avro writer
        schema, or None. Raises BadRecord(unknown_schema_id), RegistryError."""
        if schema_id in self._writer_problems:
            return self._writer_problems[schema_id]
        try:
            writer = self.client.get_schema(schema_id)
        except SchemaRegistryError as error:
            if error.http_status_code == 404:
                raise BadRecord("unknown_schema_id", f"schema id {schema_id} is not in the Schema Registry") from None
            raise _refusal(f"schema id {schema_id}", error) from error
        except _UNREACHABLE as error:
            raise _refusal(f"schema id {schema_id}", error) from error
        problem = None
        if (writer.schema_type or "AVRO") != "AVRO":
            problem = f"a {writer.schema_type} schema, not Avro"
        elif not writer.references:  # referenced types are resolved by the deserializer itself
            try:
                parse_schema(json.loads(writer.schema_str or ""))
            except Exception as error:  # invalid JSON or Avro: fastavro raises several types
                problem = f"not a valid Avro schema ({type(error).__name__}: {error})"
        self._writer_problems[schema_id] = problem
        return problem

    def _decode_avro(self, raw: bytes, expected: tuple[str, ...]) -> dict:
        schema_id = schema_id_of(raw)
        problem = self._writer_problem(schema_id)
        if problem is not None:
            raise BadRecord("schema_mismatch", f"schema id {schema_id} is {problem}"[:500])
        mismatches = []
        for schema in expected:
            try:
                value = self._reader(schema)(raw, None)
            except SchemaResolutionError as error:
                mismatches.append(f"{schema}: {error}")
                continue
            except SchemaRegistryError as error:  # a referenced schema is missing
                raise _refusal(f"schema id {schema_id}", error) from error
            except _UNREACHABLE as error:
                raise _refusal(f"schema id {schema_id}", error) from error
            except Exception as error:  # fastavro raises many types on hostile bytes
                raise BadRecord(
                    "undecodable_avro", f"Avro body under schema id {schema_id} does not decode as {schema}: {type(error).__name__}: {error}"[:500]
                ) from None
            if not isinstance(value, dict):
                raise BadRecord("schema_mismatch", f"schema id {schema_id} does not describe a record")
            stream = self._bodies.stream
            left = len(stream.getbuffer()) - stream.tell()
            if left:  # as serde.avro.decode refuses them on the fixed-id path
                raise BadRecord("undecodable_avro", f"Avro body under schema id {schema_id} decodes as {schema} with {left} trailing bytes")
            return value
        raise BadRecord(
            "schema_mismatch", f"the writer schema id {schema_id} does not resolve to our {' or '.join(expected)} schema: {'; '.join(mismatches)}"[:500]
        )


def configure_subjects(codec: RegistryCodec, topic_prefix: str = "", level: str = BACKWARD) -> dict[str, str]:
    """For every catalogue topic under ``topic_prefix``: register our schema
    under its subject (with auto-registration off: look it up, and a subject
    without it is only configured) and set the subject's compatibility to
    ``level``. Backs ``topics create`` with a registry. Returns ``subject ->
    "id N, BACKWARD"``.

    Registering the input topics' schemas too publishes the contract: a
    producer can take ``<topic>-value``'s latest version instead of copying
    the ``.avsc`` files. Raises RegistryError when the registry refuses or
    does not answer.
    """
    result = {}
    for spec in catalogue.CATALOGUE:
        topic = catalogue.physical(spec.name, topic_prefix)
        name = subject(topic)
        try:
            schema_id: int | None = codec.register(topic, spec.schema)
        except RegistryError:
            if codec.settings.auto_register:
                raise
            schema_id = None
        try:
            codec.client.set_compatibility(name, level)
        except SchemaRegistryError as error:
            raise _refusal(f"{name}: compatibility {level}", error) from error
        except _UNREACHABLE as error:
            raise _refusal(f"{name}: compatibility {level}", error) from error
        result[name] = f"id {schema_id}, {level}" if schema_id is not None else f"not registered, {level}"
    return result


def delete_subjects(settings: RegistrySettings, topics: Iterable[str], client: SchemaRegistryClient | None = None) -> dict[str, str]:
    """Delete the value subject of each of ``topics`` (physical names; only
    those subjects, nothing else of the registry): a soft delete, then the
    permanent delete, so that the registry forgets them and a new deployment
    under the same prefix starts from no schema. Backs ``topics delete``
    with a registry. Returns ``subject -> "deleted (versions 1, 2)"`` |
    ``"absent"`` (the registry has no such subject) | the registry's refusal.

    A subject soft-deleted before (the soft delete is refused: HTTP 404 with
    error code 40404 on Confluent's registry, 400 on Apicurio's) is still
    permanently deleted. Raises RegistryError when the registry does not
    answer (every further subject would wait for it too).
    """
    client = client if client is not None else SchemaRegistryClient.new_client(settings.client_config())
    result: dict[str, str] = {}
    for topic in topics:
        name = subject(topic)
        try:
            try:
                soft: list[int] = client.delete_subject(name)
            except SchemaRegistryError as error:
                if error.error_code == SUBJECT_NOT_FOUND:
                    result[name] = "absent"
                    continue
                soft = []  # soft-deleted before, or refused: the permanent delete says which
            versions = client.delete_subject(name, permanent=True)
        except SchemaRegistryError as error:
            result[name] = "absent" if error.error_code == SUBJECT_NOT_FOUND else str(_refusal(f"{name}: delete", error))
            continue
        except _UNREACHABLE as error:
            raise _refusal(f"{name}: delete", error) from error
        deleted = soft or versions
        result[name] = f"deleted (versions {', '.join(str(version) for version in deleted)})" if deleted else "absent"
    return result
