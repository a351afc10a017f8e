"""Where the operator API reads from and who may read it: :class:`ApiSettings`
and the checks of what an operator configures — the API token
(:func:`check_api_token`, :func:`read_api_token`, :func:`api_token_from_env`),
the reviewer tokens (:func:`read_reviewer_tokens`,
:func:`reviewer_tokens_from_env`), the Kafka connection decisions are
published on (:func:`kafka_from_env`) and the CORS origins
(:func:`check_origin`). ``serve`` in ``recurrence_ledger.cli.ops`` builds
the settings; ``recurrence_ledger.api.auth`` enforces them on every request.

The reviewer tokens file is TOML: one table ``[reviewers]`` whose keys are
the reviewers' names (identifiers: 1–512 characters, no control character;
quote a name with spaces or dots) and whose values are their tokens (each
fit to be an API token, :func:`check_api_token`; no two alike)::

    [reviewers]
    alice = "k3M1f…"                 # python3 -c 'import secrets; print(secrets.token_urlsafe(32))'
    "bob@example.com" = "Zr8q…"

A decision's ``reviewer`` is the name of the token it was posted with,
never a value of the request (contract §18).
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from recurrence_ledger.ledger.models import MAX_ID_LENGTH
from recurrence_ledger.redact import redact_url
from recurrence_ledger.read.keys import default_namespace
from recurrence_ledger.settings import DEFAULT_REDIS_URL, ENV_API_TOKEN, kafka_environment, settings

#: Shortest API token accepted: a guessable token is no door.
MIN_TOKEN_LENGTH = 16


@dataclass(frozen=True)
class ApiSettings:
    """Where the API reads from and who may read. ``namespace`` None means
    ``default_namespace(topic_prefix)``. No review threshold: the API shows
    the one the workers stored in the view.

    ``redis_url``: a redis-py URL (``recurrence_ledger.read.connect``:
    ``redis://user:password@host:port/db``, ``rediss://…``);
    ``redis_ca_file``: CA certificates for a ``rediss://`` URL without
    ``ssl_ca_certs``. ``api_token``: the bearer token every request but the
    public paths must carry (None: none needed; see :func:`check_api_token`).
    ``cors_origins``: origins whose pages may read the API from a browser
    (none by default: no CORS header at all). ``allowed_hosts``: the
    ``Host`` header values the API answers (host names without port; empty:
    any) — ``serve`` sets the loopback names when it runs without a token,
    so that a web page cannot reach the API through a DNS name rebound to
    127.0.0.1. ``reviewer_tokens``: ``(reviewer name, token)`` pairs
    (:func:`read_reviewer_tokens`): who may post review decisions (none:
    no one). ``kafka``: where decisions are published (a bootstrap string
    or a ``KafkaConnection``; needed with reviewer tokens);
    ``schema_registry_url``: the deployment's Schema Registry, whose ids
    frame a decision (None: the fixed ids). The repr never shows a token,
    the Redis password or a Kafka secret."""

    redis_url: str = DEFAULT_REDIS_URL
    topic_prefix: str = ""
    namespace: str | None = None
    redis_ca_file: str | None = None
    api_token: str | None = None
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    reviewer_tokens: tuple[tuple[str, str], ...] = ()
    kafka: Any = None
    schema_registry_url: str | None = None

    def __repr__(self) -> str:
        return (
            f"ApiSettings(redis_url={redact_url(self.redis_url)!r}, topic_prefix={self.topic_prefix!r}, namespace={self.namespace!r}, "
            f"redis_ca_file={self.redis_ca_file!r}, api_token={'***' if self.api_token else None}, "
            f"cors_origins={self.cors_origins!r}, allowed_hosts={self.allowed_hosts!r}, "
            f"reviewers={[name for name, _ in self.reviewer_tokens]!r}, kafka={self.kafka!r}, "
            f"schema_registry_url={redact_url(self.schema_registry_url) if self.schema_registry_url else None!r})"
        )

    @classmethod
    def from_env(cls, **overrides) -> ApiSettings:
        """Settings from the process settings (REDIS_URL, RL_REDIS_CA_FILE,
        RL_TOPIC_PREFIX, SCHEMA_REGISTRY_URL; ``recurrence_ledger.settings``);
        keyword arguments that are not None win. The API and reviewer tokens
        and the Kafka connection are not read here (``rank`` and ``stats``
        need none): :func:`api_token_from_env`,
        :func:`reviewer_tokens_from_env` and :func:`kafka_from_env` read them."""
        env = settings()
        values = {
            "redis_url": env.redis_url or cls.redis_url,
            "topic_prefix": env.topic_prefix,
            "redis_ca_file": str(env.redis_ca_file) if env.redis_ca_file else None,
            "schema_registry_url": env.schema_registry_url,
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)

    @property
    def resolved_namespace(self) -> str:
        """The Redis key namespace (``rl``, or ``rl:<prefix>``)."""
        return self.namespace or default_namespace(self.topic_prefix)


def check_api_token(token: str, what: str = "the API token") -> str:
    """``token`` when it can be a bearer token: at least
    :data:`MIN_TOKEN_LENGTH` characters, all visible ASCII (no space, no
    control character: it travels in an HTTP header). Raises ValueError
    saying what is wrong with ``what``, never quoting the token."""
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(
            f"{what} has {len(token)} characters, fewer than {MIN_TOKEN_LENGTH}; "
            "make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    if not all("!" <= char <= "~" for char in token):
        raise ValueError(f"{what} may only hold visible ASCII characters (no spaces)")
    return token


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def read_reviewer_tokens(path: Path) -> tuple[tuple[str, str], ...]:
    """The ``(reviewer name, token)`` pairs of a reviewer tokens file (the
    module docstring's format), in file order. Raises ValueError naming
    the file (and the reviewer), never a token: unreadable, not TOML, no
    ``[reviewers]`` table or anything else in the file, no reviewer, a name
    that is not an identifier, a token that is not a string or not fit
    (:func:`check_api_token`), or one token given to two reviewers."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read the reviewer tokens file {path}: {type(error).__name__}") from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"the reviewer tokens file {path} is not TOML: {error}") from None
    reviewers = data.get("reviewers")
    if set(data) != {"reviewers"} or not isinstance(reviewers, dict) or not reviewers:
        raise ValueError(f"the reviewer tokens file {path} holds one table [reviewers] of reviewer name = \"token\" lines, with at least one")
    pairs: list[tuple[str, str]] = []
    owner: dict[str, str] = {}
    for name, token in reviewers.items():
        if not name or len(name) > MAX_ID_LENGTH or _CONTROL.search(name):
            raise ValueError(f"{path}: reviewer name {name[:60]!r} is not an identifier (1–{MAX_ID_LENGTH} characters, no control character)")
        if not isinstance(token, str):
            raise ValueError(f"{path}: the token of reviewer {name!r} is not a string")
        check_api_token(token, f"the token of reviewer {name!r} in {path}")
        if token in owner:
            raise ValueError(f"{path}: reviewers {owner[token]!r} and {name!r} have the same token")
        owner[token] = name
        pairs.append((name, token))
    return tuple(pairs)


def reviewer_tokens_from_env() -> tuple[tuple[str, str], ...]:
    """:func:`read_reviewer_tokens` of RL_REVIEWER_TOKENS_FILE; none when it is unset."""
    path = settings().reviewer_tokens_file
    return read_reviewer_tokens(path) if path is not None else ()


def kafka_from_env() -> Any:
    """Where the API publishes review decisions, from the process settings:
    the ``KafkaConnection`` of KAFKA_BOOTSTRAP_SERVERS, KAFKA_CONFIG_FILE and
    the ``KAFKA_*`` overrides (``kafka.client_properties.load_connection``),
    or None when neither the bootstrap nor a config file is set. Raises
    ClientConfigError (a ValueError) for unusable settings."""
    from recurrence_ledger.kafka.client_properties import load_connection

    env = settings()
    if env.bootstrap_servers is None and env.kafka_config_file is None:
        return None
    return load_connection(env.bootstrap_servers, env.kafka_config_file, kafka_environment())


def read_api_token(token: str | None, token_file: Path | None) -> str | None:
    """The API token of ``serve``: ``token`` (RL_API_TOKEN) or the content
    of ``token_file`` (--token-file / RL_API_TOKEN_FILE; surrounding
    whitespace and the final newline dropped), checked with
    :func:`check_api_token`; None when neither is given. Raises ValueError
    when both are given, the file cannot be read or the token is unfit —
    the message names the file, never the token."""
    if token is not None and token_file is not None:
        raise ValueError(f"both {ENV_API_TOKEN} and a token file ({token_file}) are set: give the API token one way")
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"cannot read the API token file {token_file}: {type(error).__name__}") from None
        if not token:
            raise ValueError(f"the API token file {token_file} is empty")
    return None if token is None else check_api_token(token)


def api_token_from_env() -> str | None:
    """:func:`read_api_token` of RL_API_TOKEN and RL_API_TOKEN_FILE."""
    env = settings()
    return read_api_token(env.api_token.get_secret_value() if env.api_token else None, env.api_token_file)


def check_origin(origin: str) -> str:
    """``origin`` when it is a web origin: ``http(s)://host[:port]`` and
    nothing after the authority (no path, no ``*``). Raises ValueError."""
    try:
        parts = urlsplit(origin)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if not port_ok or parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query or parts.fragment or "*" in origin:
        raise ValueError(f"{origin!r} is not an origin: give scheme://host[:port], e.g. https://dashboards.example.com")
    return origin


#: Host names that are loopback whatever they resolve to.
LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a ``serve --host`` value) is a loopback address or
    ``localhost``. Any other name counts as non-loopback (it could resolve
    to anything), and so do 0.0.0.0 and :: (every interface)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
