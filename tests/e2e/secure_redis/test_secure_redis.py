"""The read side on a Redis that wants a password and speaks TLS
(``deploy/redis.sh --secure``; fixtures in tests/plugins/secure.py): a real worker
writes the view as the ACL user ``ledger`` on the password port, ``view
rebuild`` rewrites it over ``rediss://``, and the API, ``rank`` and
``stats`` read it as the read-only user ``dashboard`` over both — with the
values of the embedded runner on the same journal. A wrong password, a
missing password or an untrusted CA is one clear error with exit code 1
(the API: 503); no password ever appears in an output, a log or a
response; the ACL lets each user do what the product does and nothing
else."""

from __future__ import annotations

import functools
import json
import uuid

import httpx
import pytest
import redis

from recurrence_ledger.read.keys import Keys
from recurrence_ledger.api.settings import ApiSettings
from tests.e2e import harness
from tests.e2e.api_server import fed_view, running_api, serve_cli, stop_process
from tests.plugins.processes import run_cli

SCOPE = "dns-mirror"
TOKEN = f"secure-{uuid.uuid4().hex}"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
WRONG = "not-the-password-0123456789"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("secure-redis")


@pytest.fixture(scope="module")
def fed(bootstrap, secure_redis, workdir):
    """The worked example projected by a real worker as ``ledger`` on the password port."""
    with fed_view(bootstrap, secure_redis.url("ledger"), workdir) as view:
        yield view


#: ``recurrence-ledger ARGS`` with the Redis URL and the rest from ``env``
#: only (none inherited), as a user would run it.
cli = functools.partial(run_cli, columns=200)


def assert_no_secret(text: str, secure_redis, *extra: str) -> None:
    for secret in (*secure_redis.secrets, *extra):
        assert secret not in text


def clear_namespace(secure_redis, namespace: str) -> None:
    admin = secure_redis.admin()
    keys = list(admin.scan_iter(match=f"{namespace}:*"))
    if keys:
        admin.delete(*keys)


# ----------------------------------------------------------------- writing


def test_a_worker_writes_the_view_as_the_ledger_user(fed, secure_redis, workdir):
    admin = secure_redis.admin()
    assert admin.smembers(Keys(fed.namespace).scopes) == set(fed.expected)
    assert json.loads(admin.hget(Keys(fed.namespace).scope(SCOPE), "record")) == fed.expected[SCOPE]
    assert_no_secret((workdir / "worker.log").read_text(), secure_redis)


@pytest.mark.parametrize("tls", [False, True], ids=["password", "tls"])
def test_the_api_reads_the_view_as_the_dashboard_user(fed, secure_redis, tls):
    settings = ApiSettings(redis_url=secure_redis.url("dashboard", tls=tls), topic_prefix=fed.prefix, api_token=TOKEN)
    with running_api(settings) as base_url:
        assert httpx.get(f"{base_url}/healthz").json()["status"] == "ok"
        assert httpx.get(f"{base_url}/scopes", headers=BEARER).json()["total"] == len(fed.expected)
        assert httpx.get(f"{base_url}/scopes/{SCOPE}/statistics", headers=BEARER).json() == fed.expected[SCOPE]
        revisions = httpx.get(f"{base_url}/scopes/{SCOPE}/revisions", headers=BEARER)
        assert revisions.status_code == 200 and revisions.json()["total"] >= len(fed.expected[SCOPE]["top_revisions"])
        review = httpx.get(f"{base_url}/scopes/{SCOPE}/review-candidates", headers=BEARER).json()
        assert review["needing_review"] == fed.expected[SCOPE]["needing_review"] and review["review_threshold"] == 3
        assert httpx.get(f"{base_url}/scopes").status_code == 401


def test_view_rebuild_over_tls_as_the_ledger_user(fed, secure_redis, bootstrap):
    clear_namespace(secure_redis, fed.namespace)
    url = secure_redis.url("ledger", tls=True)
    result = cli("view", "rebuild", "--bootstrap", bootstrap, "--topic-prefix", fed.prefix, env={"REDIS_URL": url})
    assert result.returncode == 0, result.stdout + result.stderr
    where = f"rediss://ledger:***@127.0.0.1:{secure_redis.tls_port}/0?ssl_ca_certs={secure_redis.ca}"
    assert f"{len(fed.expected)} scopes written to {where}" in " ".join(result.stdout.split())
    assert_no_secret(result.stdout + result.stderr, secure_redis)
    with running_api(ApiSettings(redis_url=secure_redis.url("dashboard", tls=True), topic_prefix=fed.prefix, api_token=TOKEN)) as base_url:
        assert httpx.get(f"{base_url}/scopes/{SCOPE}/statistics", headers=BEARER).json() == fed.expected[SCOPE]


def test_rebuild_rewrites_the_view_as_the_ledger_user(fed, secure_redis, bootstrap):
    result = cli("rebuild", "--bootstrap", bootstrap, "--topic-prefix", fed.prefix, env={"REDIS_URL": secure_redis.url("ledger")})
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Redis view {fed.namespace} rewritten: {len(fed.expected)} scopes" in result.stdout
    assert_no_secret(result.stdout + result.stderr, secure_redis)


def test_view_clear_lists_the_keys_as_the_ledger_user_without_the_password(fed, secure_redis):
    result = cli("view", "clear", "--topic-prefix", fed.prefix, env={"REDIS_URL": secure_redis.url("ledger", tls=True)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"keys of the Redis view {fed.namespace} at rediss://ledger:***@127.0.0.1:{secure_redis.tls_port}/0" in result.stdout
    assert_no_secret(result.stdout + result.stderr, secure_redis)


# ----------------------------------------------------------------- reading with the CLI


@pytest.mark.parametrize("tls", [False, True], ids=["password", "tls-ca-from-RL_REDIS_CA_FILE"])
def test_stats_and_rank_read_as_the_dashboard_user(fed, secure_redis, tls):
    env = {"REDIS_URL": secure_redis.url("dashboard", tls=tls, ca_in_url=False), "RL_TOPIC_PREFIX": fed.prefix}
    if tls:
        env["RL_REDIS_CA_FILE"] = str(secure_redis.ca)
    stats = cli("stats", "--json", env=env)
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout) == [fed.expected[scope_id] for scope_id in sorted(fed.expected)]
    rank = cli("rank", "--json", env=env)
    assert rank.returncode == 0, rank.stderr
    assert {row["scope_id"] for row in json.loads(rank.stdout)} == set(fed.expected)
    table = cli("rank", env=env)
    assert table.returncode == 0 and SCOPE in table.stdout
    assert_no_secret(stats.stdout + stats.stderr + rank.stdout + rank.stderr + table.stdout + table.stderr, secure_redis)


def test_serve_reads_over_tls_and_prints_neither_password_nor_token(fed, secure_redis, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    log = tmp_path / "serve.log"
    env = {"REDIS_URL": secure_redis.url("dashboard", tls=True), "RL_TOPIC_PREFIX": fed.prefix}
    process, url = serve_cli(["--token-file", str(token_file), "--log-level", "debug"], env, log)
    try:
        assert httpx.get(f"{url}/scopes/{SCOPE}/statistics", headers=BEARER).json() == fed.expected[SCOPE]
        assert httpx.get(f"{url}/scopes/{SCOPE}/statistics").status_code == 401
    finally:
        stop_process(process)
    output = log.read_text()
    assert f"on rediss://dashboard:***@127.0.0.1:{secure_redis.tls_port}/0" in output
    assert_no_secret(output, secure_redis, TOKEN)


# ----------------------------------------------------------------- refused


@pytest.mark.parametrize("tls", [False, True], ids=["password", "tls"])
def test_a_wrong_password_is_one_clear_error_and_exit_1(fed, secure_redis, bootstrap, tls):
    for user, command in (
        ("dashboard", ("stats",)), ("dashboard", ("rank",)), ("ledger", ("view", "clear")), ("ledger", ("view", "clear", "--yes")),
        ("ledger", ("view", "rebuild", "--bootstrap", bootstrap)),
    ):
        result = cli(*command, "--topic-prefix", fed.prefix, env={"REDIS_URL": secure_redis.url(user, tls=tls, password=WRONG)})
        output = result.stdout + result.stderr
        assert result.returncode == 1, (command, output)
        assert "Redis refused the user name or password" in " ".join(output.split()), (command, output)
        assert "Traceback" not in output
        assert_no_secret(output, secure_redis, WRONG)
    # Nothing was cleared by the refused view clear --yes.
    assert secure_redis.admin().exists(Keys(fed.namespace).scopes)


def test_no_password_or_an_untrusted_certificate_is_one_clear_error(fed, secure_redis):
    anonymous = cli("stats", env={"REDIS_URL": f"redis://127.0.0.1:{secure_redis.port}/0"})
    assert anonymous.returncode == 1 and "Redis requires authentication" in " ".join(anonymous.stderr.split())
    untrusted = cli("stats", env={"REDIS_URL": secure_redis.url("dashboard", tls=True, ca_in_url=False)})
    assert untrusted.returncode == 1
    assert "TLS certificate is not trusted" in " ".join(untrusted.stderr.split()) and "RL_REDIS_CA_FILE" in untrusted.stderr
    assert_no_secret(anonymous.stdout + anonymous.stderr + untrusted.stdout + untrusted.stderr, secure_redis)


def test_the_api_with_a_wrong_password_answers_503_without_the_password(fed, secure_redis):
    settings = ApiSettings(redis_url=secure_redis.url("dashboard", tls=True, password=WRONG), topic_prefix=fed.prefix, api_token=TOKEN)
    with running_api(settings) as base_url:
        scopes = httpx.get(f"{base_url}/scopes", headers=BEARER)
        assert scopes.status_code == 503 and "Redis refused the user name or password" in scopes.json()["detail"]
        health = httpx.get(f"{base_url}/healthz", headers=BEARER)
        assert health.status_code == 503 and "refused" in health.json()["detail"]
        assert_no_secret(scopes.text + health.text, secure_redis, WRONG)


def test_a_worker_with_a_wrong_password_keeps_going_and_logs_no_password(bootstrap, secure_redis, tmp_path):
    prefix = harness.new_prefix()
    try:
        harness.prepare(bootstrap, prefix, partitions=1)
        harness.publish(bootstrap, harness.REPO / "tests" / "cases" / "minimum_case.jsonl", prefix)
        log = tmp_path / "worker.log"
        # The view never stops the worker: it keeps its records pending and says why.
        harness.run_to_idle(bootstrap, prefix, log, redis_url=secure_redis.url("ledger", password=WRONG), idle_exit=3.0)
        text = log.read_text()
        assert "AuthenticationError: invalid username-password pair" in text
        assert_no_secret(text, secure_redis, WRONG)
    finally:
        harness.remove_prefix(bootstrap, prefix)


# ----------------------------------------------------------------- the ACL

#: What the product sends, per user (recurrence_ledger.read.projection.RedisView writes
#: and clears; recurrence_ledger.api.ViewReader reads; the view follower and
#: the history read models run Lua scripts by EVALSHA, loading them with
#: SCRIPT LOAD when Redis lacks them), with sample keys.
LEDGER_NEEDS = [
    ("ping",), ("select", "0"), ("multi",), ("exec",), ("discard",), ("exists", "rl:scopes"), ("del", "rl:scope:a"), ("unlink", "rl:scope:a"),
    ("hset", "rl:scope:a", "f", "v"), ("zadd", "rl:scope:a:top", "1", "m"), ("sadd", "rl:scopes", "a"), ("hget", "rl:scope:a", "record"),
    ("hgetall", "rl:scope:a"), ("hvals", "rl:scope:a:revisions"), ("smembers", "rl:scopes"), ("zrevrange", "rl:scope:a:top", "0", "0"),
    ("zrangebyscore", "rl:scope:a:top", "0", "+inf"), ("scan", "0", "MATCH", "rl:*"), ("hset", "rl:prod.:scope:a", "f", "v"),
    ("get", "rl:follower:offsets"), ("set", "rl:follower:offsets", "v"), ("zrem", "rl:scope:a:top", "m"), ("hincrby", "rl:scope:a", "f", "1"),
    ("evalsha", "0" * 40, "1", "rl:scope:a"), ("script", "load", "return 1"), ("script", "exists", "0" * 40),
    ("hmget", "rl:scope:a", "binding_suspects", "unknown_reasons"),  # the follower's totals of the view (recurrence_ledger.read.totals)
]
DASHBOARD_NEEDS = [
    ("ping",), ("select", "0"), ("multi",), ("exec",), ("smembers", "rl:scopes"), ("hget", "rl:scope:a", "record"),
    ("hmget", "rl:scope:a", "record", "review_threshold"), ("zrange", "rl:scope:a:top", "0", "-1", "WITHSCORES"), ("hgetall", "rl:scope:a:revisions"),
    ("zrevrangebyscore", "rl:scope:a:history", "+inf", "-inf"), ("zcard", "rl:scopes:index"), ("scard", "rl:scopes"), ("evalsha_ro", "0" * 40, "1", "rl:scopes:index"),
    # the answers of idempotent review decisions (recurrence_ledger.api.idempotency)
    ("set", "rl:prod.:{rl:prod.}:decision-request:" + "a" * 64, "v", "NX", "EX", "600"), ("del", "rl:{rl}:decision-request:" + "a" * 64),
]
NOBODY = [
    ("hset", "other:key", "f", "v"), ("hget", "other:key", "f"), ("keys", "*"), ("flushall",),
    ("flushdb",), ("config", "get", "requirepass"), ("acl", "list"), ("script", "flush"), ("function", "list"), ("client", "list"), ("debug", "sleep", "0"),
    ("subscribe", "rl:ch"), ("shutdown",),
]
DASHBOARD_MAY_NOT = [("hset", "rl:scope:a", "f", "v"), ("del", "rl:scope:a"), ("unlink", "rl:scope:a"), ("sadd", "rl:scopes", "a"), ("scan", "0"),
                     ("set", "rl:follower:offsets", "v"), ("zadd", "rl:scope:a:top", "1", "m"), ("evalsha", "0" * 40, "1", "rl:scope:a")]


def dry_run(admin: redis.Redis, user: str, command: tuple[str, ...]) -> bool:
    """Whether ACL DRYRUN lets ``user`` run ``command``."""
    try:
        return admin.execute_command("ACL", "DRYRUN", user, *command) == "OK"
    except redis.exceptions.ResponseError:
        return False


def test_the_acl_allows_what_the_view_sends_and_nothing_else(secure_redis):
    admin = secure_redis.admin()
    for user, needs in (("ledger", LEDGER_NEEDS), ("dashboard", DASHBOARD_NEEDS)):
        assert [command for command in needs if not dry_run(admin, user, command)] == [], user
        assert [command for command in NOBODY if dry_run(admin, user, command)] == [], user
    assert [command for command in DASHBOARD_MAY_NOT if dry_run(admin, "dashboard", command)] == []


def test_the_acl_is_enforced_on_real_connections(secure_redis):
    reader = redis.Redis.from_url(secure_redis.url("dashboard", tls=True))
    with pytest.raises(redis.exceptions.NoPermissionError):
        reader.hset("rl:scope:intruder", "f", "v")
    writer = redis.Redis.from_url(secure_redis.url("ledger"))
    with pytest.raises(redis.exceptions.NoPermissionError):
        writer.hset("other:key", "f", "v")
    with pytest.raises(redis.exceptions.NoPermissionError):
        writer.flushall()
