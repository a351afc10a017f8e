"""Where the operator API reads from and who may read it: :class:`ApiSettings`
and the checks of what an operator configures — the API token
(:func:`check_api_token`, :func:`read_api_token`, :func:`api_token_from_env`)
and the CORS origins (:func:`check_origin`). ``serve`` in
``recurrence_ledger.cli.ops`` builds the settings; ``recurrence_ledger.api.auth``
enforces them on every request.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from recurrence_ledger.redact import redact_url
from recurrence_ledger.read.keys import default_namespace
from recurrence_ledger.settings import DEFAULT_REDIS_URL, ENV_API_TOKEN, settings

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
    127.0.0.1. The repr never shows the token or the Redis password."""

    redis_url: str = DEFAULT_REDIS_URL
    topic_prefix: str = ""
    namespace: str | None = None
    redis_ca_file: str | None = None
    api_token: str | None = None
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return (
            f"ApiSettings(redis_url={redact_url(self.redis_url)!r}, topic_prefix={self.topic_prefix!r}, namespace={self.namespace!r}, "
            f"redis_ca_file={self.redis_ca_file!r}, api_token={'***' if self.api_token else None}, "
            f"cors_origins={self.cors_origins!r}, allowed_hosts={self.allowed_hosts!r})"
        )

    @classmethod
    def from_env(cls, **overrides) -> ApiSettings:
        """Settings from the process settings (REDIS_URL, RL_REDIS_CA_FILE,
        RL_TOPIC_PREFIX; ``recurrence_ledger.settings``); keyword arguments
        that are not None win. The API token is not read here (``rank`` and
        ``stats`` need none): :func:`api_token_from_env` reads it."""
        env = settings()
        values = {
            "redis_url": env.redis_url or cls.redis_url,
            "topic_prefix": env.topic_prefix,
            "redis_ca_file": str(env.redis_ca_file) if env.redis_ca_file else None,
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)

    @property
    def resolved_namespace(self) -> str:
        """The Redis key namespace (``rl``, or ``rl:<prefix>``)."""
        return self.namespace or default_namespace(self.topic_prefix)


def check_api_token(token: str) -> str:
    """``token`` when it can be a bearer token: at least
    :data:`MIN_TOKEN_LENGTH` characters, all visible ASCII (no space, no
    control character: it travels in an HTTP header). Raises ValueError
    saying what is wrong, never quoting the token."""
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(
            f"the API token has {len(token)} characters, fewer than {MIN_TOKEN_LENGTH}; "
            "make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    if not all("!" <= char <= "~" for char in token):
        raise ValueError("the API token may only hold visible ASCII characters (no spaces)")
    return token


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
