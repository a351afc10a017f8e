"""Publishing events to the ledger's input topics (contract §1, §9): the
:class:`Publisher` of the client library.

One idempotent confluent-kafka producer (``acks=all``, the Java client's
partitioner — the configuration of ``recurrence-ledger publish``,
``kafka_io.publisher_config``), connected like every command: bootstrap
servers plus a Java-style ``client.properties`` file (SASL, TLS) and
``KAFKA_*`` overrides (``kafka.client_properties.load_connection``). Values
are Avro in the Confluent frame — with the ids of a Schema Registry
(``serde.registry.RegistryCodec``), or the catalogue's fixed ids without
one — or canonical JSON: exactly what the worker decodes
(``serde.codec``). Every record is keyed by its scope_id, on
``source-journal`` or on the per-kind topics (``kafka_io.prepare_event``).

Nothing connects until the publisher is opened (``with Publisher(...)``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from recurrence_ledger.catalogue import INPUT_TOPICS, SOURCE_JOURNAL
from recurrence_ledger.client.events import event, kind_of
from recurrence_ledger.kafka.client_config import KafkaConnection, check_connection
from recurrence_ledger.kafka.client_properties import is_registry_key, load_connection, read_properties
from recurrence_ledger.kafka.kafka_io import FLUSH_TIMEOUT_S, PublishError, prepare_event, produce, publisher_config, require_topics
from recurrence_ledger.ledger.models import Value
from recurrence_ledger.serde.codec import AVRO, JSON, Codec, make_codec
from recurrence_ledger.serde.registry import RegistrySettings, registry_settings
from recurrence_ledger.settings import kafka_environment, settings

log = logging.getLogger(__name__)

#: The per-kind input topics (every input topic but ``source-journal``).
PER_KIND_TOPICS = tuple(name for name in INPUT_TOPICS if name != SOURCE_JOURNAL)


class Publisher:
    """Publishes the six input events (built with
    ``recurrence_ledger.client``'s constructors) to a ledger deployment.

    ``bootstrap``: Kafka bootstrap servers (wins over the file's
    ``bootstrap.servers``); ``kafka_config``: a Java-style client
    properties file (``security.protocol``, ``sasl.*``, ``ssl.*``, and the
    Schema Registry's ``schema.registry.url`` / ``basic.auth.user.info``);
    ``environ``: ``KAFKA_*`` overrides (as the CLI reads from its
    environment; none when None); ``schema_registry_url``: the registry
    (wins over the file's; without any, the catalogue's fixed schema ids);
    ``auto_register``: register the schemas on first use (the file's
    ``auto.register.schemas``, else True); ``per_kind``: each event on its
    kind's topic instead of ``source-journal``; ``topic_prefix``: the
    deployment's prefix; ``fmt``: ``"avro"`` or ``"json"``;
    ``flush_timeout``: seconds :meth:`flush` waits.

    Use as a context manager: opening checks the connection
    (``KafkaConnectionError``) and that the target topics exist
    (LookupError otherwise: topics are never auto-created), leaving flushes.
    :meth:`publish` sends one event; a delivery that fails is raised as
    ``kafka_io.PublishError`` by the next :meth:`publish` or :meth:`flush`.
    Raises ``kafka.client_config.ClientConfigError`` for unusable
    connection settings, ValueError for an unknown ``fmt`` or registry
    setting.
    """

    def __init__(
        self,
        bootstrap: str | None = None,
        *,
        kafka_config: Path | None = None,
        environ: Mapping[str, str] | None = None,
        schema_registry_url: str | None = None,
        auto_register: bool | None = None,
        per_kind: bool = False,
        topic_prefix: str = "",
        fmt: str = AVRO,
        flush_timeout: float = FLUSH_TIMEOUT_S,
    ):
        if fmt not in (AVRO, JSON):
            raise ValueError(f"fmt must be {AVRO!r} or {JSON!r}, not {fmt!r}")
        self.connection: KafkaConnection = load_connection(bootstrap, kafka_config, environ)
        properties = {k: v for k, v in read_properties(kafka_config).items() if is_registry_key(k)} if kafka_config else {}
        self.registry: RegistrySettings | None = registry_settings(schema_registry_url, properties, auto_register=auto_register)
        self.codec: Codec = make_codec(self.registry)
        self.per_kind, self.topic_prefix, self.fmt, self.flush_timeout = per_kind, topic_prefix, fmt, flush_timeout
        self.delivered = 0
        self.failures: list[tuple[int | None, str, str]] = []
        self._producer: Producer | None = None

    @classmethod
    def from_environment(cls, **options: Any) -> Publisher:
        """A publisher configured from the environment the way the CLI is:
        ``KAFKA_BOOTSTRAP_SERVERS``, ``KAFKA_CONFIG_FILE``,
        ``SCHEMA_REGISTRY_URL``, ``RL_TOPIC_PREFIX`` and the ``KAFKA_*``
        overrides (``recurrence_ledger.settings``); ``options`` win."""
        current = settings()
        defaults: dict[str, Any] = {
            "bootstrap": current.bootstrap_servers,
            "kafka_config": current.kafka_config_file,
            "environ": kafka_environment(),
            "schema_registry_url": current.schema_registry_url,
            "topic_prefix": current.topic_prefix,
        }
        return cls(**{**defaults, **options})

    def __repr__(self) -> str:
        return f"Publisher({self.connection!r}, registry={self.registry!r}, per_kind={self.per_kind}, topic_prefix={self.topic_prefix!r})"

    @property
    def topics(self) -> tuple[str, ...]:
        """The physical topics this publisher writes to."""
        names = PER_KIND_TOPICS if self.per_kind else (SOURCE_JOURNAL,)
        return tuple(self.topic_prefix + name for name in names)

    def open(self) -> Publisher:
        """Check the connection as every command does (raises
        ``kafka.client_config.KafkaConnectionError`` when the brokers cannot
        be reached or refuse the credentials or the TLS handshake), create
        the producer and check that the target topics exist (LookupError
        otherwise). Called by ``with``."""
        if self._producer is None:
            check_connection(self.connection)
            producer = Producer(publisher_config(self.connection))
            require_topics(producer, self.topics)
            self._producer = producer
        return self

    def __enter__(self) -> Publisher:
        return self.open()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        if error is None:
            self.flush()
        else:  # deliver what was sent, but let the caller's error through
            try:
                self.flush()
            except PublishError as failed:
                log.error("publisher closed by %s; %s", type(error).__name__, failed)

    def publish(self, value: Value) -> None:
        """Send one event (a model built by this library's constructors),
        keyed by its scope_id, to ``source-journal`` (a SourceEvent) or its
        kind's topic. Returns once the record is queued; :meth:`flush` waits
        for the broker.

        The event is validated again first (an instance built with
        ``model_construct`` is not trusted): raises
        ``client.events.EventRefused`` naming the contract rule, TypeError
        for anything but the six event models, PublishError for an earlier
        delivery that failed or a record the producer refuses (too large),
        RegistryError when the Schema Registry refuses or does not answer.
        """
        if self._producer is None:
            raise RuntimeError("the publisher is not open: use `with Publisher(...) as publisher:` or call open()")
        self._raise_failures()
        kind = kind_of(value)
        checked = event(kind, value).model_dump(mode="json")
        record = prepare_event(kind, checked, self.fmt, self.per_kind, self.codec, self.topic_prefix)
        topic = self.topic_prefix + record.topic
        try:
            produce(self._producer, topic, record.key, record.value, on_delivery=functools.partial(self._delivered, topic))
        except KafkaException as refused:  # refused locally, e.g. MSG_SIZE_TOO_LARGE
            text = refused.args[0].str()
            raise PublishError(f"{topic}: {text}", [(None, topic, text)]) from None

    def flush(self, timeout: float | None = None) -> int:
        """Wait until every record sent is acknowledged (at most ``timeout``
        seconds, default ``flush_timeout``). Returns the number of records
        delivered so far. Raises PublishError when any record was not
        delivered or is still undelivered after the timeout."""
        if self._producer is None:
            return self.delivered
        seconds = self.flush_timeout if timeout is None else timeout
        remaining = self._producer.flush(seconds)
        if remaining:
            self.failures.append((None, ",".join(self.topics), f"{remaining} records still undelivered after {seconds:.0f} s"))
        self._raise_failures()
        return self.delivered

    def _delivered(self, topic: str, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failures.append((None, topic, error.str()))
        else:
            self.delivered += 1

    def _raise_failures(self) -> None:
        if self.failures:
            failures, self.failures = self.failures, []
            first = "; ".join(f"{topic}: {text}" for _, topic, text in failures[:3])
            raise PublishError(f"{len(failures)} records were not delivered ({first})", failures)
