"""``explain`` and ``patterns export`` from the topics of a real broker
whose input holds records the worker dead-lettered — a line that is not
JSON, an event without its source-journal envelope, an outcome at a
position another took: the commands read the input as the worker did, so
they explain and export what they explain and export from the same
journal file, and name a dead-lettered outcome's reason and coordinates;
the worker's log says what it dead-lettered.
"""

from __future__ import annotations

import json
import re

from tests.conftest import CASES
from tests.e2e import harness
from tests.plugins.processes import run_cli


def test_explain_and_patterns_export_read_the_input_as_the_worker_did(topic_prefix, bootstrap, tmp_path):
    lines = (CASES / "patterns.jsonl").read_text().splitlines()
    first = json.loads(next(line for line in lines if '"task-outcomes"' in line))
    taken = {**first, "value": {**first["value"], "source_ref": {"source_type": "task_outcome", "source_id": "job-late"}}}
    journal = tmp_path / "journal.jsonl"
    journal.write_text("\n".join([
        *lines,
        '{"topic": "task-outcomes", "value": {"scope_id": ',  # not JSON
        json.dumps(first["value"]),  # an event without its envelope
        json.dumps(taken),  # a position already taken in its scope
    ]) + "\n")
    scope, outcome_id = first["value"]["scope_id"], first["value"]["source_ref"]["source_id"]
    harness.prepare(bootstrap, topic_prefix, partitions=3)
    harness.publish(bootstrap, journal, topic_prefix)
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log")
    kafka = ("--bootstrap", bootstrap, "--topic-prefix", topic_prefix)
    said = [line for line in (tmp_path / "worker.log").read_text().splitlines() if "dead-lettered" in line]
    assert len(said) == 1 and re.search(  # the worker says what it dead-lettered, by reason, and the first record's coordinates and words
        rf"WARNING recurrence_ledger.worker: dead-lettered 3 input records \(invalid_envelope 1, malformed_json 1, position_conflict 1\); "
        rf"the first: {re.escape(topic_prefix)}source-journal\[\d\]@\d+ [a-z_]+: .", said[0]), said

    explained = run_cli("explain", scope, outcome_id, "--json", *kafka)
    assert explained.returncode == 0, explained.stdout + explained.stderr
    assert json.loads(explained.stdout) == json.loads(run_cli("explain", scope, outcome_id, "--json", "--journal", journal).stdout)
    assert json.loads(explained.stdout)["failure_items"][0]["match"]["result"] == "matched"

    late = run_cli("explain", scope, "job-late", *kafka)
    assert late.returncode == 1
    said = " ".join(late.stdout.split())
    assert re.search(rf"error: task outcome 'job-late' of scope '{re.escape(scope)}' was dead-lettered, so the ledger never applied it: "
                     rf"position_conflict at {re.escape(topic_prefix)}source-journal\[\d\]@\d+: ", said), said

    exported = run_cli("patterns", "export", "--group", "", *kafka)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert exported.stdout == run_cli("patterns", "export", "--group", "", "--journal", journal).stdout
    assert "\n## schema migration lock timeout\n" in exported.stdout
