"""The secured services deploy/test.sh starts, as pytest fixtures (a
plugin, registered in tests/conftest.py; their markers: tests/plugins/services.py).
Tests never start these services themselves; each fixture fails — never
skips — when its service is not configured or does not answer.

The secured broker (``deploy/kafka.sh --secure``: SASL_SSL with
SCRAM-SHA-512 users admin, ledger and upstream; an SSL listener requiring
client certificates; ACLs enforced, super user admin):

- ``secure`` (session): its client material (:class:`SecureBroker`), from
  ``RL_SECURE_KAFKA_DIR`` (the ``client/`` folder of its run dir). Fails
  when the variable is unset, a file is missing, or the broker does not
  accept the admin within 15 s.
- ``secure_prefix``: a fresh topic prefix; its topics are deleted (as
  admin) afterwards.
- ``scram_user``: ``make(name)`` creates a SCRAM-SHA-512 user of the test's
  own on the running broker (``<name>-<random>``, random password; the
  Admin API's AlterUserScramCredentials, as admin: no deploy change) with a
  properties file like upstream's (:class:`ScramUser`); the users and their
  ACLs are deleted afterwards.

The secured Redis (``deploy/redis.sh --secure``: requirepass for the admin
(the default user), the ACL users ``ledger`` (writer) and ``dashboard``
(read-only) on ``~rl:*``, a password-only port and a TLS port with a
throwaway CA):

- ``secure_redis`` (session): its client material (:class:`SecureRedis`),
  from ``RL_SECURE_REDIS_DIR`` (the ``client/`` folder of its run dir) and
  ``RL_SECURE_REDIS_PORT`` / ``RL_SECURE_REDIS_TLS_PORT``. Fails when a
  variable is unset, a file is missing, or the admin cannot PING both
  ports within 10 s.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from confluent_kafka import KafkaException

from recurrence_ledger.kafka.client_config import KafkaConnection, KafkaConnectionError, check_connection
from recurrence_ledger.kafka.client_properties import load_connection, read_properties
from recurrence_ledger.kafka.kafka_admin import admin_client

# ----------------------------------------------------------------- the secured broker

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


# ----------------------------------------------------------------- the secured Redis

#: Users deploy/redis.sh --secure creates (default: the admin).
USERS = ("default", "ledger", "dashboard")
HOST = "127.0.0.1"


@dataclass(frozen=True)
class SecureRedis:
    """The secured Redis: ``ca`` the CA file, ``passwords[user]`` each
    user's password (for building URLs and for grepping output for
    secrets)."""

    directory: Path
    port: int
    tls_port: int
    ca: Path
    passwords: dict[str, str]

    def url(self, user: str, *, tls: bool = False, ca_in_url: bool = True, password: str | None = None) -> str:
        """``redis://user:password@127.0.0.1:port/0``, or the ``rediss://``
        URL of the TLS port (with ``?ssl_ca_certs=`` unless ``ca_in_url`` is
        False); ``password`` replaces the user's."""
        secret = self.passwords[user] if password is None else password
        if tls:
            return f"rediss://{user}:{secret}@{HOST}:{self.tls_port}/0" + (f"?ssl_ca_certs={self.ca}" if ca_in_url else "")
        return f"redis://{user}:{secret}@{HOST}:{self.port}/0"

    def admin(self) -> redis.Redis:
        """A client as the admin, on the password port."""
        return redis.Redis(host=HOST, port=self.port, password=self.passwords["default"], socket_timeout=10, decode_responses=True)

    @property
    def secrets(self) -> list[str]:
        return list(self.passwords.values())


@pytest.fixture(scope="session")
def secure_redis() -> SecureRedis:
    missing = [name for name in ("RL_SECURE_REDIS_DIR", "RL_SECURE_REDIS_PORT", "RL_SECURE_REDIS_TLS_PORT") if not os.environ.get(name)]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} not set: run the tests with bash deploy/test.sh, or start the secured Redis with "
            "deploy/redis.sh --secure start and `source <run dir>/client/secure.env`"
        )
    directory = Path(os.environ["RL_SECURE_REDIS_DIR"])
    files = [directory / "ca.pem", *(directory / f"{user}.password" for user in USERS)]
    absent = [str(path) for path in files if not path.is_file()]
    if absent:
        pytest.fail(f"the secured Redis's client files are missing: {', '.join(absent)}")
    found = SecureRedis(
        directory, int(os.environ["RL_SECURE_REDIS_PORT"]), int(os.environ["RL_SECURE_REDIS_TLS_PORT"]), directory / "ca.pem",
        {user: (directory / f"{user}.password").read_text().strip() for user in USERS},
    )
    try:
        found.admin().ping()
        redis.Redis.from_url(found.url("default", tls=True), socket_timeout=10).ping()
    except redis.RedisError as error:
        pytest.fail(f"the secured Redis does not answer the admin on ports {found.port} and {found.tls_port}: {type(error).__name__}: {error}")
    return found


# ----------------------------------------------------------------- users of one test


@dataclass(frozen=True)
class ScramUser:
    """A SCRAM user of one test: ``principal`` (``User:NAME``), its
    properties ``file`` (SASL_SSL, like upstream's), ``connection`` and
    ``password``."""

    name: str
    file: Path
    connection: KafkaConnection
    password: str

    @property
    def principal(self) -> str:
        return f"User:{self.name}"


@pytest.fixture
def scram_user(secure: SecureBroker, tmp_path: Path) -> Iterator:
    from confluent_kafka.admin import (
        AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
        UserScramCredentialDeletion, UserScramCredentialUpsertion,
    )

    admin = admin_client(secure.admin)
    made: list[ScramUser] = []

    def make(prefix: str) -> ScramUser:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        password = uuid.uuid4().hex + uuid.uuid4().hex
        upsert = UserScramCredentialUpsertion(name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)
        text = secure.files["upstream"].read_text()
        text = text.replace('username="upstream"', f'username="{name}"').replace(secure.passwords["upstream"], password)
        path = tmp_path / f"{name}.properties"
        path.write_text(text)
        user = ScramUser(name, path, load_connection(None, path, {}), password)
        made.append(user)
        # The broker may take a moment to know a new credential: until it does, authentication fails.
        for attempt in range(20):
            try:
                check_connection(user.connection, timeout=15)
                break
            except KafkaConnectionError:
                if attempt == 19:
                    raise
                time.sleep(0.5)
        return user

    yield make
    for user in made:
        with contextlib.suppress(KafkaException):
            for future in admin.alter_user_scram_credentials([UserScramCredentialDeletion(user.name, ScramMechanism.SCRAM_SHA_512)]).values():
                future.result(timeout=30)
        query = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, user.principal, None, AclOperation.ANY, AclPermissionType.ANY)
        with contextlib.suppress(KafkaException):
            for future in admin.delete_acls([query], request_timeout=30).values():
                future.result(timeout=30)
