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
- ``unix:///path/redis.sock[?db=…&password=…]``;
- ``redis+cluster://[[user]:password@]host:port[,host:port…][?…]`` and
  ``rediss+cluster://…`` — Redis Cluster (a ``redis.cluster.RedisCluster``),
  over plain TCP or TLS exactly as ``redis://`` and ``rediss://`` (user,
  password, ``ssl_ca_certs`` / ``RL_REDIS_CA_FILE``, the query
  parameters); the nodes listed are where the client starts discovering
  the cluster (one is enough, more survive one being down); no database
  but 0 (Redis Cluster has one). The client is made on first use (a
  ``RedisCluster`` asks a node for the slots when it is created), so that
  making one never connects, as for a single Redis.

:func:`async_redis_client` makes the ``redis.asyncio`` twin of the same
URL and options (a ``redis.asyncio.RedisCluster`` for Redis Cluster), for
a read the API awaits on its event loop (``POST /advisories``).

A URL is shown to people only through
``recurrence_ledger.redact.redact_url`` (the password, and any ``password``
/ ``ssl_password`` query value, become ``***``), and a Redis error only
through :func:`describe_error`.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import redis
import redis.asyncio
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import ClusterNode, RedisCluster
from redis.commands.core import Script
from redis.connection import Encoder
from redis.exceptions import RedisClusterException

from recurrence_ledger.redact import redact_url, scrub, split_userinfo


#: The URL schemes of Redis Cluster, with the single-Redis scheme each stands for.
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}

_NODES = re.compile(r"(?P<nodes>[^/?#]*)(?P<tail>.*)", re.S)


class ClusterClient:
    """A ``redis.cluster.RedisCluster`` made on first use: every attribute
    but :meth:`register_script`, :meth:`get_encoder` and :meth:`close` is
    the real client's. Failing to reach any node to make it raises
    ``redis.exceptions.ConnectionError`` (a ``RedisClusterException``
    otherwise, which is no ``RedisError``), so callers see an outage as
    they do for a single Redis. Thread-safe."""

    def __init__(self, factory: Callable[[], RedisCluster], encoder: Encoder, url: str, first_url: str = "", startup_nodes: tuple = (),
                 options: dict | None = None):
        self._factory = factory
        #: What the ``RedisCluster`` is made with: the URL of the first node
        #: (``redis://`` or ``rediss://``, with the user info and query), the
        #: other nodes, and redis-py's options (TLS ones included).
        self.first_url, self.startup_nodes, self.options = first_url, startup_nodes, dict(options or {})
        self._encoder = encoder
        self._url = url
        self._client: RedisCluster | None = None
        self._lock = threading.Lock()

    def real(self) -> RedisCluster:
        """The ``RedisCluster``, made now when it was not yet (connects)."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    try:
                        self._client = self._factory()
                    except RedisClusterException as error:
                        raise redis.exceptions.ConnectionError(scrub(str(error), self._url)) from None
        return self._client

    def __getattr__(self, name: str):
        if name.startswith("_"):  # never made for a private name (copy, pickle, a half-made instance)
            raise AttributeError(name)
        return getattr(self.real(), name)

    def get_encoder(self) -> Encoder:
        """The encoder of the client's options (never connects)."""
        return self._encoder

    def register_script(self, script: str) -> Script:
        """A redis-py ``Script`` run through this client (never connects)."""
        return Script(self, script)

    def close(self) -> None:
        """Close the real client's connections, when it was made."""
        if self._client is not None:
            self._client.close()


def is_cluster(client) -> bool:  # noqa: ANN001 - a redis-py client or pipeline
    """Whether ``client`` talks to Redis Cluster (:class:`ClusterClient`, a
    ``RedisCluster`` or its pipeline)."""
    return isinstance(client, (ClusterClient, RedisCluster))


def _cluster_client(url: str, base: str, options: dict) -> ClusterClient:
    prefix, userinfo, rest = split_userinfo(url)
    found = _NODES.fullmatch(rest)
    nodes = found["nodes"].split(",") if found and found["nodes"] else []
    if not nodes:
        raise ValueError(f"the Redis Cluster URL {redact_url(url)} names no node (redis+cluster://host:port[,host:port…])")
    if "" in nodes:  # "h:1,,h:2" or a trailing comma: a typo, not a node list
        raise ValueError(f"the Redis Cluster URL {redact_url(url)} has an empty node (redis+cluster://host:port[,host:port…])")
    startup = []
    for node in nodes:
        parsed = urlsplit(f"//{node}")
        try:
            port = parsed.port or 6379
        except ValueError:
            raise ValueError(f"the Redis Cluster URL {redact_url(url)} has a node that is not host:port") from None
        if not parsed.hostname:
            raise ValueError(f"the Redis Cluster URL {redact_url(url)} has a node that is not host:port")
        startup.append(ClusterNode(parsed.hostname, port))
    first = f"{base}://" + (f"{userinfo}@" if userinfo is not None else "") + nodes[0] + found["tail"]
    try:
        redis.connection.parse_url(first)
    except ValueError:
        if userinfo is not None and ":" in userinfo:
            raise ValueError(
                f"the Redis URL {redact_url(url)} cannot be used; characters such as / @ : ? # in a user name or password must be "
                "percent-encoded (%2F %40 %3A %3F %23)"
            ) from None
        raise
    if int(redis.connection.parse_url(first).get("db", 0) or 0) != 0:
        raise ValueError(f"the Redis Cluster URL {redact_url(url)} names a database other than 0 (Redis Cluster has only 0)")
    encoder = Encoder(options.get("encoding", "utf-8"), options.get("encoding_errors", "strict"), options.get("decode_responses", False))
    return ClusterClient(
        lambda: RedisCluster.from_url(first, startup_nodes=startup[1:], **options), encoder, url, first, tuple(startup[1:]), options,
    )


def redis_client(url: str, *, ca_file: str | Path | None = None, **options) -> redis.Redis:
    """A ``redis.Redis`` for ``url`` (module docstring) with redis-py
    ``options`` (timeouts, retry, decode_responses) — a
    :class:`ClusterClient` for a ``redis+cluster://`` or
    ``rediss+cluster://`` URL. For a TLS URL without ``ssl_ca_certs``,
    ``ca_file`` (the PEM file of CA certificates, e.g. ``RL_REDIS_CA_FILE``)
    becomes its ``ssl_ca_certs``; the host name is checked unless the URL
    says ``ssl_check_hostname=false``. ``ca_file`` is not used for plain
    TCP and ``unix://`` URLs. Never connects. Raises ValueError for a URL
    redis-py does not take or a CA file that is not a readable file (the
    message names the file, never the URL's secrets)."""
    scheme, base, options = _checked_options(url, ca_file, options)
    if scheme in CLUSTER_SCHEMES:
        return _cluster_client(url, base, options)
    return _from_url(redis.Redis.from_url, url, options)


def _from_url(from_url: Callable, url: str, options: dict):  # noqa: ANN202 - redis.Redis or redis.asyncio.Redis
    """``from_url(url, **options)`` (a single Redis, blocking or asyncio),
    its ValueError worded without the URL's secrets."""
    try:
        return from_url(url, **options)
    except ValueError:
        if split_userinfo(url)[1] is not None:
            # redis-py's message may quote a piece of a password it took for a port.
            raise ValueError(
                f"the Redis URL {redact_url(url)} cannot be used; characters such as / @ : ? # in a user name or password must be "
                "percent-encoded (%2F %40 %3A %3F %23)"
            ) from None
        raise


def _checked_options(url: str, ca_file: str | Path | None, options: dict) -> tuple[str, str, dict]:
    """``url``'s scheme, the single-Redis scheme it stands for, and
    ``options`` with the TLS ones :func:`redis_client` adds (ValueError for
    an unknown scheme or a CA file that is no file)."""
    options = dict(options)
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in ("redis", "rediss", "unix", *CLUSTER_SCHEMES):
        raise ValueError("the Redis URL must start with redis://, rediss://, unix://, redis+cluster:// or rediss+cluster://")
    base = CLUSTER_SCHEMES.get(scheme, scheme)
    if base == "rediss":
        query = dict(parse_qsl(urlsplit(url).query))
        ca = query.get("ssl_ca_certs") or (str(ca_file) if ca_file else None)
        if ca is not None:
            if not Path(ca).is_file():
                raise ValueError(f"the Redis CA file {ca} does not exist or is not a file")
            options.setdefault("ssl_ca_certs", ca)
        options.setdefault("ssl_check_hostname", True)
    return scheme, base, options


class AsyncClusterClient:
    """A ``redis.asyncio.RedisCluster`` made on first use, like
    :class:`ClusterClient`: :meth:`pipeline` is the real client's, made
    (connecting) when it was not yet, and failing to reach any node raises
    ``redis.exceptions.ConnectionError``. For one event loop."""

    def __init__(self, sync: ClusterClient):
        self._sync = sync
        self._client: AsyncRedisCluster | None = None
        self._lock = asyncio.Lock()

    async def real(self) -> AsyncRedisCluster:
        """The ``redis.asyncio.RedisCluster``, made and initialized now when it was not yet."""
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._client is not None:
                return self._client
            nodes = [AsyncClusterNode(node.host, node.port) for node in self._sync.startup_nodes]
            client = AsyncRedisCluster.from_url(self._sync.first_url, startup_nodes=nodes, **self._sync.options)
            try:
                await client.initialize()
            except RedisClusterException as error:
                await client.aclose()
                raise redis.exceptions.ConnectionError(scrub(str(error), self._sync._url)) from None
            self._client = client
            return client

    async def pipeline(self):  # noqa: ANN201 - a redis.asyncio.cluster.ClusterPipeline
        """A pipeline of the real client (no MULTI: Redis Cluster has none across slots)."""
        return (await self.real()).pipeline()

    async def aclose(self) -> None:
        """Close the real client's connections, when it was made."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None


class AsyncSingleClient:
    """A ``redis.asyncio.Redis`` with the interface of :class:`AsyncClusterClient`:
    :meth:`pipeline` (plain, no MULTI) and :meth:`aclose`."""

    def __init__(self, client: redis.asyncio.Redis):
        self.client = client

    async def pipeline(self):  # noqa: ANN201 - a redis.asyncio.client.Pipeline
        """A plain pipeline (no MULTI)."""
        return self.client.pipeline(transaction=False)

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self.client.aclose()


def async_redis_client(url: str, *, ca_file: str | Path | None = None, **options) -> AsyncSingleClient | AsyncClusterClient:
    """The ``redis.asyncio`` client of ``url`` with ``options``, as
    :func:`redis_client` makes the blocking one (the same URL schemes, TLS
    and CA file, the same ValueErrors): an :class:`AsyncSingleClient` or,
    for Redis Cluster, an :class:`AsyncClusterClient`. Never connects. Its
    connections belong to the event loop that first uses them."""
    scheme, base, options = _checked_options(url, ca_file, options)
    if scheme in CLUSTER_SCHEMES:
        return AsyncClusterClient(_cluster_client(url, base, options))
    return AsyncSingleClient(_from_url(redis.asyncio.Redis.from_url, url, options))


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
