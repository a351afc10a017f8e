"""Admission on the real broker: the worker decides candidates
exactly as the embedded runner does, a candidate on its own topic waits —
across a worker restart — for a Task Outcome that arrives later on another
topic, and a replay writes no decision twice."""

from __future__ import annotations


from recurrence_ledger.runtime.replay import parse_start, run_replay
from tests.e2e import harness
from tests.journal import check, experience, outcome, write_journal

EXAMPLE = harness.REPO / "processors" / "recurrence_ledger" / "examples" / "openapi_drift.jsonl"





def test_the_example_journal_decides_candidates_like_run_journal(topic_prefix, bootstrap, tmp_path):
    harness.prepare(bootstrap, topic_prefix, partitions=2)
    harness.publish(bootstrap, EXAMPLE, topic_prefix)
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log")
    kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka")
    reference = harness.embedded(EXAMPLE, tmp_path / "embedded")
    harness.assert_same_outputs(kafka, reference)
    decisions = harness.lines(kafka["admission-decisions"])
    assert [(d["candidate_id"], d["decision"], d["reasons"]) for d in decisions] == [
        ("cand-client-regen", "accepted", []),
        ("cand-restated", "rejected", ["no_failure_evidence", "cue_restates_outcome", "missing_repair_surface"]),
    ]
    assert [(n["artifact_ref"]["artifact_id"], n["score"]) for n in decisions[0]["near_duplicates"]] == [("EXP-schema-drift", 0.8)]

    summary = run_replay(bootstrap, topic_prefix, parse_start("earliest"), app_id="ledger", show_progress=False)
    assert dict(summary.written) == {}
    assert summary.suppressed["admission-decisions"] == 2


def candidate_record(scope, cites):
    return {"topic": "experience-candidates", "value": {
        "candidate_id": "C-late", "scope_id": scope, "journal_position": 20, "artifact_id": None,
        "content": {"situation": "s", "action": "a", "outcome": "o", "lesson": "l", "failure": {
            "signature": {"recall_cue": "Port already bound again", "symptom": None},
            "repair_surface": "working_state",
            "verification": {"condition": "tests started in sandbox", "check_subject": "ports free before pytest"},
        }},
        "cited_sources": [{"source_type": "task_outcome", "source_id": cites}],
    }}


def test_a_candidate_waits_across_a_restart_for_an_outcome_on_another_topic(topic_prefix, bootstrap, tmp_path):
    scope = "admission-wait"
    harness.prepare(bootstrap, topic_prefix, partitions=1)
    harness.publish(bootstrap, write_journal(tmp_path / "a.jsonl", [
        experience(scope, 1, "E1", cue="port already bound"),
        candidate_record(scope, "O-late"),
    ]), topic_prefix, per_kind=True)
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "first.log")
    assert harness.count_records(bootstrap, harness.physical(topic_prefix, "admission-decisions")) == 0

    harness.publish(bootstrap, write_journal(tmp_path / "b.jsonl", [
        outcome(scope, 19, "O-late", checks=[check("Port already bound")]),
    ]), topic_prefix, per_kind=True)
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "second.log")  # restores the held candidate from the changelog
    kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka")
    [decision] = harness.lines(kafka["admission-decisions"])
    assert (decision["candidate_id"], decision["decision"]) == ("C-late", "accepted")
    assert [(r["task_outcome_ref"]["source_id"], r["item_kind"], r["item_index"]) for r in decision["failure_refs"]] == [
        ("O-late", "check", 0)]
    assert [(n["artifact_ref"]["artifact_id"], n["score"], n["same_cue"]) for n in decision["near_duplicates"]] == [
        ("E1", 0.8, False)]  # "port already bound" vs "… again": 2·2 / (2 + 3)
    # The same candidate published again is a duplicate: no second decision.
    harness.publish(bootstrap, write_journal(tmp_path / "c.jsonl", [candidate_record(scope, "O-late")]), topic_prefix, per_kind=True)
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "third.log")
    assert harness.count_records(bootstrap, harness.physical(topic_prefix, "admission-decisions")) == 1
