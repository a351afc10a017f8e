"""Fixtures for tests against the secured broker that deploy/test.sh starts
with ``deploy/kafka.sh --secure`` (SASL_SSL with SCRAM-SHA-512 users admin,
ledger and upstream; an SSL listener requiring client certificates; ACLs
enforced, super user admin).

- ``secure`` (session): the broker's client material, from
  ``RL_SECURE_KAFKA_DIR`` (the ``client/`` folder of its run dir). Fails —
  never skips — when the variable is unset, a file is missing, or the broker
  does not accept the admin within 15 s. Tests never start a broker
  themselves.
- ``secure_prefix``: a fresh topic prefix; its topics are deleted (as admin)
  afterwards.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from recurrence_ledger.runtime.client_config import KafkaConnection, check_connection
from recurrence_ledger.runtime.client_properties import load_connection, read_properties
from recurrence_ledger.runtime.kafka_admin import admin_client

#: Properties files deploy/kafka.sh --secure writes.
PROPERTIES = ("admin", "ledger", "upstream", "ledger-mtls")


@dataclass(frozen=True)
class SecureBroker:
    """The secured broker's client material: ``files[name]`` is the
    properties file of ``admin``, ``ledger``, ``upstream`` (SASL_SSL) or
    ``ledger-mtls`` (SSL with the client certificate CN=ledger);
    ``connections[name]`` the same, loaded; ``passwords[name]`` the SCRAM
    password of a user (for the tests that grep output for secrets)."""

    directory: Path
    files: dict[str, Path]
    connections: dict[str, KafkaConnection]
    passwords: dict[str, str]

    @property
    def admin(self) -> KafkaConnection:
        return self.connections["admin"]


@pytest.fixture(scope="session")
def secure() -> SecureBroker:
    where = os.environ.get("RL_SECURE_KAFKA_DIR")
    if not where:
        pytest.fail(
            "RL_SECURE_KAFKA_DIR is not set: run the tests with bash deploy/test.sh, or start the secured broker with "
            "deploy/kafka.sh --secure start and `source <run dir>/client/secure.env`"
        )
    directory = Path(where)
    files = {name: directory / f"{name}.properties" for name in PROPERTIES}
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        pytest.fail(f"the secured broker's client files are missing: {', '.join(missing)}")
    connections = {name: load_connection(None, path, {}) for name, path in files.items()}
    try:
        check_connection(connections["admin"], timeout=15)
    except Exception as error:  # noqa: BLE001 - any failure fails the session
        pytest.fail(f"the secured broker does not accept the admin: {error}")
    passwords = {name: connections[name].settings["sasl.password"] for name in ("admin", "ledger", "upstream")}
    assert all(read_properties(files[name]) for name in files)
    return SecureBroker(directory, files, connections, passwords)


def delete_prefix(admin: KafkaConnection, prefix: str) -> None:
    """Best effort: delete every topic under ``prefix`` as admin."""
    client = admin_client(admin)
    mine = [name for name in client.list_topics(timeout=10).topics if name.startswith(prefix)]
    for future in (client.delete_topics(mine, operation_timeout=30).values() if mine else ()):
        with contextlib.suppress(KafkaException):
            future.result(timeout=30)


@pytest.fixture
def secure_prefix(secure: SecureBroker) -> Iterator[str]:
    prefix = f"s{uuid.uuid4().hex[:8]}."
    yield prefix
    delete_prefix(secure.admin, prefix)
