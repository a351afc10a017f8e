"""Fixtures for tests against the real broker started by deploy/services.sh.

- ``bootstrap`` (session): ``KAFKA_BOOTSTRAP_SERVERS``. Fails — never skips —
  when it is unset or the broker does not answer within 10 s: a broker test
  that silently skips proves nothing.
- ``redis_url`` (session): ``REDIS_URL``; fails the same way when Redis does
  not answer.
- ``admin`` (session): an AdminClient on that broker.
- ``schema_registry_url`` (session): ``SCHEMA_REGISTRY_URL`` (taken out of
  the environment by tests/conftest.py); fails the same way when it is unset
  or ``GET /subjects`` does not answer.
- ``topic_prefix``: a fresh ``"t<8 hex>."`` per test, so tests (and other
  engineers' runs on the same broker) never share a topic; the test's topics
  are deleted at teardown (best effort).
- ``catalogue_topics``: ``catalogue_topics(partitions=3, extra=())`` creates
  every contract §1 topic under ``topic_prefix`` and returns the status map
  of ``recurrence_ledger.runtime.kafka_admin.create_topics``.

Helpers: :func:`topic_configs` (a topic's configs as the broker reports
them) and :func:`topic_names` (the broker's topic names).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from uuid import uuid4

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from recurrence_ledger.runtime.kafka_admin import create_topics
from tests import conftest as shared
from tests.e2e import harness

#: Seconds the broker has to answer before the session fails.
BROKER_TIMEOUT_S = 10.0


def topic_names(admin: AdminClient) -> set[str]:
    """Every topic name on the broker (unfiltered metadata: a request naming
    a topic would auto-create it on this broker)."""
    return set(admin.list_topics(timeout=BROKER_TIMEOUT_S).topics)


def topic_configs(admin: AdminClient, physical_topic: str) -> dict[str, str]:
    """``config name -> value`` of a topic as the broker describes it
    (defaults included). Raises KafkaException for an unknown topic."""
    resource = ConfigResource(ResourceType.TOPIC, physical_topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=BROKER_TIMEOUT_S)
    return {name: entry.value for name, entry in entries.items()}


@pytest.fixture(scope="session")
def bootstrap() -> str:
    """``host:port`` of the broker; fails the test when there is none."""
    servers = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not servers:
        pytest.fail('KAFKA_BOOTSTRAP_SERVERS is not set: start the broker with env_lines="$(bash deploy/services.sh up)"; eval "$env_lines"')
    try:
        AdminClient({"bootstrap.servers": servers}).list_topics(timeout=BROKER_TIMEOUT_S)
    except KafkaException as error:
        pytest.fail(f"Kafka broker at {servers} did not answer within {BROKER_TIMEOUT_S:.0f} s: {error}")
    return servers


@pytest.fixture(scope="session")
def redis_url() -> str:
    """``redis://…`` of the test Redis; fails the test when there is none."""
    import redis

    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.fail('REDIS_URL is not set: start Redis with env_lines="$(bash deploy/services.sh up)"; eval "$env_lines"')
    try:
        redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2).ping()
    except redis.exceptions.RedisError as error:
        pytest.fail(f"Redis at {url} did not answer: {error}")
    return url


@pytest.fixture(scope="session")
def schema_registry_url() -> str:
    """Base URL of the Schema Registry's Confluent API; fails the test when
    there is none."""
    import httpx

    url = shared.SCHEMA_REGISTRY_URL
    if not url:
        pytest.fail('SCHEMA_REGISTRY_URL is not set: start the registry with env_lines="$(bash deploy/services.sh up)"; eval "$env_lines"')
    try:
        httpx.get(f"{url.rstrip('/')}/subjects", timeout=BROKER_TIMEOUT_S).raise_for_status()
    except httpx.HTTPError as error:
        pytest.fail(f"Schema Registry at {url} did not answer GET /subjects: {error}")
    return url


@pytest.fixture(scope="session")
def admin(bootstrap: str) -> AdminClient:
    """An AdminClient on the test broker."""
    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture
def topic_prefix(bootstrap: str) -> Iterable[str]:
    """A topic prefix unique to this test; its topics are deleted afterwards."""
    prefix = f"t{uuid4().hex[:8]}."
    yield prefix
    harness.remove_prefix(bootstrap, prefix)


@pytest.fixture
def catalogue_topics(bootstrap: str, topic_prefix: str) -> Callable[..., dict[str, str]]:
    """``create(partitions=3, extra=())``: create the catalogue's topics
    under ``topic_prefix`` (see recurrence_ledger.runtime.kafka_admin.create_topics)."""

    def create(partitions: int = 3, extra: Iterable[tuple[str, dict]] = ()) -> dict[str, str]:
        return create_topics(bootstrap, partitions, topic_prefix, extra=extra)

    return create
