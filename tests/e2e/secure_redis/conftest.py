"""Fixtures for tests against the secured Redis that deploy/test.sh starts
with ``deploy/redis.sh --secure``: requirepass for the admin (the default
user), the ACL users ``ledger`` (writer) and ``dashboard`` (read-only) on
``~rl:*``, a password-only port and a TLS port with a throwaway CA.

- ``secure_redis`` (session): its client material, from
  ``RL_SECURE_REDIS_DIR`` (the ``client/`` folder of its run dir) and
  ``RL_SECURE_REDIS_PORT`` / ``RL_SECURE_REDIS_TLS_PORT``. Fails — never
  skips — when a variable is unset, a file is missing, or the admin cannot
  PING both ports within 10 s. Tests never start a Redis themselves.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

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
