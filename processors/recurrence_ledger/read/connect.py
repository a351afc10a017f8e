"""Connecting to the Redis of the view, and saying where without a secret.

Every Redis client of the product (the worker's ``RedisView``, the API's
``ViewReader``, the ``view`` / ``rank`` / ``stats`` / ``rebuild`` commands)
is made by :func:`redis_client` from a redis-py URL:

- ``redis://[[user]:password@]host[:port][/db]`` — a password, or an ACL
  user and its password (Redis 6+);
- ``rediss://…`` — the same over TLS; the server's certificate is verified
  (``ssl_cert_reqs=required``) and so is its host name. The CA that signed
  it, when it is not in the system's trust store, goes in the URL
  (``?ssl_ca_certs=/path/ca.pem``) or in ``RL_REDIS_CA_FILE``
  (``recurrence_ledger.settings``), which callers pass as ``ca_file``; the
  URL's value wins. Other redis-py URL query parameters (``ssl_certfile``
  and ``ssl_keyfile`` for a client certificate, ``ssl_check_hostname``, …)
  pass through as redis-py reads them;
- ``unix:///path/redis.sock[?db=…&password=…]``.

A URL is shown to people only through ``recurrence_ledger.redact.redact_url`` (the password,
and any ``password`` / ``ssl_password`` query value, become ``***``), and a
Redis error only through :func:`describe_error`.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import redis

# Saying where without a secret is the leaf recurrence_ledger.redact's (serde and
# runtime use it too, and they import nothing of the read side).
from recurrence_ledger.redact import redact_url, redacted_repr, scrub, split_userinfo  # noqa: F401 - redacted_repr, scrub: for importers of this module


def redis_client(url: str, *, ca_file: str | Path | None = None, **options) -> redis.Redis:
    """A ``redis.Redis`` for ``url`` (module docstring) with redis-py
    ``options`` (timeouts, retry, decode_responses). For a ``rediss://`` URL
    without ``ssl_ca_certs``, ``ca_file`` (the PEM file of CA certificates,
    e.g. ``RL_REDIS_CA_FILE``) becomes its ``ssl_ca_certs``; the host name is
    checked unless the URL says ``ssl_check_hostname=false``. ``ca_file`` is
    not used for ``redis://`` and ``unix://`` URLs. Never connects. Raises
    ValueError for a URL redis-py does not take or a CA file that is not a
    readable file (the message names the file, never the URL)."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in ("redis", "rediss", "unix"):
        raise ValueError("the Redis URL must start with redis://, rediss:// or unix://")
    if scheme == "rediss":
        query = dict(parse_qsl(urlsplit(url).query))
        ca = query.get("ssl_ca_certs") or (str(ca_file) if ca_file else None)
        if ca is not None:
            if not Path(ca).is_file():
                raise ValueError(f"the Redis CA file {ca} does not exist or is not a file")
            options.setdefault("ssl_ca_certs", ca)
        options.setdefault("ssl_check_hostname", True)
    try:
        return redis.Redis.from_url(url, **options)
    except ValueError:
        if split_userinfo(url)[1] is not None:
            # redis-py's message may quote a piece of a password it took for a port.
            raise ValueError(
                f"the Redis URL {redact_url(url)} cannot be used; characters such as / @ : ? # in a user name or password must be "
                "percent-encoded (%2F %40 %3A %3F %23)"
            ) from None
        raise


def describe_error(error: BaseException, url: str | None = None) -> str:
    """One line saying why Redis could not be used, for a person: what kind
    of failure it is (credentials refused, permission missing, certificate
    not trusted, …) and redis-py's message, with every secret of ``url``
    scrubbed out."""
    message = str(error) or type(error).__name__
    lowered = message.lower()
    if isinstance(error, redis.exceptions.AuthenticationError):
        if "wrongpass" in lowered or "invalid username-password" in lowered or "invalid password" in lowered:
            text = f"Redis refused the user name or password ({message})"
        else:
            text = f"Redis requires authentication: give the user and password in the URL, redis://user:password@host:port/db ({message})"
    elif isinstance(error, redis.exceptions.NoPermissionError):
        text = f"the Redis user lacks a permission the view needs ({message}); its ACL is in docs/results.md"
    elif "certificate verify failed" in lowered:
        text = (
            f"the Redis server's TLS certificate is not trusted ({message}); give the CA that signed it with "
            "?ssl_ca_certs=/path/ca.pem in the rediss:// URL or RL_REDIS_CA_FILE"
        )
    else:
        text = f"{type(error).__name__}: {message}"
    return scrub(text, url)
