"""How every Kafka client of the package connects and what it is told: one
place for the librdkafka configuration of every Producer, Consumer and
AdminClient.

- :class:`KafkaConnection`: bootstrap servers plus librdkafka security
  settings (read from a Java-style client properties file and ``KAFKA_*``
  variables by ``recurrence_ledger.kafka.client_properties``), whose
  ``repr`` never shows a secret (:data:`SECRET_KEYS`); :data:`Bootstrap`,
  what the package's Kafka functions accept (a plain bootstrap string, as
  before, or a connection);
- :func:`client_config`: the base dict (bootstrap + security) every client
  starts from — an AdminClient's whole configuration;
- :func:`consumer_config`: every consumer's — the base, its group, and
  ``isolation.level=read_committed`` (no consumer of the package ever reads
  a record of an aborted or open transaction), no auto-commit;
- :func:`producer_config`: every producer's — the base, idempotent with
  ``acks=all``, and a transactional id for the worker's.

The Schema Registry's client settings (``schema.registry.*``,
``basic.auth.*`` in the same properties file) never go into these dicts:
librdkafka refuses a property it does not know ("No such configuration
property"), so they are read apart into
``recurrence_ledger.serde.registry.RegistrySettings``
(``client_properties.is_registry_key``).

:func:`check_connection` tells within a bounded time whether a connection
works, turning librdkafka's error events (authentication, TLS, all brokers
down) into one clear :class:`KafkaConnectionError`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from recurrence_ledger.errors import RecurrenceLedgerError

#: Settings whose values are secrets: never printed, logged or put in an error.
SECRET_KEYS = frozenset(
    {
        "sasl.password",
        "sasl.jaas.config",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.key.pem",
        "ssl.keystore.key",
    }
)
#: Seconds :func:`check_connection` waits for a broker by default.
CONNECT_TIMEOUT_S = 15.0


class ClientConfigError(RecurrenceLedgerError, ValueError):
    """A client properties file or ``KAFKA_*`` variable that cannot be used:
    an unsupported key, a bad value, an unreadable file. The message names
    the key and where it came from, never a secret's value."""


class KafkaConnectionError(RecurrenceLedgerError, ConnectionError):
    """No working connection to Kafka: the brokers cannot be reached, or
    refuse the credentials or the TLS handshake."""


def _redact(settings: Mapping[str, Any]) -> dict[str, Any]:
    return {key: ("***" if key in SECRET_KEYS else value) for key, value in settings.items()}


@dataclass(frozen=True)
class KafkaConnection:
    """Bootstrap servers plus translated librdkafka security settings.

    ``settings`` never holds ``bootstrap.servers``. ``repr``/``str`` show
    the bootstrap and every key, with the values of :data:`SECRET_KEYS`
    replaced by ``***``; ``source`` names where the settings came from
    (for messages)."""

    bootstrap: str
    settings: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    def __repr__(self) -> str:
        return f"KafkaConnection(bootstrap={self.bootstrap!r}, settings={_redact(self.settings)!r})"

    __str__ = __repr__

    @property
    def description(self) -> str:
        """What a message may say about this connection: bootstrap, protocol, mechanism, user."""
        parts = [self.settings.get("security.protocol", "PLAINTEXT")]
        if "sasl.mechanisms" in self.settings:
            parts.append(self.settings["sasl.mechanisms"])
        if "sasl.username" in self.settings:
            parts.append(f"user {self.settings['sasl.username']}")
        return f"{self.bootstrap} ({', '.join(parts)})"


#: What the package's Kafka functions accept as their ``bootstrap`` argument.
Bootstrap = Union[str, KafkaConnection]


def client_config(target: Bootstrap) -> dict[str, Any]:
    """The base librdkafka configuration of every Producer, Consumer and
    AdminClient: ``{"bootstrap.servers": …}`` plus, for a
    :class:`KafkaConnection`, its security settings. A new dict each call;
    callers add their own client settings."""
    if isinstance(target, KafkaConnection):
        return {"bootstrap.servers": target.bootstrap, **target.settings}
    return {"bootstrap.servers": target}


def bootstrap_of(target: Bootstrap) -> str:
    """The bootstrap servers string of ``target`` (safe to print)."""
    return target.bootstrap if isinstance(target, KafkaConnection) else target


#: What every consumer of the package reads: only records of committed
#: transactions. librdkafka's default is read_committed already
#: (CONFIGURATION.md, ``isolation.level``), the Java client's is
#: read_uncommitted: said here, so that no reader depends on which client
#: wrote its settings.
ISOLATION_LEVEL = "read_committed"
#: Linger of every producer (ms): batches for a few ms instead of sending
#: each record alone.
PRODUCER_LINGER_MS = 5


def consumer_config(target: Bootstrap, group_id: str, settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The configuration of a Consumer: :func:`client_config` plus
    ``group.id`` = ``group_id``, ``isolation.level`` = :data:`ISOLATION_LEVEL`
    and ``enable.auto.commit`` = False (the package's consumers commit
    explicitly — in a transaction, or synchronously after a batch — or
    never), then the consumer's own ``settings`` (offset reset, EOF events,
    fetch wait, session, …). A group id is always needed: confluent-kafka
    refuses to create a Consumer without one ("group.id must be set"), even
    one that only assigns partitions and never joins its group.
    Raises ValueError when ``settings`` would read uncommitted records."""
    config = {**client_config(target), "group.id": group_id, "isolation.level": ISOLATION_LEVEL, "enable.auto.commit": False, **(settings or {})}
    if config["isolation.level"] != ISOLATION_LEVEL:
        raise ValueError(f"every consumer of the package reads with isolation.level={ISOLATION_LEVEL}")
    return config


def producer_config(target: Bootstrap, transactional_id: str | None = None, settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The configuration of a Producer: :func:`client_config` plus
    ``enable.idempotence`` (no duplicate and no reordering on retries) with
    ``acks=all`` (acknowledged by every in-sync replica; librdkafka sets it
    for an idempotent producer anyway, CONFIGURATION.md,
    ``enable.idempotence``), ``linger.ms`` = :data:`PRODUCER_LINGER_MS`,
    and with ``transactional_id`` its ``transactional.id`` (which librdkafka
    accepts only with idempotence on: "`transactional.id` requires
    `enable.idempotence=true`"), then the producer's own ``settings``."""
    config: dict[str, Any] = {**client_config(target), "enable.idempotence": True, "acks": "all", "linger.ms": PRODUCER_LINGER_MS}
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
    return {**config, **(settings or {})}


# -- checking ------------------------------------------------------------------------------

#: librdkafka error codes that no retry will cure: wrong credentials, a
#: certificate that does not verify.
_HOPELESS = frozenset({KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._INVALID_ARG})


def check_connection(target: Bootstrap, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Connect to the cluster once and read its metadata, within ``timeout``
    seconds. librdkafka reports failures as error events (error_cb) while it
    keeps retrying; an authentication or TLS error ends the check at once,
    and a cluster that does not answer (``_TRANSPORT``, ``_ALL_BROKERS_DOWN``,
    an unresolvable name) ends it at the timeout. Raises
    KafkaConnectionError with the bootstrap and librdkafka's own words (no
    secret), ClientConfigError when librdkafka refuses a setting."""
    events: list[KafkaError] = []
    config = {
        **client_config(target),
        "error_cb": events.append,
        "socket.connection.setup.timeout.ms": int(min(timeout, 30) * 1000),
        # The failures are reported once, below: not librdkafka's log lines
        # for every reconnect attempt.
        "log_level": 0,
    }
    where = target.description if isinstance(target, KafkaConnection) else target
    try:
        admin = AdminClient(config)
    except KafkaException as error:
        raise ClientConfigError(f"Kafka client settings refused by librdkafka: {error.args[0].str()}") from None
    deadline = time.monotonic() + timeout
    last: KafkaError | None = None
    while True:
        try:
            admin.list_topics(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
            return
        except KafkaException as error:
            last = error.args[0]
        admin.poll(0)
        for event in events:
            if event.code() in _HOPELESS or event.fatal():
                raise KafkaConnectionError(f"cannot connect to Kafka at {where}: {event.str()}")
        if time.monotonic() >= deadline:
            seen = list(dict.fromkeys(re.sub(r" \(after \d+ms in state \w+\)", "", event.str()) for event in events[-6:]))
            seen = seen or ([last.str()] if last is not None else [])
            raise KafkaConnectionError(f"no Kafka broker answered at {where} within {timeout:.0f} s: {'; '.join(seen) or 'timed out'}")
