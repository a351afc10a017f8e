"""The Redis projection of ScopeStatistics (contract §8, processors/view.py)
against a real Redis (env REDIS_URL) and a real Kafka broker (env
KAFKA_BOOTSTRAP_SERVERS). Missing or unreachable services fail the tests,
never skip them.

Records are the embedded runner's own statistics and revision-statistics
output for the fixture cases in tests/cases (worked_example, minimum_case, and
minimum_case again under a scope id with a colon), never hand-written; only the tie-order
test derives a variant of a real record. Every test works in its own random namespace and removes its
keys (and topics, and the second Redis it starts) when done.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import statistics
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from recurrence_ledger.embedded import run_journal
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.ledger.statistics import rank_key
from recurrence_ledger.ledger.statistics import revision_key
from recurrence_ledger.read.keys import SCOPE_SORTS, Keys, escape_scope
from recurrence_ledger.read.projection import (
    COUNTER_FIELDS,
    RedisView,
    member,
    revision_member,
)
from recurrence_ledger.read.rebuild import rebuild_from_topic
from recurrence_ledger.serde.codec import encode
from tests.conftest import case, read_jsonl
from tests.plugins.services import RedisServer

#: The scopes of tests/cases/worked_example.jsonl and minimum_case.jsonl.
WORKED_SCOPE = "dns-mirror"
MINIMUM_SCOPE = "migration-lock"
#: A scope id with a colon: its keys must not collide with another scope's.
COPY_SCOPE = "migration-lock:copy"
#: Budget for one submit with Redis down, after the first failure (seconds).
DOWN_SUBMIT_BUDGET = 0.2  # behaviour, not speed: well under one socket timeout (0.5 s), i.e. no connection attempt


# ---------------------------------------------------------------- services




def _namespace() -> str:
    return f"rltest-{uuid.uuid4().hex[:12]}"


def _keys(client: redis.Redis, namespace: str) -> list[str]:
    return sorted(client.scan_iter(match=f"{namespace}:*", count=1000))


@pytest.fixture
def raw(redis_url) -> Iterator[redis.Redis]:
    """A plain client on the shared Redis, for looking at keys directly."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def make_view(redis_url, raw) -> Iterator:
    """``make_view(**kwargs)``: a RedisView on the shared Redis in a fresh
    random namespace; every namespace is cleared and checked empty after the
    test."""
    views: list[RedisView] = []

    def make(**kwargs) -> RedisView:
        view = RedisView(redis_url, namespace=kwargs.pop("namespace", _namespace()), **kwargs)
        views.append(view)
        return view

    yield make
    for view in views:
        view.clear()
    for view in views:
        assert _keys(raw, view.namespace) == []
        view.close()


# ---------------------------------------------------------------- records


@pytest.fixture(scope="module")
def case_runs(tmp_path_factory) -> Path:
    """The embedded runner's output directories (worked, minimum, copy) for
    the fixture cases, the copy being minimum_case under COPY_SCOPE."""
    base = tmp_path_factory.mktemp("view-cases")
    worked, _ = case("worked_example")
    minimum, _ = case("minimum_case")
    copy = base / "minimum_copy.jsonl"
    with open(copy, "w") as out:
        for line in minimum.read_text().splitlines():
            entry = json.loads(line)
            entry["value"]["scope_id"] = COPY_SCOPE
            out.write(json.dumps(entry) + "\n")
    for journal, name in ((worked, "worked"), (minimum, "minimum"), (copy, "copy")):
        # view_batch=1: a view record after every journal record that changed
        # it, so each scope and revision has a history of versions.
        run_journal(journal, base / name, show_progress=False, view_batch=1)
    return base


def _outputs(base: Path, topic: str) -> list[dict]:
    return [record for name in ("worked", "minimum", "copy") for record in read_jsonl(base / name / f"{topic}.jsonl")]


@pytest.fixture(scope="module")
def histories(case_runs) -> dict[str, list[dict]]:
    """Scope id → its statistics records in publication order, from the
    embedded runner on the fixture cases (3 scopes, 10–12 versions each)."""
    records = _outputs(case_runs, "recurrence-statistics")
    result: dict[str, list[dict]] = {}
    for record in records:
        result.setdefault(record["scope_id"], []).append(record)
    assert sorted(result) == sorted([COPY_SCOPE, MINIMUM_SCOPE, WORKED_SCOPE])
    assert all(len(history) >= 2 for history in result.values())
    return result


@pytest.fixture(scope="module")
def revision_records(case_runs) -> list[dict]:
    """Every RevisionStatistics record of the fixture cases in publication
    order (several per revision: each time its figures changed)."""
    records = _outputs(case_runs, "revision-statistics")
    per_revision = {(r["scope_id"], revision_member(r["artifact_ref"])) for r in records}
    assert len(records) > len(per_revision) >= 6  # the case is a real test: rows are replaced
    return records


def _last_rows(records: list[dict]) -> dict[str, dict[str, dict]]:
    """scope_id → {revision_member → last record}."""
    last: dict[str, dict[str, dict]] = {}
    for record in records:
        last.setdefault(record["scope_id"], {})[revision_member(record["artifact_ref"])] = record
    return last


def _interleaved(histories: dict[str, list[dict]]) -> list[dict]:
    """Every record of every scope, round-robin across scopes (each scope's
    own order kept), like a worker publishing several scopes."""
    out, index = [], 0
    while any(index < len(h) for h in histories.values()):
        out += [h[index] for h in histories.values() if index < len(h)]
        index += 1
    return out


def _last(histories: dict[str, list[dict]]) -> dict[str, dict]:
    return {scope_id: history[-1] for scope_id, history in histories.items()}


# ---------------------------------------------------------------- layout and reads


def test_submit_then_read_returns_the_exact_last_record(make_view, histories):
    view = make_view()
    view.submit(_interleaved(histories))
    assert (view.pending, view.healthy) == (0, True)
    assert view.scopes() == sorted(histories)
    for scope_id, last in _last(histories).items():
        assert view.read(scope_id) == last
    assert view.read("no-such-scope") is None


def test_one_submit_per_record_also_ends_on_the_last_record(make_view, histories):
    view = make_view()
    for record in _interleaved(histories):
        view.submit([record])
    for scope_id, last in _last(histories).items():
        assert view.read(scope_id) == last


def test_hgetall_is_one_call_with_every_counter(make_view, histories, raw):
    view = make_view()
    view.submit(_interleaved(histories))
    sent: list[tuple] = []
    original = view._client.execute_command

    def counting(*args, **kwargs):
        sent.append(args)
        return original(*args, **kwargs)

    view._client.execute_command = counting
    for scope_id, last in _last(histories).items():
        sent.clear()
        assert view.read(scope_id) == last
        assert [args[0] for args in sent] == ["HGETALL"]

        fields = raw.hgetall(Keys(view.namespace).scope(scope_id))
        assert set(fields) == {*COUNTER_FIELDS, "unknown_reasons", "top_revisions", "record", "critical_recurrences", "effects"}  # §22's and §21's alert figures
        for name in COUNTER_FIELDS:
            assert fields[name] == str(last[name])
        assert fields["unknown_reasons"] == canonical_json(last["unknown_reasons"]).decode()
        assert fields["review_threshold"] == str(last["review_threshold"]) == "3"  # the ledger's policy, published in the record
        assert fields["top_revisions"] == canonical_json(last["top_revisions"]).decode()
        assert fields["record"] == canonical_json(last).decode()


def test_key_layout_and_colon_in_a_scope_id(make_view, histories, raw):
    view = make_view()
    view.submit(_interleaved(histories))
    ns = view.namespace
    layout = Keys(ns)
    # The scope set, the scope index of GET /scopes and its positions: the namespace's hash tag.
    expected = {f"{ns}:{{{ns}}}:scopes", f"{ns}:{{{ns}}}:scopes:at", *(f"{ns}:{{{ns}}}:scopes:by:{sort}" for sort in SCOPE_SORTS)}
    for scope_id, last in _last(histories).items():
        key = f"{ns}:scope:{{{escape_scope(scope_id)}}}"  # the scope's hash tag
        assert key == layout.scope(scope_id)
        expected.add(key)
        if last["top_revisions"]:
            expected.add(f"{key}:top")
        if any(row["terminal_recurred_streak"] >= 3 for row in last["top_revisions"]):
            expected.add(f"{key}:review")
    assert set(_keys(raw, ns)) == expected
    assert f"{ns}:scope:{{migration-lock%3Acopy}}" in expected
    assert raw.smembers(layout.scopes) == set(histories)
    assert raw.type(f"{ns}:scope:{{{WORKED_SCOPE}}}") == "hash"
    assert raw.type(f"{ns}:scope:{{{WORKED_SCOPE}}}:top") == "zset"
    assert raw.type(f"{ns}:scope:{{{WORKED_SCOPE}}}:review") == "set"


def test_top_follows_contract_order(make_view, histories):
    view = make_view()
    view.submit(_interleaved(histories))
    for scope_id, last in _last(histories).items():
        assert view.top(scope_id, 10) == last["top_revisions"]
        assert view.top(scope_id, 1) == last["top_revisions"][:1]
    # Tie on streak 1 in the minimum case: M4 r1 before M4 r2 (ArtifactRef order).
    tied = view.top(MINIMUM_SCOPE, 10)
    assert [(r["artifact_ref"]["revision"], r["terminal_recurred_streak"]) for r in tied] == [(1, 1), (2, 1)]
    assert view.top(WORKED_SCOPE, 0) == []
    assert view.top("no-such-scope", 5) == []


def test_top_breaks_ties_by_artifact_ref_then_signature_key_not_by_redis_bytes(make_view, histories):
    """A variant of the worked example's last record whose top_revisions has a
    four-way tie where Redis' byte order of the members (artifact_id first,
    revision as text: "10" < "9") differs from contract §8's order."""
    last = histories[WORKED_SCOPE][-1]
    d2 = last["top_revisions"][0]
    ties = [
        {"artifact_ref": {"family": "experience", "artifact_id": "D2", "revision": 9}, "signature_key": "b", "terminal_recurred_streak": 2},
        {"artifact_ref": {"family": "experience", "artifact_id": "D2", "revision": 10}, "signature_key": "a", "terminal_recurred_streak": 2},
        {"artifact_ref": {"family": "experience", "artifact_id": "D2", "revision": 9}, "signature_key": "a", "terminal_recurred_streak": 2},
        {"artifact_ref": {"family": "experience", "artifact_id": "A0", "revision": 99}, "signature_key": "z", "terminal_recurred_streak": 2},
    ]
    record = {**last, "scope_id": f"{last['scope_id']}-ties", "top_revisions": [d2, *ties]}
    contract_order = [d2, ties[3], ties[2], ties[0], ties[1]]
    redis_byte_order = [d2, *sorted(ties, key=member)]
    assert contract_order != redis_byte_order  # the case is a real test

    view = make_view()
    view.submit([record])
    assert view.top(record["scope_id"], 10) == contract_order
    # The cut falls inside the tie: the contract decides who is in.
    assert view.top(record["scope_id"], 3) == contract_order[:3]


def test_review_set_holds_revisions_at_or_over_the_threshold(make_view, histories):
    last = _last(histories)
    worked = {row["artifact_ref"]["artifact_id"]: member(row) for row in last[WORKED_SCOPE]["top_revisions"]}
    assert {r["artifact_ref"]["artifact_id"]: r["terminal_recurred_streak"] for r in last[WORKED_SCOPE]["top_revisions"]} == {"D2": 4, "K5": 3}

    default = make_view()
    default.submit(_interleaved(histories))
    assert default.review(WORKED_SCOPE) == {worked["D2"], worked["K5"]}
    assert len(default.review(WORKED_SCOPE)) == last[WORKED_SCOPE]["needing_review"]  # exact: needing_review ≤ N
    assert default.review(MINIMUM_SCOPE) == set()  # streaks of 1

    # The review set is the rows the ledger flagged (needs_review), whatever their streak: the view has no threshold.
    def flagged_at(threshold: int) -> list[dict]:
        return [{**record, "top_revisions": [{**row, "needs_review": row["terminal_recurred_streak"] >= threshold} for row in record["top_revisions"]]}
                for record in _interleaved(histories)]

    strict = make_view()
    strict.submit(flagged_at(4))
    assert strict.review(WORKED_SCOPE) == {worked["D2"]}

    lenient = make_view()
    lenient.submit(flagged_at(1))
    assert lenient.review(MINIMUM_SCOPE) == {member(row) for row in last[MINIMUM_SCOPE]["top_revisions"]}

    # A later record with a smaller top list replaces the sets, not adds to them.
    earlier = histories[WORKED_SCOPE][4]  # needing_review 1: D2 only, at 3
    default.submit([earlier])
    assert default.review(WORKED_SCOPE) == {member(earlier["top_revisions"][0])}
    assert default.top(WORKED_SCOPE) == earlier["top_revisions"]


def test_invalid_record_raises_and_keeps_nothing(make_view, histories):
    view = make_view()
    good = histories[WORKED_SCOPE][-1]
    bad = {**histories[MINIMUM_SCOPE][-1], "selected": -1}
    with pytest.raises(ValueError):
        view.submit([good, bad])
    assert view.pending == 0 and view.scopes() == []


def test_clear_deletes_only_this_namespace(make_view, histories, raw):
    view = make_view()
    ns = view.namespace
    nested = make_view(namespace=f"{ns}:prod.")  # as default_namespace nests a prefixed deployment's
    view.submit(_interleaved(histories))
    nested.submit(_interleaved(histories))
    nested_keys = _keys(raw, nested.namespace)
    foreign = [f"{ns}:dashboard:settings", f"{ns}x:scopes", f"{ns}:scope:a:b:c"]
    for key in foreign:
        raw.set(key, "not mine")
    try:
        # scopes and its positions, 3 hashes, 3 sorted sets, 1 review set, the 4 sorted sets of the scope index
        assert view.clear() == 2 + 3 + 3 + 1 + 4
        assert sorted(_keys(raw, ns) + _keys(raw, f"{ns}x")) == sorted(foreign + nested_keys)
        assert view.read(WORKED_SCOPE) is None and view.scopes() == []
        assert nested.read(WORKED_SCOPE) == histories[WORKED_SCOPE][-1]
    finally:
        raw.delete(*foreign)


# ---------------------------------------------------------------- the revisions view


def test_revisions_hash_holds_the_last_row_of_every_revision(make_view, histories, revision_records, raw):
    view = make_view()
    view.submit(_interleaved(histories), revisions=revision_records)
    assert (view.pending, view.pending_revisions, view.healthy) == (0, 0, True)
    last = _last_rows(revision_records)
    assert sorted(last) == sorted(histories)
    for scope_id, rows in last.items():
        key = f"{view.namespace}:scope:{{{escape_scope(scope_id)}}}:revisions"
        assert view.revisions_key(scope_id) == key
        assert raw.type(key) == "hash"
        # One field per revision: the ArtifactRef's canonical JSON; the value the last record, canonical JSON.
        assert raw.hgetall(key) == {field: canonical_json(record).decode() for field, record in rows.items()}
        assert view.revisions(scope_id) == sorted(rows.values(), key=rank_key)
        # The scope's statistics record is untouched by the revision rows beside it.
        assert view.read(scope_id) == histories[scope_id][-1]
    ref = {"family": "experience", "artifact_id": "P1", "revision": 1}
    assert revision_member(ref) == '{"artifact_id":"P1","family":"experience","revision":1}'
    assert view.revisions("no-such-scope") == []


def test_revision_rows_one_submit_per_record_end_on_the_last_row(make_view, histories, revision_records):
    """The worker submits after every commit: rows of a revision replace each
    other, rows of other revisions stay."""
    view = make_view()
    for record in revision_records:
        view.submit([], revisions=[record])
    for scope_id, rows in _last_rows(revision_records).items():
        assert view.revisions(scope_id) == sorted(rows.values(), key=rank_key)
    # Revision rows alone do not make a scope: the scope set lists scopes with a statistics record.
    assert view.scopes() == []
    view.submit(_interleaved(histories))
    assert view.scopes() == sorted(histories)
    assert not view.needs_rebuild  # the scope set appearing after rows alone is no vanished namespace
    for scope_id, rows in _last_rows(revision_records).items():
        assert view.revisions(scope_id) == sorted(rows.values(), key=rank_key)


def test_revision_rows_are_last_writer_wins_in_submission_order(make_view, revision_records):
    """An older row submitted after a newer one wins: the view trusts the
    submission order (the worker's publication order), not the content."""
    scope_id, field = WORKED_SCOPE, revision_member({"family": "experience", "artifact_id": "D2", "revision": 1})
    rows = [r for r in revision_records if r["scope_id"] == scope_id and revision_member(r["artifact_ref"]) == field]
    assert [r["terminal_recurred_streak"] for r in rows] == [1, 2, 3, 4]
    view = make_view()
    view.submit([], revisions=[rows[-1]])
    view.submit([], revisions=[rows[0]])
    assert [r for r in view.revisions(scope_id) if revision_member(r["artifact_ref"]) == field] == [rows[0]]
    # Within one batch the later record of a revision wins.
    view.submit([], revisions=[rows[0], rows[-1], rows[2]])
    assert [r for r in view.revisions(scope_id) if revision_member(r["artifact_ref"]) == field] == [rows[2]]


def test_invalid_revision_record_raises_and_keeps_nothing(make_view, histories, revision_records):
    view = make_view()
    bad = {**revision_records[-1], "selected": -1}
    with pytest.raises(ValueError):
        view.submit([histories[WORKED_SCOPE][-1]], revisions=[revision_records[0], bad])
    unknown_field = {**revision_records[0], "streak": 1}
    with pytest.raises(ValueError):
        view.submit([], revisions=[unknown_field])
    assert (view.pending, view.pending_revisions) == (0, 0)
    assert view.scopes() == [] and view.revisions(WORKED_SCOPE) == [] and view.revisions(revision_records[-1]["scope_id"]) == []


def test_clear_deletes_the_revisions_hashes(make_view, histories, revision_records, raw):
    view = make_view()
    view.submit(_interleaved(histories), revisions=revision_records)
    ns = view.namespace
    revision_keys = {Keys(ns).revisions(scope_id) for scope_id in histories}
    keys = set(_keys(raw, ns))
    assert revision_keys <= keys
    assert f"{ns}:scope:{{migration-lock%3Acopy}}:revisions" in keys
    # scopes, 3 hashes, 3 sorted sets, 1 review set, 3 revisions hashes, the 4 sorted sets of the scope index
    assert view.clear() == len(keys) == 2 + 3 + 3 + 1 + 3 + 4  # scopes and their positions, …
    assert _keys(raw, ns) == []


# ---------------------------------------------------------------- Redis down


@pytest.fixture
def second_redis(redis_server) -> RedisServer:
    """A redis-server of the test's own, started (tests.plugins.services.RedisServer)."""
    server = redis_server()
    server.start()
    return server


def _timed_submits(view: RedisView, records: list[dict]) -> list[float]:
    durations = []
    for record in records:
        started = time.perf_counter()
        view.submit([record])
        durations.append(time.perf_counter() - started)
    return durations


@pytest.mark.serial  # times submits: nothing else may load the machine meanwhile
def test_redis_down_keeps_pending_fast_and_catches_up(second_redis, histories, caplog):
    """Redis stopped: submit neither raises nor waits, keeps the latest record
    per scope; Redis back: one flush writes them. A Redis without persistence
    comes back empty, so a scope written before the outage and not submitted
    since is missing — the view says so (needs_rebuild)."""
    caplog.set_level(logging.INFO, logger="recurrence_ledger.read.projection")
    view = RedisView(second_redis.url, namespace=_namespace(), retry_seconds=0.5)
    try:
        updated = {scope_id: h for scope_id, h in histories.items() if scope_id != COPY_SCOPE}
        before = {scope_id: h[: len(h) // 2] for scope_id, h in updated.items()}
        during = {scope_id: h[len(h) // 2 :] for scope_id, h in updated.items()}
        view.submit(_interleaved(before) + histories[COPY_SCOPE])
        assert (view.healthy, view.pending) == (True, 0)

        second_redis.stop()
        records = _interleaved(during)
        durations = _timed_submits(view, records)
        assert (view.healthy, view.pending) == (False, len(updated))
        first, rest = durations[0], durations[1:]
        assert max(rest) < DOWN_SUBMIT_BUDGET, rest
        print(
            f"\nRedis stopped: first failing submit {first * 1e3:.2f} ms; next {len(rest)} submits "
            f"median {statistics.median(rest) * 1e6:.1f} µs, max {max(rest) * 1e6:.1f} µs"
        )
        # Back-off: flush(force=False) does not try before retry_seconds.
        assert view.flush(force=False) == 0
        time.sleep(0.6)
        started = time.perf_counter()
        assert view.flush(force=False) == 0 and not view.healthy  # tried, still down
        print(f"Redis stopped: retry after back-off {(time.perf_counter() - started) * 1e3:.2f} ms")
        down_warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "is down" in r.getMessage()]
        assert len(down_warnings) == 1

        second_redis.start()
        assert view.flush() == len(updated)
        assert (view.healthy, view.pending) == (True, 0)
        for scope_id, history in updated.items():
            assert view.read(scope_id) == history[-1]
            assert view.top(scope_id) == history[-1]["top_revisions"]
        assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and "is back" in r.getMessage()]
        # The restarted Redis has no persistence: the untouched scope is gone.
        assert view.read(COPY_SCOPE) is None
        assert view.needs_rebuild
        # New records after the recovery go straight through.
        view.submit([histories[COPY_SCOPE][-1]])
        assert view.read(COPY_SCOPE) == histories[COPY_SCOPE][-1] and view.pending == 0
    finally:
        if view.healthy:
            view.clear()
        view.close()


@pytest.mark.serial  # times submits
def test_hung_redis_costs_one_socket_timeout_then_nothing(second_redis, histories):
    """Redis frozen (SIGSTOP): connections open but no reply comes. The first
    submit waits one socket_timeout, the following ones return at once."""
    view = RedisView(second_redis.url, namespace=_namespace(), retry_seconds=5.0, socket_timeout=0.3)
    try:
        history = histories[WORKED_SCOPE]
        view.submit(history[:3])
        os.kill(second_redis.pid(), signal.SIGSTOP)
        try:
            durations = _timed_submits(view, history[3:])
        finally:
            os.kill(second_redis.pid(), signal.SIGCONT)
        assert (view.healthy, view.pending) == (False, 1)
        assert 0.25 < durations[0] < 2.0, durations[0]
        assert max(durations[1:]) < DOWN_SUBMIT_BUDGET
        print(
            f"\nRedis hung: first submit {durations[0] * 1e3:.0f} ms (socket_timeout 300 ms); "
            f"next {len(durations) - 1} max {max(durations[1:]) * 1e6:.1f} µs"
        )
        assert view.flush() == 1
        assert view.read(WORKED_SCOPE) == history[-1] and view.healthy
    finally:
        view.clear()
        view.close()


def test_redis_down_keeps_the_latest_revision_rows_pending_then_writes_them(second_redis, histories, revision_records):
    """Redis stopped: revision rows wait in memory, the latest per revision,
    with their scope's record; Redis back: one flush writes them all."""
    view = RedisView(second_redis.url, namespace=_namespace(), retry_seconds=0.5)
    try:
        second_redis.stop()
        for record in _interleaved(histories):
            view.submit([record])  # never raises
        view.submit([], revisions=revision_records)
        last = _last_rows(revision_records)
        assert not view.healthy
        assert view.pending == len(histories)
        assert view.pending_revisions == sum(len(rows) for rows in last.values())
        second_redis.start()
        assert view.flush() == len(histories)
        assert (view.healthy, view.pending, view.pending_revisions) == (True, 0, 0)
        for scope_id, rows in last.items():
            assert view.revisions(scope_id) == sorted(rows.values(), key=rank_key)
            assert view.read(scope_id) == histories[scope_id][-1]
    finally:
        if view.healthy:
            view.clear()
        view.close()


# ---------------------------------------------------------------- rebuild from the topic


def _create_statistics_topic(bootstrap: str, topic: str, name: str = "recurrence-statistics") -> None:
    """Create ``topic`` (4 partitions) with the catalogue configuration of
    ``name`` and wait until every partition has a leader."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from recurrence_ledger.catalogue import BY_NAME
    from recurrence_ledger.kafka.kafka_admin import wait_for_topics

    admin = AdminClient({"bootstrap.servers": bootstrap})
    spec = BY_NAME[name]
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1, config=spec.config())])[topic].result(timeout=30)
    assert wait_for_topics(admin, [topic], timeout=30) == {topic: 4}


def _delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.delete_topics([topic])[topic].result(timeout=30)


def test_rebuild_from_topic_holds_the_last_version_of_each_scope(make_view, bootstrap, histories, revision_records, raw):
    from confluent_kafka import Producer

    prefix = f"rltest-{uuid.uuid4().hex[:8]}."
    topic = prefix + "recurrence-statistics"
    revisions_topic = prefix + "revision-statistics"
    _create_statistics_topic(bootstrap, topic)
    _create_statistics_topic(bootstrap, revisions_topic, "revision-statistics")
    try:
        producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": f"{prefix}view-test", "enable.idempotence": True}
        )
        producer.init_transactions(30)
        producer.begin_transaction()
        for record in _interleaved(histories):  # every version: 10–12 per scope
            producer.produce(topic, key=record["scope_id"].encode(), value=encode("ScopeStatistics", record))
        for record in revision_records:  # every row of every revision, keyed as the worker keys them
            key = revision_key(record["scope_id"], record["artifact_ref"]).encode()
            producer.produce(revisions_topic, key=key, value=encode("RevisionStatistics", record))
        # A tombstone removes its revision from the rebuilt view.
        gone = next(r for r in reversed(revision_records) if r["scope_id"] == MINIMUM_SCOPE)
        producer.produce(revisions_topic, key=revision_key(gone["scope_id"], gone["artifact_ref"]).encode(), value=None)
        producer.commit_transaction(30)
        # An aborted transaction must not count (read_committed): an old version of a scope and of a revision.
        producer.begin_transaction()
        stale = histories[WORKED_SCOPE][0]
        producer.produce(topic, key=stale["scope_id"].encode(), value=encode("ScopeStatistics", stale))
        stale_row = next(r for r in revision_records if r["scope_id"] == WORKED_SCOPE)
        producer.produce(
            revisions_topic, key=revision_key(stale_row["scope_id"], stale_row["artifact_ref"]).encode(),
            value=encode("RevisionStatistics", stale_row),
        )
        # Delivered before the abort: an EndTxn sent while the partitions are
        # still being added to the transaction can fail INVALID_TXN_STATE
        # (confluentinc/librdkafka#4849), as test_kafka_io's aborts also flush.
        producer.flush(30)
        producer.abort_transaction(30)

        view = make_view()
        leftover = {**histories[MINIMUM_SCOPE][-1], "scope_id": "gone-scope"}
        leftover_row = {**revision_records[0], "scope_id": "gone-scope"}
        view.submit([leftover], revisions=[leftover_row])  # a scope the topics do not know: the rebuild clears it
        assert view.scopes() == ["gone-scope"] and view.revisions("gone-scope") == [leftover_row]

        started = time.perf_counter()
        assert rebuild_from_topic(view, bootstrap, topic_prefix=prefix, timeout=30) == 3
        elapsed = time.perf_counter() - started
        print(f"\nrebuild_from_topic: {sum(map(len, histories.values())) + len(revision_records) + 3} records, 3 scopes, {elapsed * 1e3:.0f} ms")
        assert view.scopes() == sorted(histories)
        for scope_id, last in _last(histories).items():
            assert view.read(scope_id) == last
            assert view.top(scope_id) == last["top_revisions"]
        assert view.review(WORKED_SCOPE) == {member(row) for row in histories[WORKED_SCOPE][-1]["top_revisions"]}
        expected = _last_rows(revision_records)
        del expected[MINIMUM_SCOPE][revision_member(gone["artifact_ref"])]
        assert expected[MINIMUM_SCOPE]  # the scope keeps its other revision
        for scope_id, rows in expected.items():
            assert raw.hgetall(view.revisions_key(scope_id)) == {field: canonical_json(r).decode() for field, r in rows.items()}
        assert view.revisions("gone-scope") == []
    finally:
        _delete_topic(bootstrap, topic)
        _delete_topic(bootstrap, revisions_topic)


def test_rebuild_without_the_revision_statistics_topic_raises_and_clears_nothing(make_view, bootstrap, histories, revision_records):
    prefix = f"rltest-{uuid.uuid4().hex[:8]}."
    topic = prefix + "recurrence-statistics"
    _create_statistics_topic(bootstrap, topic)
    try:
        view = make_view()
        view.submit([histories[WORKED_SCOPE][-1]], revisions=revision_records)
        with pytest.raises(LookupError):
            rebuild_from_topic(view, bootstrap, topic_prefix=prefix, timeout=10)
        assert view.read(WORKED_SCOPE) == histories[WORKED_SCOPE][-1]
        assert view.revisions(WORKED_SCOPE) == sorted(_last_rows(revision_records)[WORKED_SCOPE].values(), key=rank_key)
    finally:
        _delete_topic(bootstrap, topic)


def test_rebuild_of_a_missing_topic_raises_and_clears_nothing(make_view, bootstrap, histories):
    view = make_view()
    view.submit([histories[WORKED_SCOPE][-1]])
    with pytest.raises(LookupError):
        rebuild_from_topic(view, bootstrap, topic_prefix=f"rltest-missing-{uuid.uuid4().hex[:8]}.", timeout=10)
    assert view.read(WORKED_SCOPE) == histories[WORKED_SCOPE][-1]
