"""Who may read the view, without services: printable Redis URLs and
errors (recurrence_ledger.read.connect), the API token's rules and its
constant-time check, CORS origins, the loopback rule of ``serve`` and what
``--help`` shows. The same behaviour against real uvicorn, Redis and
redis-server with ACLs and TLS is in tests/e2e/test_read_access.py and
tests/e2e/secure_redis."""

from __future__ import annotations

import functools
import hmac
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from recurrence_ledger.api import app as api
from recurrence_ledger.api.auth import BearerToken, host_name, is_public
from recurrence_ledger.api.settings import ApiSettings, check_api_token, check_origin, read_api_token
from recurrence_ledger.api.settings import is_loopback
from recurrence_ledger.read.connect import describe_error, redis_client
from recurrence_ledger.redact import redact_url, scrub
from tests.conftest import REPO
from tests.plugins import processes

PASSWORD = "S3cret-pw/with%40chars"
TOKEN = "tok-0123456789abcdef-XYZ"


@pytest.mark.parametrize(
    ("url", "printed"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://ledger:pw@127.0.0.1:6379/0", "redis://ledger:***@127.0.0.1:6379/0"),
        ("redis://:pw@host", "redis://:***@host"),
        ("redis://ledger@host:1/2", "redis://ledger@host:1/2"),
        ("rediss://ledger:p%40w@h:6380/0?ssl_ca_certs=/x/ca.pem", "rediss://ledger:***@h:6380/0?ssl_ca_certs=/x/ca.pem"),
        ("rediss://h/0?ssl_ca_certs=/x/ca.pem&ssl_password=kp", "rediss://h/0?ssl_ca_certs=/x/ca.pem&ssl_password=***"),
        ("unix:///run/redis.sock?db=1&password=pw", "unix:///run/redis.sock?db=1&password=***"),
        ("no url at all", "<unparseable Redis URL>"),
        (None, "(none)"),
    ],
)
def test_redact_url_hides_passwords_and_keeps_the_rest(url, printed):
    assert redact_url(url) == printed


def test_scrub_removes_a_password_written_encoded_or_decoded():
    url = "redis://ledger:p%40ss-word@h/0"
    assert scrub("a p@ss-word and p%40ss-word", url) == "a *** and ***"


def test_redis_client_uses_the_ca_file_for_rediss_only_and_checks_host_names(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not read before connecting")
    tls = redis_client("rediss://u:p@127.0.0.1:6380/0", ca_file=ca).connection_pool.connection_kwargs
    assert tls["ssl_ca_certs"] == str(ca) and tls["ssl_check_hostname"] is True
    own = redis_client(f"rediss://u:p@127.0.0.1:6380/0?ssl_ca_certs={ca}", ca_file="/elsewhere.pem").connection_pool.connection_kwargs
    assert own["ssl_ca_certs"] == str(ca)
    plain = redis_client("redis://u:p@127.0.0.1:6379/0", ca_file="/does/not/matter.pem").connection_pool.connection_kwargs
    assert "ssl_ca_certs" not in plain
    with pytest.raises(ValueError, match="CA file /no/such/ca.pem"):
        redis_client("rediss://u:p@h/0", ca_file="/no/such/ca.pem")
    with pytest.raises(ValueError) as error:
        redis_client(f"http://u:{PASSWORD}@h/0")
    assert PASSWORD not in str(error.value)
    # An unencoded "/" makes redis-py read part of the password as the port;
    # its message would quote that part.
    with pytest.raises(ValueError, match="must be percent-encoded") as error:
        redis_client(f"redis://u:{PASSWORD}@h/0")
    assert "S3cret" not in str(error.value) and "redis://u:***@h/0" in str(error.value)


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (redis.exceptions.AuthenticationError("invalid username-password pair or user is disabled."), "refused the user name or password"),
        (redis.exceptions.AuthenticationError("NOAUTH Authentication required."), "requires authentication"),
        (redis.exceptions.NoPermissionError("this user has no permissions to run the 'set' command"), "lacks a permission"),
        (redis.exceptions.ConnectionError("Error 1 connecting to h:6380. [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"), "not trusted"),
        (redis.exceptions.ConnectionError("Error 111 connecting to h:1. Connection refused."), "ConnectionError: Error 111"),
    ],
)
def test_describe_error_says_what_kind_of_failure(error, says):
    assert says in describe_error(error)


def test_describe_error_never_repeats_a_password():
    url = f"redis://ledger:{PASSWORD}@h/0"
    assert PASSWORD not in describe_error(redis.exceptions.ConnectionError(f"odd {PASSWORD} echo"), url)


def test_api_settings_repr_shows_neither_token_nor_password():
    text = repr(ApiSettings(redis_url=f"redis://ledger:{PASSWORD}@h/0", api_token=TOKEN))
    assert PASSWORD not in text and TOKEN not in text and "ledger:***@h" in text


# ----------------------------------------------------------------- the API token


def test_token_rules():
    assert check_api_token(TOKEN) == TOKEN
    for bad in ("short", "x" * 15, "with space inside-0123", "tab\tinside-0123456789", "é" * 20):
        with pytest.raises(ValueError) as error:
            check_api_token(bad)
        assert bad not in str(error.value)


def test_token_from_a_file_or_the_environment_but_not_both(tmp_path):
    path = tmp_path / "token"
    path.write_text(f"  {TOKEN}\n")
    assert read_api_token(None, path) == TOKEN
    assert read_api_token(TOKEN, None) == TOKEN
    assert read_api_token(None, None) is None
    with pytest.raises(ValueError, match="both RL_API_TOKEN and a token file"):
        read_api_token(TOKEN, path)
    with pytest.raises(ValueError, match="cannot read the API token file"):
        read_api_token(None, tmp_path / "missing")
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        read_api_token(None, tmp_path / "empty")


def test_bearer_token_is_compared_with_compare_digest(monkeypatch):
    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    token = BearerToken(TOKEN)
    assert token.accepts([(b"authorization", f"Bearer {TOKEN}".encode())])
    assert token.accepts([(b"authorization", f"bearer   {TOKEN}".encode())])
    assert not token.accepts([(b"authorization", f"Bearer {TOKEN}x".encode())])
    assert not token.accepts([(b"authorization", f"Basic {TOKEN}".encode())])
    assert not token.accepts([])
    # Both compared values are SHA-256 digests: equal length whatever was sent.
    assert len(calls) == 3 and all(len(a) == len(b) == 32 for a, b in calls)


def test_public_paths_hold_no_data():
    assert all(is_public(path) for path in ("/healthz", "/", "/review", "/timeline", "/docs", "/redoc", "/openapi.json", "/static/dashboard.js", "/static-docs/x.js"))
    assert not any(is_public(path) for path in ("/scopes", "/scopes/a/statistics", "/static", "//scopes", "/healthz/x", "/nope"))


@pytest.mark.parametrize(("header", "host"), [(b"127.0.0.1:8080", "127.0.0.1"), (b"LocalHost", "localhost"), (b"[::1]:80", "::1"), (b"::1", "::1")])
def test_host_name_of_a_host_header(header, host):
    assert host_name(header) == host


def test_origins_are_scheme_host_and_port_only():
    assert check_origin("https://dash.example.com") == "https://dash.example.com"
    assert check_origin("http://127.0.0.1:3000") == "http://127.0.0.1:3000"
    for bad in ("*", "https://*.example.com", "dash.example.com", "https://dash.example.com/", "https://d.example/x", "ftp://d.example", "https://d.example:0"):
        with pytest.raises(ValueError):
            check_origin(bad)


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("example.com", False),
])
def test_loopback_hosts(host, loopback):
    assert is_loopback(host) is loopback


# ----------------------------------------------------------------- the CLI


run_cli = functools.partial(processes.run_cli, columns=200)


@pytest.mark.parametrize("command", [("serve",), ("rank",), ("stats",), ("view", "rebuild"), ("view", "clear"), ("worker",), ("run",), ("rebuild",)])
def test_help_shows_no_password_and_no_token(command, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    result = run_cli(*command, "--help", env={
        "REDIS_URL": f"redis://ledger:{PASSWORD}@h/0", "RL_API_TOKEN": TOKEN, "RL_API_TOKEN_FILE": str(token_file),
    })
    assert result.returncode == 0, result.stderr
    assert PASSWORD not in result.stdout + result.stderr and TOKEN not in result.stdout + result.stderr


def test_serve_refuses_a_non_loopback_host_without_a_token():
    result = run_cli("serve", "--host", "0.0.0.0", "--port", "0")
    assert result.returncode == 2
    assert "refusing to serve the view without an API token on 0.0.0.0" in " ".join(result.stderr.split())
    assert "--allow-unauthenticated" in result.stderr


@pytest.mark.parametrize(("args", "env", "says"), [
    (("--token-file", "TOKEN_FILE"), {"RL_API_TOKEN": TOKEN}, "both RL_API_TOKEN and a token file"),
    (("--token-file", "/no/such/token"), {}, "cannot read the API token file /no/such/token"),
    ((), {"RL_API_TOKEN": "short"}, "fewer than 16"),
    (("--cors-origin", "*"), {}, "is not an origin"),
])
def test_serve_exits_2_for_an_unusable_token_or_origin(args, env, says, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    result = run_cli("serve", *(str(token_file) if arg == "TOKEN_FILE" else arg for arg in args), env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert says in " ".join(result.stderr.split())
    assert TOKEN not in result.stdout + result.stderr


def test_view_commands_exit_2_for_a_missing_ca_file_without_printing_the_password():
    for command in (("view", "clear"), ("stats",)):
        result = run_cli(*command, env={"REDIS_URL": f"rediss://ledger:{PASSWORD}@127.0.0.1:1/0", "RL_REDIS_CA_FILE": "/no/such/ca.pem"})
        assert result.returncode == 2, result.stdout + result.stderr
        assert "the Redis CA file /no/such/ca.pem does not exist" in " ".join(result.stdout.split() + result.stderr.split())
        assert PASSWORD not in result.stdout + result.stderr


def test_the_login_form_never_submits_the_token_as_a_form_field():
    script = (Path(api.STATIC_DIR) / "login.js").read_text()
    form = script[script.index("const input = element("):script.index("const section = element(")]
    assert "name:" not in form and 'type: "password"' in form
    assert "event.preventDefault()" in script


def test_the_uvicorn_factory_takes_the_token_from_the_environment():
    code = (
        "from fastapi.testclient import TestClient; from recurrence_ledger.api.app import create_app; "
        "c = TestClient(create_app()); "
        "print(c.get('/scopes').status_code, c.get('/scopes', headers={'Authorization': 'Bearer %s'}).status_code != 401)" % TOKEN
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_URL", "RL_"))}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
                            env={**base, "RL_API_TOKEN": TOKEN, "REDIS_URL": "redis://127.0.0.1:1/0"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["401", "True"]
