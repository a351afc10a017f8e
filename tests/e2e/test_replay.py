"""Replay jobs on the real broker: a replay over any window adds no record
whose identity already exists, reuses recorded matches after the state was
rebuilt from nothing, and completes a ledger that missed inputs."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer

from recurrence_ledger import catalogue
from recurrence_ledger.runtime import replay
from recurrence_ledger.runtime.replay import parse_start, run_replay
from recurrence_ledger.workload import Workload, generate_journal
from tests.conftest import case
from tests.e2e import harness
from tests.journal import check, experience, outcome, write_journal
from tests.plugins.processes import run_cli





def output_counts(bootstrap, prefix):
    return {topic: harness.count_records(bootstrap, harness.physical(prefix, topic)) for topic in harness.LEDGER_TOPICS}



def test_replaying_a_finished_run_twice_writes_nothing(topic_prefix, bootstrap, tmp_path):
    journal, _ = case("worked_example")
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=2)
    harness.publish(bootstrap, journal, prefix)
    harness.run_to_idle(bootstrap, prefix, tmp_path / "worker.log")
    before = output_counts(bootstrap, prefix)
    assert before["recurrence-observations"] == 7

    plan = run_replay(bootstrap, prefix, parse_start("earliest"), app_id="ledger", dry_run=True, show_progress=False)
    assert sum(r.end - r.low for r in plan.ranges) == 12
    assert plan.records_read == 0
    for start in ("earliest", "position:5", "offsets:source-journal/0=3,source-journal/1=3"):
        summary = run_replay(bootstrap, prefix, parse_start(start), app_id="ledger", show_progress=False)
        assert summary.records_read == 12
        assert dict(summary.written) == {}, start
        assert summary.suppressed["recurrence-matches"] >= 0
    assert output_counts(bootstrap, prefix) == before


def first_half_processed(bootstrap: str, prefix: str, tmp_path) -> tuple[list[dict], object, int]:  # noqa: ANN001 - tmp_path
    """A generated journal (its records, its file, half its length) whose
    first half is published under ``prefix`` and processed by a worker run
    to idle; the second half is the test's."""
    records = list(generate_journal(Workload(scopes=6, outcomes_per_scope=30, heads_per_scope=4, handoffs=2, seed=9, candidates=0.3)))
    journal = write_journal(tmp_path / "journal.jsonl", records)
    half = len(records) // 2
    harness.prepare(bootstrap, prefix, partitions=2)
    harness.publish(bootstrap, write_journal(tmp_path / "first.jsonl", records[:half]), prefix)
    harness.run_to_idle(bootstrap, prefix, tmp_path / "first.log")
    return records, journal, half


def test_replay_leaves_the_records_after_the_workers_offsets_to_the_workers(topic_prefix, bootstrap, tmp_path):
    """Records that arrived while the worker was stopped are its to process:
    a replay reads only up to the group's committed offsets, so the worker,
    restarted, writes their facts once — a replay that wrote them first saw
    them written twice (the worker's state does not learn what it wrote)."""
    records, journal, half = first_half_processed(bootstrap, topic_prefix, tmp_path)
    prefix = topic_prefix
    processed = {(r.topic, r.partition): r.end for r in run_replay(bootstrap, prefix, parse_start("earliest"), app_id="ledger", dry_run=True,
                                                                     show_progress=False).ranges}
    harness.publish(bootstrap, write_journal(tmp_path / "rest.jsonl", records[half:]), prefix)  # while the worker is stopped
    summary = run_replay(bootstrap, prefix, parse_start("earliest"), app_id="ledger", show_progress=False)
    assert {(r.topic, r.partition): r.end for r in summary.ranges} == processed
    assert sum(processed.values()) == half and dict(summary.written) == {}
    harness.run_to_idle(bootstrap, prefix, tmp_path / "second.log")

    harness.assert_exactly_once(bootstrap, prefix, harness.embedded(journal, tmp_path / "embedded"), tmp_path / "kafka")


def test_replay_while_the_workers_commit_more_leaves_the_views_and_patterns_to_them(topic_prefix, bootstrap, tmp_path, monkeypatch):
    """The workers commit input beyond the replay's ranges while it reads:
    the view rows on the topics are then newer than the replay's state, and
    writing its own would roll them back (and the pattern stage's records
    are theirs too): it writes none, says why, and the views stay final."""
    records, journal, half = first_half_processed(bootstrap, topic_prefix, tmp_path)
    prefix = topic_prefix
    planned = replay.plan

    def plan_then_the_workers_go_on(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - replay.plan's
        ranges = planned(*args, **kwargs)
        harness.publish(bootstrap, write_journal(tmp_path / "rest.jsonl", records[half:]), prefix)
        harness.run_to_idle(bootstrap, prefix, tmp_path / "second.log")
        return ranges

    monkeypatch.setattr(replay, "plan", plan_then_the_workers_go_on)
    summary = run_replay(bootstrap, prefix, parse_start("earliest"), app_id="ledger", show_progress=False)
    assert summary.records_read == half and dict(summary.written) == {}
    assert summary.views_left is not None and "committed input beyond the replay's end" in summary.views_left
    assert summary.patterns_left == summary.views_left
    harness.assert_exactly_once(bootstrap, prefix, harness.embedded(journal, tmp_path / "embedded"), tmp_path / "kafka")


def test_replay_leaves_the_pattern_records_to_a_pattern_stage_that_has_not_consumed_the_repartition_topic(
        topic_prefix, bootstrap, tmp_path):
    """Counts still on the repartition topic are the workers' pattern stage's
    to turn into candidates: a replay that wrote them first would see the
    workers write them again."""
    journal, _ = case("worked_example")
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=2)
    harness.publish(bootstrap, journal, prefix)
    harness.run_to_idle(bootstrap, prefix, tmp_path / "worker.log")
    assert run_replay(bootstrap, prefix, parse_start("earliest"), app_id="ledger", show_progress=False).patterns_left is None
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(catalogue.physical(catalogue.PATTERN_REPARTITION, prefix), b"not consumed yet", key=b"k", partition=0)
    assert producer.flush(30) == 0
    summary = run_replay(bootstrap, prefix, parse_start("earliest"), app_id="ledger", show_progress=False)
    assert summary.views_left is None and dict(summary.written) == {}
    assert summary.patterns_left is not None and "has not consumed" in summary.patterns_left


def test_replay_refuses_to_start_while_the_workers_are_in_their_group_without_a_commit(topic_prefix, bootstrap, tmp_path):
    """A worker that has joined but not committed yet writes every fact: a
    replay that read every input to its end then would write each twice."""
    journal, _ = case("worked_example")
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=2)
    harness.publish(bootstrap, journal, prefix)
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": catalogue.physical("ledger", prefix), "enable.auto.commit": False})
    try:
        member.subscribe([catalogue.physical(catalogue.SOURCE_JOURNAL, prefix)])
        deadline = time.monotonic() + 60
        while not member.assignment():
            assert time.monotonic() < deadline, "the member was given no partition"
            member.poll(0.2)
        with pytest.raises(replay.WorkersStarting, match="have committed nothing yet"):
            run_replay(bootstrap, prefix, parse_start("earliest"), app_id="ledger", show_progress=False)
    finally:
        member.close()
    assert run_replay(bootstrap, prefix, parse_start("earliest"), app_id="ledger", show_progress=False).records_read == 12


def test_replay_completes_a_ledger_no_worker_group_has_processed_exactly_once(topic_prefix, bootstrap, tmp_path):
    """Without committed offsets of the deployment's group (no worker ran,
    or the group was deleted for a reset) a replay reads every input to its
    end and writes the ledger; again, it writes nothing."""
    records = list(generate_journal(Workload(scopes=6, outcomes_per_scope=30, heads_per_scope=4, handoffs=2, seed=9, candidates=0.3)))
    journal = write_journal(tmp_path / "journal.jsonl", records)
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=2)
    harness.publish(bootstrap, journal, prefix)
    summary = run_replay(bootstrap, prefix, parse_start("earliest"), app_id="ledger", show_progress=False)
    assert summary.records_read == len(records) and summary.written["recurrence-observations"] > 0

    harness.assert_exactly_once(bootstrap, prefix, harness.embedded(journal, tmp_path / "embedded"), tmp_path / "kafka")
    again = run_replay(bootstrap, prefix, parse_start("earliest"), app_id="ledger", show_progress=False)
    assert dict(again.written) == {}


def test_replay_reuses_recorded_matches_instead_of_recomputing(topic_prefix, bootstrap, tmp_path):
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=1)
    scope, cue = "late-head", "port already bound"
    harness.publish(bootstrap, write_journal(tmp_path / "a.jsonl", [
        experience(scope, 1, "E1", cue=cue),
        outcome(scope, 10, "O1", checks=[check(cue)]),
    ]), prefix)
    harness.run_to_idle(bootstrap, prefix, tmp_path / "first.log")
    # A revision published at an earlier journal position arrives late on its
    # per-kind topic: the worker keeps O1's frozen match (late_revisions 1).
    harness.publish(bootstrap, write_journal(tmp_path / "b.jsonl", [experience(scope, 5, "E1", revision=2, cue=cue)]), prefix, per_kind=True)
    harness.run_to_idle(bootstrap, prefix, tmp_path / "second.log")
    kafka = harness.exported(bootstrap, prefix, tmp_path / "kafka")
    [match] = harness.lines(kafka["recurrence-matches"])
    assert match["artifact_ref"]["revision"] == 1
    assert harness.last_statistics(kafka["recurrence-statistics"])[scope]["late_revisions"] == 1

    # A replay rebuilds state from nothing; recomputing O1 now could pick
    # revision 2, but the recorded match is reused and nothing is written.
    summary = run_replay(bootstrap, prefix, parse_start("earliest"), app_id="ledger", show_progress=False)
    assert dict(summary.written) == {}
    assert summary.suppressed["recurrence-matches"] == 0  # reused, not even recomputed
    again = harness.exported(bootstrap, prefix, tmp_path / "again")
    assert Counter(again["recurrence-matches"].splitlines()) == Counter(kafka["recurrence-matches"].splitlines())


def test_rebuild_from_the_ledger_topics_equals_the_live_state(topic_prefix, bootstrap, redis_url, tmp_path):
    import redis as redis_client

    from recurrence_ledger.read.projection import RedisView
    from recurrence_ledger.read.keys import default_namespace

    journal = write_journal(
        tmp_path / "journal.jsonl", generate_journal(Workload(scopes=5, outcomes_per_scope=40, heads_per_scope=3, handoffs=2, seed=2, candidates=0.3))
    )
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=2)
    harness.publish(bootstrap, journal, prefix)
    harness.run_to_idle(bootstrap, prefix, tmp_path / "worker.log")
    view = RedisView(redis_url, namespace=default_namespace(prefix))
    redis_client.Redis.from_url(redis_url).set(f"{default_namespace(prefix)}:scope:stale", "x")  # junk the rebuild must clear
    try:
        result = run_cli("rebuild", "--bootstrap", bootstrap, "--topic-prefix", prefix, "--redis-url", redis_url)
        assert result.returncode == 0, result.stdout + result.stderr
        output = " ".join(result.stdout.split())
        assert output.count("equal") == 7  # 5 scopes, the revisions view and the signature patterns
        assert "revisions rebuilt, equal to the revision-statistics topic" in output
        assert "rewritten: 5 scopes" in output
        reference = harness.embedded(journal, tmp_path / "embedded")
        rows = {}
        for row in harness.lines(reference["revision-statistics"]):
            rows.setdefault(row["scope_id"], {})[(row["artifact_ref"]["artifact_id"], row["artifact_ref"]["revision"])] = row
        for scope_id, record in harness.last_statistics(reference["recurrence-statistics"]).items():
            assert view.read(scope_id) == record
            assert sorted(view.revisions(scope_id), key=lambda r: (r["artifact_ref"]["artifact_id"], r["artifact_ref"]["revision"])) == [
                rows[scope_id][key] for key in sorted(rows[scope_id])]
        assert sorted(view.scopes()) == sorted(harness.last_statistics(reference["recurrence-statistics"]))
    finally:
        view.clear()


def test_replay_over_per_kind_topics_keeps_frozen_decisions(topic_prefix, bootstrap, tmp_path):
    """An outcome decided unlinked (its receipt came past the horizon) stays
    decided: a replay reading the per-kind topics in another order, where the
    receipt is known in time, writes nothing for it (contract §5, §10)."""
    from tests.journal import handoff, receipt

    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=1)
    scope, cue = "frozen", "port already bound"
    harness.publish(bootstrap, write_journal(tmp_path / "a.jsonl", [
        experience(scope, 1, "E7", cue=cue),
        handoff(scope, 2, "H12", [("E7", 1)]),
        outcome(scope, 4, "O1", receipt_id="R12", checks=[check(cue)]),
        experience(scope, 20_000, "FAR", cue="far away"),  # the horizon passes for O1
    ]), prefix, per_kind=True)
    harness.run_to_idle(bootstrap, prefix, tmp_path / "first.log")
    harness.publish(bootstrap, write_journal(tmp_path / "b.jsonl", [receipt(scope, 3, "R12", "H12")]), prefix, per_kind=True)
    harness.run_to_idle(bootstrap, prefix, tmp_path / "second.log")
    before = harness.exported(bootstrap, prefix, tmp_path / "before")
    assert [o["event"] for o in harness.lines(before["recurrence-observations"])] == ["recurred"]

    summary = run_replay(bootstrap, prefix, parse_start("earliest"), app_id="ledger", show_progress=False)
    assert summary.written.get("recurrence-observations", 0) == 0
    assert summary.written.get("recurrence-matches", 0) == 0
    assert summary.written.get("recurrence-statistics", 0) == 0
    after = harness.exported(bootstrap, prefix, tmp_path / "after")
    assert after["recurrence-observations"] == before["recurrence-observations"]
    assert after["recurrence-statistics"] == before["recurrence-statistics"]


def test_a_replayed_match_is_preceded_by_its_candidate_set_even_when_the_set_was_first_used_before_the_window(
        topic_prefix, bootstrap, tmp_path):
    """contract §6: the CandidateSet precedes the first match that cites it.
    Here nothing was processed yet, and the replay's window starts after the
    outcome that first used the set: the set is written once, just before the
    in-window match that cites it."""
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=1)
    scope, cue = "window", "port already bound"
    harness.publish(bootstrap, write_journal(tmp_path / "a.jsonl", [
        experience(scope, 1, "E1", cue=cue),
        outcome(scope, 2, "O1", checks=[check(cue)]),
        outcome(scope, 3, "O2", checks=[check(cue)]),
    ]), prefix)
    summary = run_replay(bootstrap, prefix, parse_start("position:3"), app_id="ledger", show_progress=False)
    assert summary.written["candidate-sets"] == 1 and summary.written["recurrence-matches"] == 1
    kafka = harness.exported(bootstrap, prefix, tmp_path / "kafka")
    [candidate_set] = harness.lines(kafka["candidate-sets"])
    [match] = harness.lines(kafka["recurrence-matches"])
    assert match["task_outcome_ref"]["source_id"] == "O2" and match["candidate_refs"] is None
    assert match["candidate_set_digest"] == candidate_set["candidate_set_digest"]
    assert [(r["artifact_id"], r["revision"]) for r in candidate_set["candidate_refs"]] == [("E1", 1)]
    # A replay over everything adds O1's match, citing the set already there.
    again = run_replay(bootstrap, prefix, parse_start("earliest"), app_id="ledger", show_progress=False)
    assert again.written["recurrence-matches"] == 1 and again.written.get("candidate-sets", 0) == 0
    assert dict(run_replay(bootstrap, prefix, parse_start("earliest"), app_id="ledger", show_progress=False).written) == {}
