"""``run-journal --jobs N``: the journal split by scope across N processes
gives the files of one process byte for byte (facts in input order, view
batches at the same input records, the pattern stage merged exactly) and
the same summary — on every case journal and on random journals."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recurrence_ledger.catalogue import OUTPUT_TOPICS
from recurrence_ledger.embedded.parallel import owner, record_scope, run_journal_jobs
from recurrence_ledger.embedded.runner import RunSummary
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.workload import Workload, generate_journal
from tests.conftest import REPO

CASES = sorted((REPO / "tests" / "cases").glob("*.jsonl"))
#: Lines every run dead-letters, whatever the state: no scope to route by.
BAD_LINES = [b"not json", b'{"topic": "task-outcomes"}', b'{"topic": "nowhere", "value": {"scope_id": "s"}}', b"[1, 2]",
             b'{"topic": "task-outcomes", "value": {"scope_id": 7}}', b'\xef\xbb\xbf{"topic": 1, "value": {}}']


def run(journal: Path, out: Path, jobs: int, config: LedgerConfig | None = None, view_batch: int = 1000) -> tuple[dict[str, bytes], RunSummary]:
    summary = run_journal_jobs(journal, out, config, jobs, show_progress=False, validate_outputs=True, view_batch=view_batch)
    assert sorted(path.name for path in out.iterdir()) == sorted(f"{topic}.jsonl" for topic in OUTPUT_TOPICS)  # no work files left
    return {topic: (out / f"{topic}.jsonl").read_bytes() for topic in OUTPUT_TOPICS}, summary


def summary_of(summary: RunSummary) -> tuple:
    return (summary.records, summary.statistics, summary.review_status, summary.effects, +summary.admission, summary.dead_letter_reasons, summary.lines)


def assert_same_as_one_process(journal: Path, base: Path, config: LedgerConfig | None = None, view_batch: int = 1000) -> dict[str, bytes]:
    files, summary = run(journal, base / "jobs1", 1, config, view_batch)
    for jobs in (2, 3):
        split_files, split_summary = run(journal, base / f"jobs{jobs}", jobs, config, view_batch)
        assert [topic for topic in OUTPUT_TOPICS if split_files[topic] != files[topic]] == [], f"--jobs {jobs}"
        assert summary_of(split_summary) == summary_of(summary)
    return files


@pytest.mark.parametrize("view_batch", [1, 7, 1000])
@pytest.mark.parametrize("journal", CASES, ids=lambda path: path.stem)
def test_every_case_journal_gives_the_files_of_one_process(journal, view_batch, tmp_path):
    config = LedgerConfig(pattern_threshold=2) if journal.stem == "patterns" else None
    files = assert_same_as_one_process(journal, tmp_path, config, view_batch)
    # holdout_waiting's outcome waits for a withheld revision until the horizon decides it unlinked (contract §21.2): no fact
    assert files["recurrence-observations"] != b"" or journal.stem == "holdout_waiting"
    assert files["recurrence-statistics"] != b""


def test_the_scopes_of_a_case_are_split_across_processes():
    scopes = {record_scope(line) for line in (REPO / "tests" / "cases" / "patterns.jsonl").read_bytes().splitlines() if line.strip()}
    assert len({owner(scope_id, 1, 3) for scope_id in scopes}) == 3


def test_a_line_without_a_scope_is_owned_by_its_position():
    assert [record_scope(line) for line in BAD_LINES] == [None, None, "s", None, None, None]  # "s": bad, but routed by its scope
    assert [owner(None, record, 3) for record in (1, 2, 3, 4)] == [1, 2, 0, 1]
    assert record_scope(b'{"topic": "task-outcomes", "value": {"scope_id": "caf\\u00e9"}}') == "caf\u00e9"
    assert record_scope(b'{"topic": "task-outcomes", "value": {"scope_id": "\\ud800"}}') == "\ud800"  # strict decoder's reading


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    scopes=st.integers(1, 6), outcomes=st.integers(3, 25), heads=st.integers(1, 4), handoffs=st.integers(0, 3),
    seed=st.integers(0, 2**16), candidates=st.sampled_from([0.0, 0.4]), shared_cues=st.integers(0, 3), groups=st.integers(0, 2),
    shuffle=st.floats(0, 0.3), bad=st.integers(0, 4), view_batch=st.sampled_from([1, 4, 50, 1000]), horizon=st.sampled_from([None, 5, 10_000]),
)
def test_a_random_journal_gives_the_files_of_one_process(tmp_path_factory, scopes, outcomes, heads, handoffs, seed, candidates, shared_cues,
                                                          groups, shuffle, bad, view_batch, horizon):
    shape = Workload(scopes=scopes, outcomes_per_scope=outcomes, heads_per_scope=heads, handoffs=handoffs, seed=seed,
                     candidates=candidates, shared_cues=shared_cues, groups=groups)
    rng = random.Random(seed)
    lines = [json.dumps(record).encode() for record in generate_journal(shape)]
    for _ in range(int(len(lines) * shuffle)):  # late arrivals
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    for _ in range(bad):
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(BAD_LINES))
    lines.insert(rng.randrange(len(lines) + 1), b"   ")  # a blank line counts as no record
    if lines:
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(lines))  # a duplicate
    base = tmp_path_factory.mktemp("random")
    journal = base / "journal.jsonl"
    journal.write_bytes(b"\n".join(lines) + b"\n")
    config = LedgerConfig(pattern_threshold=2, pattern_group_separator="/" if groups else None, provenance_horizon=horizon)
    assert_same_as_one_process(journal, base, config, view_batch)
