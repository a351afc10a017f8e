"""The clients a command opens (its Kafka connection, Schema Registry,
value codec and Redis view) and how their errors reach the user: one red
line (never a secret) and an exit code, 2 for unusable settings, 1 for a
service that does not answer or refuses. Heavy libraries are imported
lazily, when a command needs them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from recurrence_ledger.embedded.output import stdout_console
from recurrence_ledger.settings import kafka_environment, settings

console = stdout_console()


def command_registry(url: str | None, auto_register: bool | None = None, kafka_config: Path | None = None):  # noqa: ANN202 - lazy import
    """The registry settings of a command, or None (fixed-id framing):
    ``--schema-registry-url`` / SCHEMA_REGISTRY_URL, or the registry keys
    (``schema.registry.url``, ``basic.auth.user.info``, …) of the
    ``--kafka-config`` file. Exit 2 for unusable registry settings."""
    from recurrence_ledger.kafka.client_config import ClientConfigError
    from recurrence_ledger.kafka.client_properties import is_registry_key, read_properties
    from recurrence_ledger.serde.registry import registry_settings

    try:
        properties = {k: v for k, v in read_properties(kafka_config).items() if is_registry_key(k)} if kafka_config else {}
        return registry_settings(url, properties, auto_register=auto_register)
    except (ClientConfigError, ValueError) as error:
        console.print(f"error: {error}", style="red", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def command_codec(url: str | None, auto_register: bool | None = None, kafka_config: Path | None = None):  # noqa: ANN202 - lazy import
    """The value codec of a command (recurrence_ledger.serde.codec)."""
    from recurrence_ledger.serde.codec import make_codec

    return make_codec(command_registry(url, auto_register, kafka_config))


@contextlib.contextmanager
def reporting_kafka_errors() -> Iterator[None]:
    """Turn the errors a user can cause (missing topics, no broker, a topic
    outside the catalogue, a Schema Registry that refuses or does not
    answer, values framed for another codec, records a publish could not
    deliver) into one red line and exit code 1."""
    from confluent_kafka import KafkaException

    from recurrence_ledger.kafka.kafka_io import PublishError, UndecodableRecord
    from recurrence_ledger.serde.codec import RegistryError

    try:
        yield
    except (LookupError, KafkaException, TimeoutError, RegistryError, UndecodableRecord, PublishError) as error:
        message = error.args[0] if isinstance(error, KafkaException) and error.args else error
        console.print(f"error: {message}", style="red", highlight=False)
        raise typer.Exit(1) from None


@contextlib.contextmanager
def reporting_run_errors(journal: object, out: Path) -> Iterator[None]:
    """Turn what stops an embedded run from outside into one red line and
    exit code 1, instead of a traceback: the loss of a ``--jobs`` process
    (killed, e.g. by the kernel when memory runs short; nothing of the run is
    kept), or a file error reading ``journal`` or writing into ``out`` (a
    folder that cannot be written, a full disk, an I/O error)."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        yield
    except BrokenProcessPool:
        console.print("error: a --jobs process ended abruptly (killed? out of memory?); the run was stopped: "
                      "run it again, with fewer --jobs if memory is short", style="red", highlight=False)
        raise typer.Exit(1) from None
    except OSError as error:
        console.print(f"error: {error} (the run reads {journal} and writes into {out}/: check the journal, or choose another folder with --out DIR)",
                      style="red", highlight=False)
        raise typer.Exit(1) from None


def kafka_connection(bootstrap: str | None, kafka_config: Path | None):  # noqa: ANN202 - lazy import
    """The command's Kafka connection (``--bootstrap`` + ``--kafka-config`` +
    KAFKA_* overrides), checked within client_config.CONNECT_TIMEOUT_S:
    exit 2 for unusable settings, 1 when the cluster cannot be reached or
    refuses the credentials or the TLS handshake. Never prints a secret."""
    from recurrence_ledger.kafka.client_config import ClientConfigError, KafkaConnectionError, check_connection
    from recurrence_ledger.kafka.client_properties import load_connection

    try:
        connection = load_connection(bootstrap, kafka_config, kafka_environment())
        check_connection(connection)
    except ClientConfigError as error:
        console.print(f"error: {error}", style="red", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except KafkaConnectionError as error:
        console.print(f"error: {error}", style="red", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    return connection


@contextlib.contextmanager
def refusing_to_start(*errors: type[Exception]) -> Iterator[None]:
    """Turn a refusal to start (topics not co-partitioned, a state built on
    another Unicode version, contract §10, or under another holdout policy,
    §21.5) into one red line and exit code 2."""
    from recurrence_ledger.ledger.state import HoldoutPolicyChanged, UnicodeVersionChanged

    try:
        yield
    except (UnicodeVersionChanged, HoldoutPolicyChanged, *errors) as error:
        console.print(f"refusing to start: {error}", style="red", highlight=False)
        raise typer.Exit(2) from None


def command_redis_view(redis_url: str, namespace: str):  # noqa: ANN202 - lazy import
    """The RedisView of a command (the CA of RL_REDIS_CA_FILE for a
    rediss:// URL without one); exit 2 for a URL or CA file redis-py cannot
    use."""
    from recurrence_ledger.read.projection import RedisView

    try:
        return RedisView(redis_url, namespace=namespace, ca_file=settings().redis_ca_file)
    except ValueError as error:
        console.print(f"error: {error}", style="red", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def check_redis_url(redis_url: str) -> None:
    """Refuse, before anything starts, a Redis URL (or CA file) redis-py
    cannot use — exit 2 with one ``error:`` line, as ``serve`` does. Makes
    a client without connecting (read.connect.redis_client never connects)."""
    from recurrence_ledger.read.connect import redis_client

    try:
        redis_client(redis_url, ca_file=settings().redis_ca_file)
    except ValueError as error:
        console.print(f"error: {error}", style="red", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def check_port(port: int | None, host: str, what: str = "metrics") -> None:
    """Refuse, before anything starts, a ``--metrics-port`` (or, with
    ``what``, another listening port: ``serve --port``) that cannot be
    served on ``host`` (another process has it, or no interface has that
    address) — exit 2 with one line, instead of a traceback from deep in
    the run. The port is bound and let go at once as prometheus-client's
    server (and uvicorn) binds it: the address family of ``host``'s first
    passive address (an IPv6 host too), SO_REUSEADDR. Port 0 (any free
    port) is not checked."""
    import socket

    if not port:
        return
    try:
        family, *_, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as error:  # socket.gaierror too: a host that does not resolve
        console.print(f"refusing to start: cannot serve {what} on {host}:{port}: {error.strerror or error}",
                      style="red", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def redis_errors() -> tuple[type[BaseException], ...]:
    """The errors of a Redis that does not answer (redis imported lazily)."""
    import redis

    return (redis.RedisError, OSError)


@contextlib.contextmanager
def reporting_redis_errors(view: Any) -> Iterator[None]:
    """Turn a Redis that does not answer, refuses the credentials, a
    permission or the TLS handshake into one red line (the URL without its
    password) and exit code 1. ``view``: the RedisView (imported lazily)."""
    from recurrence_ledger.read.connect import describe_error

    try:
        yield
    except redis_errors() as error:
        console.print(f"error: Redis view {view.namespace} at {view.where}: {describe_error(error)}", style="red", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
