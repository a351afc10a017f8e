"""Saying where a service is without saying its secret: URLs and
configuration objects fit to print or log.

A leaf of the package (it imports nothing of it): the Redis connection
(``recurrence_ledger.read.connect``), the Schema Registry settings, the
worker's and the follower's configurations and the CLI show a URL to people
only through :func:`redact_url` (the password, and any ``password`` /
``ssl_password`` query value, become ``***``) and scrub any other text with
:func:`scrub`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode

#: What stands for a secret in a printed URL.
REDACTED = "***"

#: URL query parameters that carry a secret (redis-py passes unknown query
#: parameters to the connection as keyword arguments).
SECRET_QUERY_KEYS = frozenset({"password", "ssl_password"})


def split_userinfo(url: str) -> tuple[str, str | None, str]:
    """``(scheme://, user info or None, rest)`` of ``url``, the user info
    being everything before the last ``@`` ahead of the query — also when
    a password holds an unencoded ``/``, ``#`` or ``?``, which URL parsers
    (redis-py's too) would take for the start of the path. ``(url, None,
    "")`` for text without ``://``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url, None, ""
    head, qmark, query = rest.partition("?")
    if "@" in head:
        userinfo, _, after = head.rpartition("@")
        return scheme + "://", userinfo, after + qmark + query
    if "@" in query and "@" not in rest.split("?", 1)[0]:
        # "redis://u:pa?ss@h/0": the password ran into what looks like a query.
        userinfo, _, after = rest.rpartition("@")
        if "/" not in userinfo.split(":", 1)[0]:
            return scheme + "://", userinfo, after
    return scheme + "://", None, rest


def redact_url(url: str | None) -> str:
    """``url`` fit to print: the password of the user-info part and the
    values of :data:`SECRET_QUERY_KEYS` replaced by ``***``; the scheme,
    user name, host, port, database and other query parameters kept.
    ``"(none)"`` for None; ``"<unparseable Redis URL>"`` for text that is
    not a URL (it could be a secret pasted in the wrong place)."""
    if url is None:
        return "(none)"
    prefix, userinfo, rest = split_userinfo(url)
    if not rest and userinfo is None or "://" not in url or not url.split("://", 1)[0].replace("+", "").isalpha():
        return "<unparseable Redis URL>"
    if userinfo is not None:
        user, has_password, _ = userinfo.partition(":")
        prefix += (f"{user}:{REDACTED}@" if has_password else f"{user}@")
    base, qmark, query = rest.partition("?")
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(key in SECRET_QUERY_KEYS for key, _ in pairs):
            query = urlencode([(key, REDACTED if key in SECRET_QUERY_KEYS else value) for key, value in pairs], safe="/*")
    return prefix + base + qmark + query


def url_secrets(url: str | None) -> list[str]:
    """The secrets a URL carries (its password, as written and decoded, and
    secret query values), for scrubbing them out of any text."""
    if not url:
        return []
    _, userinfo, rest = split_userinfo(url)
    found: list[str] = []
    if userinfo is not None and ":" in userinfo:
        password = userinfo.split(":", 1)[1]
        found += [password, unquote(password)]
    found += [value for key, value in parse_qsl(rest.partition("?")[2]) if key in SECRET_QUERY_KEYS]
    return [secret for secret in dict.fromkeys(found) if secret]


def scrub(text: str, url: str | None) -> str:
    """``text`` with every secret of ``url`` replaced by ``***``."""
    for secret in url_secrets(url):
        text = text.replace(secret, REDACTED)
    return text


def redacted_repr(instance: Any, url_fields: tuple[str, ...] = ("redis_url",)) -> str:
    """``repr`` of a dataclass ``instance`` as the dataclass would print it
    (fields with ``repr=True``, in order), with the fields named in
    ``url_fields`` passed through :func:`redact_url` (None stays None).
    For the configuration objects that carry a Redis URL."""
    parts = []
    for item in fields(instance):
        if not item.repr:
            continue
        value = getattr(instance, item.name)
        if item.name in url_fields and value is not None:
            value = redact_url(value)
        parts.append(f"{item.name}={value!r}")
    return f"{type(instance).__name__}({', '.join(parts)})"
