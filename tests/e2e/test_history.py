"""The view follower and the history read models (processors/recurrence_ledger/read/follower.py,
processors/read_models.py) against the real broker and Redis: a real worker
fed with the timeline journal (tests/e2e/history_fixtures.py) and the worked
example writes the view after its commits, the follower (``view follow``, a
process) reads the committed topics into the same view and the read models.

- worker and follower converge on the same view keys, and a follower alone
  (its own group, on a cleared namespace) writes exactly what the worker
  wrote; the guard never puts back an older row;
- the verdict history, runs, review queue (every candidate under its review
  status, contract §18) and trend equal what the embedded runner publishes
  for the same journal (contract §7, §8, §10);
- ``view rebuild`` and ``rebuild --redis-url`` recreate read models equal to
  the live ones, ``follow-applied`` offsets included; applying the topics
  again (at-least-once) changes nothing.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from recurrence_ledger.embedded import run_journal
from recurrence_ledger.read.follower_view import FollowerView
from recurrence_ledger.read.history import ReadModels
from recurrence_ledger.read.pages import with_runs, runs_of
from recurrence_ledger.kafka.kafka_admin import group_members
from recurrence_ledger.read.follower import decode, view_group
from recurrence_ledger.kafka.kafka_io import read_raw
from recurrence_ledger.serde.codec import FIXED
from recurrence_ledger.catalogue import OBSERVATIONS, REVIEW_CANDIDATES, STATISTICS
from recurrence_ledger.read.projection import RedisView
from recurrence_ledger.read.keys import Keys, default_namespace
from tests.conftest import CASES, read_jsonl
from tests.e2e import harness
from tests.e2e.history_fixtures import SCOPE, namespace_keys, run_follower, snapshot, timeline_journal
from tests.e2e.harness import REPO
from tests.plugins.processes import cli_command, cli_env, run_cli
from tests.plugins.services import read_client

def is_view_key(key: str, namespace: str) -> bool:
    """A key of the view itself (not a read model, nor the followers' position, which a rebuild leaves out)."""
    layout = Keys(namespace)
    return bool(layout.layout_pattern().fullmatch(key)) and not layout.read_model_pattern().fullmatch(key) and key != layout.position


class Fed:
    """A prefix whose topics hold the journal's outputs, a namespace the
    worker and the follower wrote, and the embedded runner's outputs."""

    def __init__(self, prefix: str, workdir: Path, embedded: Path):
        self.prefix = prefix
        self.namespace = default_namespace(prefix)
        self.workdir = workdir
        self.embedded = embedded

    def outputs(self, topic: str) -> list[dict]:
        return read_jsonl(self.embedded / f"{topic}.jsonl")


@pytest.fixture(scope="module")
def fed(bootstrap, redis_url, tmp_path_factory) -> Iterator[Fed]:
    workdir = tmp_path_factory.mktemp("history")
    journal = timeline_journal(workdir / "timeline.jsonl", extra=CASES / "worked_example.jsonl")
    prefix = harness.new_prefix()
    try:
        harness.prepare(bootstrap, prefix, partitions=2)
        # Several transactions, so each view row has several versions (views are
        # tables: one record per changed key per transaction, contract §8).
        harness.publish_in_transactions(bootstrap, journal, prefix, workdir, 4, redis_url=redis_url)
        run_follower(bootstrap, redis_url, prefix, workdir / "follower.log")
        # view_batch=1: the embedded files keep every version of each row.
        run_journal(journal, workdir / "embedded", show_progress=False, view_batch=1)
        yield Fed(prefix, workdir, workdir / "embedded")
    finally:
        harness.remove_prefix(bootstrap, prefix, redis_url)


@pytest.fixture
def client(redis_url) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_url, decode_responses=True)
    yield connection
    connection.close()


def view_snapshot(client: redis.Redis, namespace: str) -> dict:
    return snapshot(client, [key for key in namespace_keys(client, namespace) if is_view_key(key, namespace)])


def read_model_snapshot(client: redis.Redis, namespace: str) -> dict:
    pattern = ReadModels(client, namespace).keys.read_model_pattern()
    return snapshot(client, [key for key in namespace_keys(client, namespace) if pattern.fullmatch(key)])


# ----------------------------------------------------------------- the view


def test_worker_and_follower_converge_and_a_follower_alone_writes_what_the_worker_wrote(fed, bootstrap, redis_url, client):
    both = view_snapshot(client, fed.namespace)
    assert Keys(fed.namespace).scope(SCOPE) in both and Keys(fed.namespace).scope_index("recurred") in both
    # A follower alone (its own group, app id "alone") on the cleared namespace writes what worker + follower wrote.
    RedisView(redis_url, namespace=fed.namespace).clear()
    assert view_snapshot(client, fed.namespace) == {}
    run_follower(bootstrap, redis_url, fed.prefix, fed.workdir / "follower-alone.log", app_id="alone")
    assert view_snapshot(client, fed.namespace) == both
    # The worker's last records once more, through the worker's writing code (RedisView.submit): nothing changes.
    statistics = {record["scope_id"]: record for record in fed.outputs("recurrence-statistics")}
    worker = RedisView(redis_url, namespace=fed.namespace)
    worker.submit(list(statistics.values()), revisions=fed.outputs("revision-statistics"))
    worker.close()
    assert view_snapshot(client, fed.namespace) == both


def test_a_follower_into_the_redis_cluster_writes_what_the_single_redis_holds(fed, bootstrap, redis_cluster_url, client):
    """The same topics followed into Redis Cluster (one follower, its own
    group): the view, the scope index and every read model, key for key
    and value for value, equal the single Redis's (the worker's in-process
    follower and a follower alone wrote those); the keys spread over the
    cluster's slots; following again changes nothing."""
    cluster = read_client(redis_cluster_url, decode_responses=True)
    RedisView(redis_cluster_url, namespace=fed.namespace).clear()
    try:
        run_follower(bootstrap, redis_cluster_url, fed.prefix, fed.workdir / "follower-cluster.log", app_id="cluster")
        on_cluster = view_snapshot(cluster, fed.namespace), read_model_snapshot(cluster, fed.namespace)
        assert on_cluster == (view_snapshot(client, fed.namespace), read_model_snapshot(client, fed.namespace))
        # The keys spread over slots (the scope's and the namespace's hash tags): which nodes own those slots is
        # the cluster's slot map, so two slots may sit on one node and the node count is not asserted.
        assert len({cluster.keyslot(key) for key in on_cluster[0]}) >= 2
        run_follower(bootstrap, redis_cluster_url, fed.prefix, fed.workdir / "follower-cluster.log", app_id="cluster-again")
        assert (view_snapshot(cluster, fed.namespace), read_model_snapshot(cluster, fed.namespace)) == on_cluster
    finally:
        RedisView(redis_cluster_url, namespace=fed.namespace).clear()
        cluster.close()


def test_the_guard_never_puts_back_an_older_row(fed, redis_url, client):
    history = [record for record in fed.outputs("recurrence-statistics") if record["scope_id"] == SCOPE]
    rows = [row for row in fed.outputs("revision-statistics") if row["scope_id"] == SCOPE and row["artifact_ref"]["artifact_id"] == "T1"]
    assert history[0]["as_of_position"] < history[-1]["as_of_position"] and len(rows) >= 3
    namespace = f"rltest-guard-{fed.prefix}"
    view = FollowerView(redis_url, namespace=namespace)
    try:
        view.submit([history[-1]], revisions=[rows[-1]])
        latest = view_snapshot(client, namespace)
        view.submit([history[0]], revisions=[rows[0]])  # older: left out
        assert view.pending == 0 and view.stale_skipped == 2
        assert view_snapshot(client, namespace) == latest
        plain = RedisView(redis_url, namespace=f"{namespace}-plain")
        plain.submit([history[-1]], revisions=[rows[-1]])
        plain.close()
        assert view_snapshot(client, f"{namespace}-plain") == {key.replace(namespace, f"{namespace}-plain"): value for key, value in latest.items()}
    finally:
        view.clear()
        RedisView(redis_url, namespace=f"{namespace}-plain").clear()
        view.close()


# ----------------------------------------------------------------- the read models


def observations_of(fed: Fed, artifact_id: str) -> list[tuple[int, str, str]]:
    return sorted(
        (record["task_outcome_position"], record["event"], record["task_outcome_ref"]["source_id"])
        for record in fed.outputs("recurrence-observations")
        if record["scope_id"] == SCOPE and record["artifact_ref"]["artifact_id"] == artifact_id
    )


def test_verdict_history_and_runs_equal_the_ledger(fed, client):
    models = ReadModels(client, fed.namespace)
    history = models.history(SCOPE, "T1", 1)
    assert history is not None and history.row["runs_reaching_threshold"] == [None, 7]
    verdicts = history.verdicts()
    assert sorted((row["task_outcome_position"], row["event"], row["task_outcome_id"]) for row in verdicts) == observations_of(fed, "T1")
    assert history.total == len(verdicts) == 12
    # Runs named as contract §8 names them, the unknown selection at 8, and every recurred verdict's failure_ref.
    assert [(row["task_outcome_position"], row["event"], row["run"]) for row in verdicts if row["event"] != "selected"] == [
        (4, "recurred", None), (5, "recurred", None), (6, "recurred", None), (7, "avoided", 7), (9, "recurred", 7), (10, "recurred", 7), (11, "recurred", 7),
    ]
    assert [row["task_outcome_position"] for row in verdicts if row["event"] == "selected" and row["verdict"] is None] == [8]
    ledger_refs = {
        record["task_outcome_ref"]["source_id"]: record["failure_ref"] for record in fed.outputs("recurrence-observations") if record["event"] == "recurred"
    }
    for row in verdicts:
        if row["event"] == "recurred":
            expected = ledger_refs[row["task_outcome_id"]]
            assert row["failure_ref"] == {name: expected[name] for name in ("item_kind", "item_index", "item_digest")}
    candidates = {record["run_start_position"]: record["candidate_id"] for record in fed.outputs("review-candidates") if record["scope_id"] == SCOPE}
    runs = history.runs()
    assert [(run["run_start_position"], run["recurred"], run["reaches_threshold"], run["current"], run["review_candidate"]) for run in runs] == [
        (None, 3, True, False, None),  # the avoided verdict at 7 ended the run of its candidate
        (7, 3, True, True, candidates[7]),
    ]
    assert models.history(SCOPE, "U1", 1).verdicts()[0]["event"] == "recurred"
    assert models.history("no-such-scope", "T1", 1) is None


def test_review_queue_files_every_candidate_under_its_review_status(fed, client):
    """Every published candidate is in the queue, whether an avoided verdict
    ended its run or not, under the status of its last ReviewStatus row of
    the embedded runner's (contract §18; open without one)."""
    models = ReadModels(client, fed.namespace)
    published = fed.outputs("review-candidates")
    statuses = {row["candidate_id"]: row["status"] for row in fed.outputs("review-status")}
    expected = {state: {record["candidate_id"] for record in published if statuses.get(record["candidate_id"], "open") == state}
                for state in ("open", "superseded", "approved", "rejected")}
    assert len(published) == 3  # timeline's runs None and 7, the worked example's D2
    everything = models.review_queue(None, None, 0, 50, "all")
    assert everything.total == everything.available == 3
    assert {item["candidate"]["candidate_id"]: item["candidate"] for item in everything.items} == {record["candidate_id"]: record for record in published}
    assert [item["timestamp"] for item in everything.items] == sorted(item["timestamp"] for item in everything.items)
    assert everything.counts == {state: len(ids) for state, ids in expected.items()}
    for state, wanted in expected.items():
        assert {item["candidate"]["candidate_id"] for item in models.review_queue(None, None, 0, 50, state).items} == wanted, state
    assert {item["candidate"]["scope_id"] for item in models.review_queue(SCOPE, None, 0, 50, "all").items} == {SCOPE}
    assert models.review_queue(None, "working_state", 0, 50, "all").available == 0
    assert models.review_queue(SCOPE, "experience_content", 0, 50, "all").available == 2


def test_trend_has_one_point_per_statistics_record(fed, bootstrap, client):
    records = [record for record in read_raw(bootstrap, fed.prefix + STATISTICS)]
    mine = [decode(STATISTICS, raw.partition, raw.offset, raw.timestamp, raw.value, FIXED) for raw in records]
    mine = [record for record in mine if record.value["scope_id"] == SCOPE]
    page = ReadModels(client, fed.namespace).trend(SCOPE, 0, 1000)
    assert page.total == page.retained == len(mine) == len(page.points)
    rows = page.rows()
    assert [row["as_of_position"] for row in rows] == [record.value["as_of_position"] for record in mine]
    assert [row["timestamp"] for row in rows] == [record.timestamp for record in mine]
    last = fed.outputs("recurrence-statistics")
    last = [record for record in last if record["scope_id"] == SCOPE][-1]
    assert {name: rows[-1][name] for name in ("selected", "recurred", "avoided", "unknown", "needing_review", "repeat_failure_rate")} == {
        name: last[name] for name in ("selected", "recurred", "avoided", "unknown", "needing_review", "repeat_failure_rate")
    }
    # Paging by position never splits a position: from 0 with limit 1, then from next_from_position.
    assert len(rows) >= 2
    first = ReadModels(client, fed.namespace).trend(SCOPE, 0, 1)
    second = ReadModels(client, fed.namespace).trend(SCOPE, first.next_from_position, 1)
    assert [row["as_of_position"] for row in first.rows() + second.rows()] == [row["as_of_position"] for row in rows[:2]]


def test_rebuild_recreates_the_live_read_models_and_applying_again_changes_nothing(fed, bootstrap, redis_url, client):
    live = read_model_snapshot(client, fed.namespace)
    assert any(":history:" in key for key in live) and Keys(fed.namespace).applied in live
    view_before = view_snapshot(client, fed.namespace)

    # At-least-once: every record of the three topics applied once more changes nothing.
    again = []
    for topic in (OBSERVATIONS, REVIEW_CANDIDATES, STATISTICS):
        again += [decode(topic, raw.partition, raw.offset, raw.timestamp, raw.value, FIXED) for raw in read_raw(bootstrap, fed.prefix + topic)]
    counts = ReadModels(client, fed.namespace).apply(again)
    assert (counts.observations, counts.candidates, counts.trend_points) == (0, 0, 0)
    assert read_model_snapshot(client, fed.namespace) == live

    result = run_cli("view", "rebuild", "--redis-url", redis_url, "--bootstrap", bootstrap, "--topic-prefix", fed.prefix)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "read models rebuilt" in " ".join(result.stdout.split())
    assert read_model_snapshot(client, fed.namespace) == live
    assert view_snapshot(client, fed.namespace) == view_before

    result = run_cli("rebuild", "--redis-url", redis_url, "--bootstrap", bootstrap, "--topic-prefix", fed.prefix, "--app-id", "ledger")
    assert result.returncode == 0, result.stdout + result.stderr
    assert read_model_snapshot(client, fed.namespace) == live

    # view clear deletes the read models with the view.
    scratch = f"rltest-clear-{fed.prefix}"
    models = ReadModels(client, scratch)
    models.apply(again)
    assert namespace_keys(client, scratch)
    RedisView(redis_url, namespace=scratch).clear()
    assert namespace_keys(client, scratch) == []


def test_a_rebuild_that_differs_from_the_published_views_leaves_redis_as_it_is(fed, bootstrap, redis_url, client):
    before = snapshot(client, namespace_keys(client, fed.namespace))
    # Rebuilt with a review threshold above every streak, needing_review and the rows differ from the published ones.
    result = run_cli("rebuild", "--redis-url", redis_url, "--bootstrap", bootstrap, "--topic-prefix", fed.prefix, "--app-id", "ledger",
                     "--review-threshold", "9")
    assert result.returncode == 1, result.stdout + result.stderr
    text = " ".join(result.stdout.split())
    assert "DIFFERS" in text and "the Redis view was not rewritten" in text and f"Redis view {fed.namespace} rewritten" not in text
    assert snapshot(client, namespace_keys(client, fed.namespace)) == before


def test_a_rebuild_refuses_to_start_while_view_followers_run(fed, bootstrap, redis_url, client, tmp_path):
    """A rebuild writes without the followers' guard: beside a running
    follower a row it wrote could be replaced by an older one for good."""
    group = view_group("ledger", fed.prefix)
    with open(tmp_path / "follower.log", "wb") as log:
        follower = subprocess.Popen(cli_command("view", "follow", "--bootstrap", bootstrap, "--redis-url", redis_url, "--topic-prefix", fed.prefix,
                                                "--app-id", "ledger"),
                                    cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=cli_env())
    try:
        harness.wait_until(lambda: group_members(bootstrap, group) > 0, 60, "the follower in its group")
        view_keys = lambda: [key for key in namespace_keys(client, fed.namespace) if key != Keys(fed.namespace).position]  # noqa: E731 - the follower records its position meanwhile
        before = snapshot(client, view_keys())
        for command in ("view", "rebuild"), ("rebuild",):
            result = run_cli(*command, "--app-id", "ledger", "--redis-url", redis_url, "--bootstrap", bootstrap, "--topic-prefix", fed.prefix)
            assert result.returncode == 2, result.stdout + result.stderr
            said = " ".join(result.stdout.split())
            assert f"refusing to start: 1 view follower(s) of the group {group} are running" in said
            assert "a follower killed without leaving its group stays a member until its session times out, 10 s" in said
        assert snapshot(client, view_keys()) == before
    finally:
        follower.terminate()
        assert follower.wait(60) == 0
    harness.wait_until(lambda: group_members(bootstrap, group) == 0, 60, "the follower gone from its group")
    result = run_cli("view", "rebuild", "--app-id", "ledger", "--redis-url", redis_url, "--bootstrap", bootstrap, "--topic-prefix", fed.prefix)
    assert result.returncode == 0, result.stdout + result.stderr


def test_history_is_bounded_with_a_total(read_redis_url):
    """N kept per revision (here 5 of 12), the total counted, runs named
    from the avoided positions even when their verdict was dropped (a
    single Redis and Redis Cluster)."""
    client = read_client(read_redis_url, decode_responses=True)
    namespace = "rltest-bounded-history"
    models = ReadModels(client, namespace, history_limit=5)
    try:
        records = []
        for offset, (position, event) in enumerate([(1, "recurred"), (2, "avoided"), (3, "recurred"), (4, "recurred"), (5, "recurred"),
                                                     (6, "avoided"), (7, "recurred"), (8, "recurred"), (9, "selected"), (10, "recurred"),
                                                     (11, "recurred"), (12, "recurred")]):
            records.append(synthetic_observation(offset, position, event))
        models.apply(records[:7])
        models.apply(records[7:])
        history = models.history("bounded", "B1", 1)
        assert history is None  # the scope is not in the view: the API answers 404
        client.hset(Keys(namespace).scope("bounded"), mapping={"as_of_position": 12, "review_threshold": 3})
        history = models.history("bounded", "B1", 1)
        assert history.total == 12 and len(history.entries) == 5
        verdicts = history.verdicts()
        assert [(row["task_outcome_position"], row["run"]) for row in verdicts] == [(8, 6), (9, 6), (10, 6), (11, 6), (12, 6)]
        runs = history.runs(verdicts)
        assert [(run["run_start_position"], run["recurred"], run["complete"], run["current"]) for run in runs] == [(6, 4, False, True)]
        assert with_runs([[3, "recurred", "o3", None, None, None, "x"]], floor=2)[0]["run"] == 2
        assert runs_of([], [None]) == []
    finally:
        models.clear()
        client.delete(Keys(namespace).scope("bounded"))
        client.close()


def synthetic_observation(offset: int, position: int, event: str):
    """A RecurrenceObservation-shaped record of revision B1 r1 in scope
    ``bounded`` (only what the read models read)."""
    from recurrence_ledger.read.records import Located

    failure = {"task_outcome_ref": {"source_type": "task_outcome", "source_id": f"o{position}"}, "item_kind": "check", "item_index": 0,
               "item_digest": "sha256:" + "0" * 64} if event == "recurred" else None
    value = {
        "observation_id": "sha256:" + f"{position:064x}", "scope_id": "bounded", "artifact_ref": {"family": "experience", "artifact_id": "B1", "revision": 1},
        "signature_key": "bounded failure", "event": event, "task_outcome_ref": {"source_type": "task_outcome", "source_id": f"o{position}"},
        "task_outcome_position": position, "failure_ref": failure,
    }
    return Located(OBSERVATIONS, 0, offset, 1_700_000_000_000 + offset, value)


def test_json_of_the_members_is_compact(fed, client):
    """A history member is a short JSON list (the memory per verdict is
    measured by benchmarks/read_models_benchmark.py)."""
    members = client.zrange(Keys(fed.namespace).history(SCOPE, "T1", 1), 0, -1)
    assert all(isinstance(json.loads(member), list) and len(member) < 160 for member in members)
