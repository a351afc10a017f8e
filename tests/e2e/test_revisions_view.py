"""The ``revisions`` view end to end, on the real Kafka broker and
the real Redis: a real worker run with ``--top-revisions 1`` over a generated
journal whose scopes have many more revisions than that projects EVERY
revision into ``{ns}:scope:{scope}:revisions``; the API's
``/scopes/{scope}/revisions`` serves all of them with its sorts and filters;
``rank`` lists revisions beyond the top N; ``view rebuild`` restores the hash
after the namespace was cleared.

Expected values are never hand-written: they are the last
``revision-statistics`` record per revision (and the last
``recurrence-statistics`` record per scope) of ``run_journal`` on the same
journal with the same policy (contract §10). Orders and filters are
re-derived here from those records with keys written independently of
``recurrence_ledger.api.app``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import redis

from recurrence_ledger.read.keys import Keys
from recurrence_ledger.api.settings import ApiSettings
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.ledger.processor import LedgerConfig
from recurrence_ledger.read.projection import RedisView, revision_member
from recurrence_ledger.workload import Workload, generate_journal
from tests.conftest import read_jsonl
from tests.e2e.api_server import fed_view, running_api
from tests.plugins.processes import run_cli
from tests.journal import write_journal

#: The worker's and the reference run's --top-revisions: far fewer than the revisions of each scope.
TOP_N = 1
#: Two scopes with 7–9 revisions each: streaks 0–4, every repair_surface, a
#: revision 2, a revision without terminal verdicts (yield null), low-yield
#: and needing-review revisions (checked in `fed`).
SHAPE = Workload(scopes=2, outcomes_per_scope=60, heads_per_scope=8, handoffs=4, seed=3)
SURFACES = ("experience_content", "working_state", "recall_policy", "acceptance_check")
ROW_FIELDS = (
    "artifact_ref", "signature_key", "terminal_recurred_streak", "needs_review",
    "repair_surface", "selected", "recurred", "avoided", "yield", "low_yield",
    "unknown", "unknown_reasons", "ambiguous", "binding_suspect",  # contract §17
)


@dataclass(frozen=True)
class Fed:
    """The worker-fed view and the reference values."""

    prefix: str
    namespace: str
    redis_url: str
    bootstrap: str
    statistics: dict[str, dict]  # scope_id -> last ScopeStatistics record
    revisions: dict[str, dict[str, dict]]  # scope_id -> {revision_member -> last RevisionStatistics record}
    history: dict[tuple[str, str], list[dict]]  # (scope_id, revision_member) -> every record, in publication order


def contract_order(row: dict) -> tuple:
    """contract §8: streak desc, then family, artifact_id, revision, then signature_key."""
    ref = row["artifact_ref"]
    return (-row["terminal_recurred_streak"], ref["family"], ref["artifact_id"], ref["revision"], row["signature_key"])


#: Each sort's order as docs/results.md states it, ties in contract §8 order.
EXPECTED_ORDERS = {
    "streak": contract_order,
    "recurred": lambda row: (-row["recurred"], contract_order(row)),
    "selected": lambda row: (-row["selected"], contract_order(row)),
    "yield": lambda row: (row["yield"] is None, -1 if row["yield"] is None else row["yield"], contract_order(row)),
    "unknown": lambda row: (-row["unknown"], contract_order(row)),
}


def api_row(record: dict) -> dict:
    """A RevisionStatistics record as an API row carries it (without rank)."""
    return {name: record[name] for name in ROW_FIELDS}


def without_rank(rows: list[dict]) -> list[dict]:
    return [{name: row[name] for name in ROW_FIELDS} for row in rows]


@pytest.fixture(scope="module")
def fed(bootstrap, redis_url, tmp_path_factory) -> Iterator[Fed]:
    """Publish the generated journal under a fresh prefix, run one worker
    with --top-revisions 1 and Redis until idle, and compute the reference
    with run_journal. Clears the namespace and deletes the topics after."""
    workdir = tmp_path_factory.mktemp("revisions-view")
    journal = write_journal(workdir / "journal.jsonl", generate_journal(SHAPE))
    with fed_view(bootstrap, redis_url, workdir, journal, worker_args=("--top-revisions", str(TOP_N)),
                  config=LedgerConfig(top_revisions_limit=TOP_N)) as view:
        revisions: dict[str, dict[str, dict]] = {}
        history: dict[tuple[str, str], list[dict]] = {}
        for record in read_jsonl(workdir / "embedded" / "revision-statistics.jsonl"):
            revisions.setdefault(record["scope_id"], {})[revision_member(record["artifact_ref"])] = record
            history.setdefault((record["scope_id"], revision_member(record["artifact_ref"])), []).append(record)
        statistics = view.expected

        # The journal is a real test of every feature below.
        rows = [row for scope_rows in revisions.values() for row in scope_rows.values()]
        assert sorted(revisions) == sorted(statistics) and len(statistics) == 2
        assert all(len(scope_rows) > TOP_N + 5 for scope_rows in revisions.values())
        assert all(len(record["top_revisions"]) == TOP_N for record in statistics.values())
        assert {row["terminal_recurred_streak"] for row in rows} >= {0, 1, 3}
        assert {row["repair_surface"] for row in rows} == set(SURFACES)
        assert any(row["yield"] is None for row in rows) and any(row["artifact_ref"]["revision"] == 2 for row in rows)
        assert any(row["low_yield"] for row in rows) and any(row["needs_review"] for row in rows)
        assert any(row["low_yield"] and row["needs_review"] for row in rows)
        assert len({row["unknown"] for row in rows}) > 3  # sort=unknown reorders (no binding suspect: the filter keeps none or all)
        yield Fed(view.prefix, view.namespace, redis_url, bootstrap, statistics, revisions, history)


@pytest.fixture(scope="module")
def api(fed) -> Iterator[httpx.Client]:
    """An httpx client on the API (uvicorn, loopback) reading the fed view."""
    settings = ApiSettings(redis_url=fed.redis_url, topic_prefix=fed.prefix)
    with running_api(settings) as base_url, httpx.Client(base_url=base_url, timeout=10) as client:
        yield client


@pytest.fixture
def raw(fed) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(fed.redis_url, decode_responses=True)
    yield client
    client.close()


def assert_view_equals_reference(fed: Fed, raw: redis.Redis) -> None:
    view = RedisView(fed.redis_url, namespace=fed.namespace)
    try:
        assert view.scopes() == sorted(fed.statistics)
        for scope_id, rows in fed.revisions.items():
            assert view.read(scope_id) == fed.statistics[scope_id]
            stored = raw.hgetall(view.revisions_key(scope_id))
            assert stored == {field: canonical_json(record).decode() for field, record in rows.items()}
    finally:
        view.close()


# ----------------------------------------------------------------- Redis


def test_worker_projects_the_last_row_of_every_revision_beyond_the_top_n(fed, raw):
    assert_view_equals_reference(fed, raw)
    for scope_id, rows in fed.revisions.items():
        key = Keys(fed.namespace).revisions(scope_id)
        assert raw.type(key) == "hash" and raw.hlen(key) == len(rows)
        # The scope's own hash still knows only its top N; the revisions hash knows them all.
        top = json.loads(raw.hget(Keys(fed.namespace).scope(scope_id), "top_revisions"))
        assert len(top) == TOP_N < len(rows)
        assert raw.zcard(f"{key[: -len(':revisions')]}:top") == TOP_N


# ----------------------------------------------------------------- API


def test_api_serves_every_revision_in_contract_order(api, fed):
    for scope_id, rows in fed.revisions.items():
        response = api.get(f"/scopes/{scope_id}/revisions", params={"limit": 100})
        assert response.status_code == 200
        body = response.json()
        assert (body["scope_id"], body["sort"], body["complete"]) == (scope_id, "streak", True)
        assert body["total"] == body["available"] == len(rows) > TOP_N
        assert (body["surface"], body["low_yield"], body["needs_review"], body["offset"]) == (None, None, None, 0)
        assert body["as_of_position"] == fed.statistics[scope_id]["as_of_position"]
        assert response.headers["x-as-of-position"] == str(fed.statistics[scope_id]["as_of_position"])
        assert without_rank(body["revisions"]) == [api_row(r) for r in sorted(rows.values(), key=contract_order)]
        assert [row["rank"] for row in body["revisions"]] == list(range(1, len(rows) + 1))
        # The default limit is 10.
        assert len(api.get(f"/scopes/{scope_id}/revisions").json()["revisions"]) == min(10, len(rows))


@pytest.mark.parametrize("sort", ["streak", "recurred", "yield", "selected", "unknown"])
def test_api_sorts(api, fed, sort):
    differs = False
    for scope_id, rows in fed.revisions.items():
        body = api.get(f"/scopes/{scope_id}/revisions", params={"sort": sort, "limit": 100}).json()
        expected = sorted(rows.values(), key=EXPECTED_ORDERS[sort])
        assert body["sort"] == sort
        assert without_rank(body["revisions"]) == [api_row(r) for r in expected]
        differs |= expected != sorted(rows.values(), key=contract_order)
    if sort == "yield":
        # Lowest yield first, revisions without a yield last.
        for scope_id in fed.revisions:
            yields = [row["yield"] for row in api.get(f"/scopes/{scope_id}/revisions", params={"sort": "yield", "limit": 100}).json()["revisions"]]
            known = [value for value in yields if value is not None]
            assert known == sorted(known) and yields[len(known):] == [None] * (len(yields) - len(known))
    assert differs or sort == "streak"  # every other sort changes the order somewhere: the case is a real test


def test_api_filters(api, fed):
    def get(scope_id: str, **params) -> dict:
        response = api.get(f"/scopes/{scope_id}/revisions", params={"limit": 100, **params})
        assert response.status_code == 200, response.text
        return response.json()

    for scope_id, rows in fed.revisions.items():
        ordered = sorted(rows.values(), key=contract_order)
        for surface in SURFACES:
            body = get(scope_id, surface=surface)
            assert without_rank(body["revisions"]) == [api_row(r) for r in ordered if r["repair_surface"] == surface]
            assert body["surface"] == surface and body["available"] == len(body["revisions"]) and body["total"] == len(rows)
        for name in ("low_yield", "needs_review", "binding_suspect"):
            for flag in (True, False):
                body = get(scope_id, **{name: str(flag).lower()})
                assert without_rank(body["revisions"]) == [api_row(r) for r in ordered if r[name] is flag]
                assert body[name] is flag
        both = get(scope_id, low_yield="true", needs_review="true", sort="recurred")
        expected = sorted((r for r in rows.values() if r["low_yield"] and r["needs_review"]), key=EXPECTED_ORDERS["recurred"])
        assert without_rank(both["revisions"]) == [api_row(r) for r in expected]
        assert [row["rank"] for row in both["revisions"]] == list(range(1, len(expected) + 1))
    everywhere = [get(scope_id, low_yield="true")["available"] for scope_id in fed.revisions]
    assert sum(everywhere) == sum(r["low_yield"] for rows in fed.revisions.values() for r in rows.values()) > 0


def test_api_pages_with_limit_and_offset(api, fed):
    for scope_id, rows in fed.revisions.items():
        pages, offset = [], 0
        while offset < len(rows):
            body = api.get(f"/scopes/{scope_id}/revisions", params={"sort": "selected", "limit": 3, "offset": offset}).json()
            assert (body["limit"], body["offset"], body["available"]) == (3, offset, len(rows))
            pages += body["revisions"]
            offset += 3
        assert [row["rank"] for row in pages] == list(range(1, len(rows) + 1))
        assert without_rank(pages) == [api_row(r) for r in sorted(rows.values(), key=EXPECTED_ORDERS["selected"])]
        beyond = api.get(f"/scopes/{scope_id}/revisions", params={"offset": len(rows)}).json()
        assert beyond["revisions"] == [] and beyond["available"] == len(rows)


def test_api_etag_follows_the_revision_rows(api, fed):
    scope_id = min(fed.revisions)
    path = f"/scopes/{scope_id}/revisions"
    first = api.get(path, params={"needs_review": "true"})
    etag = first.headers["etag"]
    again = api.get(path, params={"needs_review": "true"}, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    assert again.headers["x-as-of-position"] == str(fed.statistics[scope_id]["as_of_position"])

    # A new row for one revision (an earlier real row of it, from run_journal)
    # changes the ETag and the body, though the scope's statistics record did not change.
    target = max(fed.revisions[scope_id].values(), key=lambda r: r["terminal_recurred_streak"])
    earlier = fed.history[(scope_id, revision_member(target["artifact_ref"]))][-2]
    assert earlier != target
    writer = RedisView(fed.redis_url, namespace=fed.namespace)
    try:
        writer.submit([], revisions=[earlier])
        assert writer.pending == 0
        changed = api.get(path, params={"limit": 100}, headers={"If-None-Match": etag})
        assert changed.status_code == 200 and changed.headers["etag"] != etag
        row = next(r for r in changed.json()["revisions"] if r["artifact_ref"] == target["artifact_ref"])
        assert {name: row[name] for name in ROW_FIELDS} == api_row(earlier)
    finally:
        writer.submit([], revisions=[target])  # the worker's row again, for the other tests
        writer.close()
    assert api.get(path, params={"needs_review": "true"}, headers={"If-None-Match": etag}).status_code == 304


def test_api_unknown_scope_and_bad_parameters(api, fed):
    assert api.get("/scopes/no-such-scope/revisions").status_code == 404
    scope_id = min(fed.revisions)
    for query in ("sort=streaks", "surface=everything", "low_yield=perhaps", "binding_suspect=perhaps", "offset=-3", "limit=0"):
        response = api.get(f"/scopes/{scope_id}/revisions?{query}")
        assert response.status_code == 400, query


def test_openapi_documents_the_revisions_parameters(api):
    document = api.get("/openapi.json").json()
    operation = document["paths"]["/scopes/{scope}/revisions"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {
        "scope", "sort", "surface", "low_yield", "needs_review", "binding_suspect", "effect", "limit", "offset"}
    schema = document["components"]["schemas"]["RevisionList"]
    assert {"total", "available", "complete", "offset", "surface", "low_yield", "needs_review", "binding_suspect", "revisions"} <= set(schema["properties"])
    sort = next(p for p in operation["parameters"] if p["name"] == "sort")["schema"]
    assert set(sort["enum"]) == {"streak", "recurred", "yield", "selected", "unknown", "probability_helps"}  # contract §21.4


# ----------------------------------------------------------------- rank


def cli(fed: Fed, *args: str, columns: int = 220) -> subprocess.CompletedProcess:
    """``recurrence-ledger ARGS`` on ``fed``'s Redis and topic prefix."""
    return run_cli(*args, "--redis-url", fed.redis_url, "--topic-prefix", fed.prefix, columns=columns)


def rank_expected(fed: Fed, keep=lambda row: True) -> list[dict]:
    """rank's order, the API's sort=streak (contract §8): streak desc, ArtifactRef, signature_key, then scope id."""
    rows = [row for scope_rows in fed.revisions.values() for row in scope_rows.values() if keep(row)]

    def order(row: dict) -> tuple:
        ref = row["artifact_ref"]
        return (-row["terminal_recurred_streak"], ref["family"], ref["artifact_id"], ref["revision"], row["signature_key"], row["scope_id"])

    return sorted(rows, key=order)


def rank_rows(rows: list[dict]) -> list[dict]:
    return [{"scope_id": row["scope_id"], **{name: row[name] for name in ROW_FIELDS}} for row in rows]


def test_rank_lists_every_revision_beyond_the_top_n(fed):
    result = cli(fed, "rank", "--json", "--limit", "1000")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    expected = rank_expected(fed)
    assert len(rows) == len(expected) > TOP_N * len(fed.statistics)
    assert rank_rows(rows) == rank_rows(expected)
    assert [row["rank"] for row in rows] == list(range(1, len(rows) + 1))
    # Default limit 10; --scope keeps one scope.
    assert rank_rows(json.loads(cli(fed, "rank", "--json").stdout)) == rank_rows(expected[:10])
    scope_id = sorted(fed.revisions)[1]
    one = json.loads(cli(fed, "rank", "--json", "--scope", scope_id, "--limit", "100").stdout)
    assert rank_rows(one) == rank_rows([row for row in expected if row["scope_id"] == scope_id])


def test_rank_surface_and_low_yield_filters(fed):
    for surface in SURFACES:
        rows = json.loads(cli(fed, "rank", "--json", "--limit", "1000", "--surface", surface).stdout)
        assert rank_rows(rows) == rank_rows(rank_expected(fed, lambda row, s=surface: row["repair_surface"] == s))
    low = json.loads(cli(fed, "rank", "--json", "--limit", "1000", "--low-yield").stdout)
    assert rank_rows(low) == rank_rows(rank_expected(fed, lambda row: row["low_yield"])) != []
    both = json.loads(cli(fed, "rank", "--json", "--limit", "1000", "--low-yield", "--surface", "working_state").stdout)
    assert rank_rows(both) == rank_rows(rank_expected(fed, lambda row: row["low_yield"] and row["repair_surface"] == "working_state"))


def test_rank_table_shows_revisions_outside_top_revisions(fed):
    result = cli(fed, "rank", "--limit", "1000")
    assert result.returncode == 0, result.stderr
    in_top = {(scope_id, revision_member(row["artifact_ref"])) for scope_id, record in fed.statistics.items() for row in record["top_revisions"]}
    outside = [row for row in rank_expected(fed) if (row["scope_id"], revision_member(row["artifact_ref"])) not in in_top]
    assert outside
    lines = [line.split() for line in result.stdout.splitlines()]
    for rank, row in enumerate(rank_expected(fed), start=1):
        line = next(line for line in lines if line[:1] == [str(rank)])
        ref = row["artifact_ref"]
        assert line[1:4] == [row["scope_id"], ref["artifact_id"], f"r{ref['revision']}"]
        yield_text = "-" if row["yield"] is None else f"{row['yield']:.2f}"
        assert yield_text in line
        assert ("low" in line) is row["low_yield"]
    low = cli(fed, "rank", "--low-yield", "--limit", "1000")
    assert low.returncode == 0 and "low yield" in low.stdout


@pytest.mark.parametrize("columns", [100, 80])
def test_rank_table_fits_the_terminal_one_line_per_revision(fed, columns):
    result = cli(fed, "rank", "--limit", "1000", columns=columns)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= columns
    expected = rank_expected(fed)
    rows = [line.split() for line in lines if line.split()[:1] and line.split()[0].isdigit()]
    assert [int(line[0]) for line in rows] == list(range(1, len(expected) + 1))  # one line each, none broken
    for line, row in zip(rows, expected, strict=True):
        assert str(row["terminal_recurred_streak"]) in line[-6:]
        assert (line[-1] == "yes") is row["needs_review"]


def test_rank_without_revisions_says_so(fed):
    result = cli(fed, "rank", "--surface", "working_state", "--low-yield", "--scope", "no-such-scope")
    assert result.returncode == 1  # an unknown scope stays an error
    empty = run_cli("rank", "--redis-url", fed.redis_url, "--topic-prefix", fed.prefix + "empty.")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.strip() == f"no revisions in any scope of the Redis view rl:{fed.prefix}empty."


def test_rank_unknown_scope_fails(fed):
    result = cli(fed, "rank", "--scope", "no-such-scope")
    assert result.returncode == 1 and "unknown scope" in result.stderr


# ----------------------------------------------------------------- view rebuild (last: it rewrites the shared view)


def test_view_rebuild_restores_the_revisions_hash_after_redis_lost_it(fed, raw):
    view = RedisView(fed.redis_url, namespace=fed.namespace)
    try:
        assert view.clear() > 0
        assert view.scopes() == [] and all(view.revisions(scope_id) == [] for scope_id in fed.revisions)
    finally:
        view.close()
    result = run_cli("view", "rebuild", "--bootstrap", fed.bootstrap, "--topic-prefix", fed.prefix, "--redis-url", fed.redis_url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(fed.statistics)} scopes written" in result.stdout
    assert_view_equals_reference(fed, raw)
