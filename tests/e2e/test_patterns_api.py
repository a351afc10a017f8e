"""The signature patterns on the read side (contract §23): a real worker fed
with tests/cases/patterns.jsonl (groups by "/", pattern threshold 2)
projects the ``signature-patterns`` view into Redis through its view
follower, and ``GET /patterns?group=`` answers each group's patterns equal
to the embedded runner's final values of that group — never a scope of
another group, not in a row, a count or an error message (§23.1);
``view rebuild`` writes the same from the topic."""

from __future__ import annotations

import json

import httpx
import pytest

from recurrence_ledger.api.settings import ApiSettings
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.ledger.fields import field_catalogue
from recurrence_ledger.ledger.patterns import pattern_rank
from recurrence_ledger.ledger.records import SignaturePattern
from tests.conftest import CASES, final_views, read_jsonl
from tests.e2e.api_server import fed_view, running_api
from tests.plugins.processes import run_cli

POLICY = ("--pattern-group-separator", "/", "--pattern-threshold", "2")
CONFIG = LedgerConfig(pattern_group_separator="/", pattern_threshold=2)
GROUPS = ("teamA", "teamB", "solo")


@pytest.fixture(scope="module")
def view(bootstrap, redis_url, tmp_path_factory):
    """The patterns case projected into Redis by a real worker, and the embedded run of it."""
    workdir = tmp_path_factory.mktemp("patterns-api")
    with fed_view(bootstrap, redis_url, workdir, CASES / "patterns.jsonl", worker_args=POLICY, config=CONFIG) as fed:
        finals = final_views("signature-patterns", read_jsonl(workdir / "embedded" / "signature-patterns.jsonl")).values()
        yield fed, {group: sorted((row for row in finals if row["group"] == group), key=pattern_rank) for group in GROUPS}


@pytest.fixture(scope="module")
def api(view):
    fed, _ = view
    with running_api(ApiSettings(redis_url=fed.redis_url, topic_prefix=fed.prefix)) as base_url, httpx.Client(base_url=base_url, timeout=10) as client:
        yield client


#: The case's scope ids.
SCOPES = ("teamA/svc1", "teamA/svc2", "teamA/svc3", "teamB/svc1", "teamB/svc2", "solo")


def scopes_named(text: str, group: str) -> set[str]:
    """The scope ids of groups other than ``group`` that an answer's
    ``text`` names — besides the group it was asked for, which it echoes."""
    text = text.replace(json.dumps(group), "")
    return {scope for scope in SCOPES if scope in text and scope.split("/")[0] != group}


def test_each_group_gets_its_own_patterns_as_the_embedded_runner_published_them(api, view):
    _, expected = view
    assert [row["signature_key"] for row in expected["teamA"]] == ["schema migration lock timeout", "flaky dns mirror"]
    for group in GROUPS:
        answer = api.get("/patterns", params={"group": group})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body == {"group": group, "total": len(expected[group]), "available": len(expected[group]), "min_scopes": 1, "limit": 100,
                        "offset": 0, "patterns": expected[group]}
        assert scopes_named(answer.text, group) == set(), group
    wide = api.get("/patterns", params={"group": "teamA", "min_scopes": 2}).json()
    assert (wide["available"], [row["scope_count"] for row in wide["patterns"]]) == (1, [3])


def test_no_answer_names_a_scope_of_another_group(api):
    # A scope id, a group prefix, the empty group of a deployment without a
    # separator: none of them is a group here, and each answer is empty.
    for group in ("teamA/svc1", "team", "", "teamC"):
        answer = api.get("/patterns", params={"group": group})
        assert answer.status_code == 200 and answer.json()["patterns"] == [] and answer.json()["total"] == 0
        assert scopes_named(answer.text, group) == set()
    assert api.get("/patterns").json() == api.get("/patterns", params={"group": ""}).json()  # the default group: ""
    for query in ({"group": "teamA", "scope": "teamB/svc1"}, {"group": "x" * 5000}, {"group": "teamA", "limit": 0}, {"group": "teamA", "limit": 101}):
        answer = api.get("/patterns", params=query)
        assert answer.status_code == 400, (query, answer.text)
        assert not any(scope in answer.text for scope in SCOPES), answer.text  # the error names the parameter, not the view


def test_the_etag_answers_304_until_the_group_changes(api):
    first = api.get("/patterns", params={"group": "teamB"})
    again = api.get("/patterns", params={"group": "teamB"}, headers={"If-None-Match": first.headers["ETag"]})
    assert (again.status_code, again.content) == (304, b"")
    other = api.get("/patterns", params={"group": "teamA"})
    assert other.headers["ETag"] != first.headers["ETag"]


def test_the_field_catalogue_states_a_pattern_s_fields(api):
    shown = api.get("/field-catalogue").json()["pattern"]
    assert {name: (label["title"], label["description"]) for name, label in shown.items()} == {
        name: (label["title"], label["description"]) for name, label in field_catalogue(SignaturePattern).items()}
    assert list(field_catalogue(SignaturePattern)) == ["group", "signature_key", "scope_count", "scopes", "recurred"]


def test_view_rebuild_writes_the_patterns_from_the_topic(api, view, bootstrap):
    fed, expected = view
    before = {group: api.get("/patterns", params={"group": group}).json() for group in GROUPS}
    result = run_cli("view", "rebuild", "--bootstrap", bootstrap, "--topic-prefix", fed.prefix, "--redis-url", fed.redis_url)
    assert result.returncode == 0, result.stdout + result.stderr
    for group in GROUPS:
        assert api.get("/patterns", params={"group": group}).json() == before[group]
        assert before[group]["patterns"] == expected[group]
