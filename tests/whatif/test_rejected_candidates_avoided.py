"""contract §20 with §18: a what-if counts the review candidates reviewers
rejected that the alternative policy would not have raised
(``rejected_candidates_avoided``), from the ReviewDecision records of the
same inputs — a journal here, the review-decisions topic in
tests/e2e/test_whatif_topics.py."""

from __future__ import annotations

import json
from pathlib import Path

from recurrence_ledger.embedded.parallel import owner
from recurrence_ledger.ledger.normalize import normalize
from recurrence_ledger.ledger.streaks import review_candidate_id
from tests.journal import check, experience, outcome, write_journal
from tests.plugins.processes import run_cli

S = "reviewed"


def candidate_of(artifact_id: str) -> str:
    """The candidate_id of the first run of ``artifact_id`` r1 (contract §8)."""
    return review_candidate_id(S, {"family": "experience", "artifact_id": artifact_id, "revision": 1}, normalize(f"{artifact_id} port bound"), None)


def decision(position: int, artifact_id: str, verdict: str) -> dict:
    return {"topic": "review-decisions", "value": {
        "scope_id": S, "decision_id": f"D-{artifact_id}", "candidate_id": candidate_of(artifact_id), "journal_position": position,
        "decision": verdict, "reason": "a flaky runner, not the lesson" if verdict == "rejected" else None, "reviewer": "rev-1",
        "decided_at": "2025-03-01T09:00:00Z", "fix_revision": None,
    }}


def reviewed_journal(path: Path) -> Path:
    """Four revisions, each with one run of unlinked recurrences of its cue
    (E1: 3, E2: 3, E3: 5, E4: 4), so the default threshold 3 raises a
    candidate for each and threshold 5 only E3's. Reviewers reject E1's,
    E3's and E4's and approve E2's: threshold 5 avoids two rejected
    candidates (E1's and E4's), threshold 4 one (E1's)."""
    runs = {"E1": 3, "E2": 3, "E3": 5, "E4": 4}
    records: list[dict] = []
    position = 0
    for artifact_id in runs:
        position += 1
        records.append(experience(S, position, artifact_id, cue=f"{artifact_id} port bound"))
    for artifact_id, count in runs.items():
        for _ in range(count):
            position += 1
            records.append(outcome(S, position, f"O{position}", checks=[check(f"{artifact_id} port bound")]))
    for artifact_id, verdict in (("E1", "rejected"), ("E2", "approved"), ("E3", "rejected"), ("E4", "rejected")):
        position += 1
        records.append(decision(position, artifact_id, verdict))
    return write_journal(path, records)


def what_if(*args: str) -> dict:
    result = run_cli("what-if", *args, "--quiet")
    assert result.returncode == 0, result.stderr + result.stdout
    return json.loads((Path(args[args.index("--out") + 1]) / "report.json").read_text())


def test_a_higher_threshold_counts_the_rejected_candidates_it_would_not_have_raised(tmp_path):
    journal = reviewed_journal(tmp_path / "reviewed.jsonl")
    report = what_if(str(journal), "--sweep", "review-threshold=3..6", "--out", str(tmp_path / "sweep"))
    rows = {row["value"]: (row["review_candidates"], row["rejected_candidates_avoided"]) for row in report["sweep"]["rows"]}
    assert rows == {3: (4, 0), 4: (2, 1), 5: (1, 2), 6: (0, 3)}
    assert report["review_decisions"] == {"approved": 1, "rejected": 3}
    assert "rejected candidates avoided" in (tmp_path / "sweep" / "report.md").read_text()


def test_a_journal_without_decisions_counts_none_avoided(tmp_path):
    journal = reviewed_journal(tmp_path / "reviewed.jsonl")
    lines = [line for line in journal.read_bytes().splitlines() if b"review-decisions" not in line]
    bare = tmp_path / "bare.jsonl"
    bare.write_bytes(b"".join(line + b"\n" for line in lines))
    report = what_if(str(bare), "--review-threshold", "5", "--out", str(tmp_path / "one"))
    assert report["review_decisions"] == {"approved": 0, "rejected": 0}
    assert report["comparisons"][0]["totals"]["rejected_candidates_avoided"] == 0


def test_one_alternative_counts_them_in_its_totals_and_report_md(tmp_path):
    journal = reviewed_journal(tmp_path / "reviewed.jsonl")
    report = what_if(str(journal), "--review-threshold", "5", "--out", str(tmp_path / "one"))
    assert report["comparisons"][0]["totals"]["rejected_candidates_avoided"] == 2
    assert "Rejected candidates avoided (raised by the baseline, rejected by reviewers, not raised by the alternative): 2." in (
        tmp_path / "one" / "report.md").read_text()


def test_a_decision_in_another_scope_naming_the_same_id_is_that_scopes_own(tmp_path):
    """A ReviewDecision stands for the candidate of its own scope (contract
    §18): another scope's approval of the same candidate_id — dead-lettered
    there, no such candidate — neither replaces the rejection in scope S
    nor depends on which process (``--jobs``) read which scope."""
    other = "other"  # read by the other process than S's with --jobs 2
    assert owner(other, 1, 2) != owner(S, 1, 2)
    journal = reviewed_journal(tmp_path / "reviewed.jsonl")
    approval = decision(1, "E1", "approved")
    approval["value"]["scope_id"] = other
    with journal.open("ab") as handle:
        handle.write(json.dumps(approval).encode() + b"\n")
    for jobs in ("1", "2"):
        report = what_if(str(journal), "--sweep", "review-threshold=3..6", "--jobs", jobs, "--out", str(tmp_path / f"jobs{jobs}"))
        rows = {row["value"]: (row["review_candidates"], row["rejected_candidates_avoided"]) for row in report["sweep"]["rows"]}
        assert rows == {3: (4, 0), 4: (2, 1), 5: (1, 2), 6: (0, 3)}, f"--jobs {jobs}"
        assert report["review_decisions"] == {"approved": 2, "rejected": 3}, f"--jobs {jobs}"


def test_decisions_the_input_ends_without_a_candidate_for_are_counted_as_dead_letters(tmp_path):
    """Decisions whose candidates never come wait to the input's end and
    are dead-lettered there (``unknown_candidate``, contract §18), as
    run-journal does: the report counts them, in one process or two, under
    the first policy replayed — the baseline of a sweep (E8's and E9's), or
    the one alternative, whose threshold 5 raises no candidate for E1, E2
    and E4 either (the lines of its ledger/dead-letter.jsonl)."""
    journal = reviewed_journal(tmp_path / "reviewed.jsonl")
    with journal.open("ab") as handle:
        for position, artifact_id in ((100, "E8"), (101, "E9")):
            handle.write(json.dumps(decision(position, artifact_id, "rejected")).encode() + b"\n")
    for jobs in ("1", "2"):
        for policy_args, expected in ((["--sweep", "review-threshold=3..4"], 2), (["--review-threshold", "5"], 5)):
            out = tmp_path / f"{jobs}-{policy_args[0]}"
            result = run_cli("what-if", str(journal), *policy_args, "--jobs", jobs, "--out", str(out), "--quiet")
            assert result.returncode == 0, result.stderr + result.stdout
            report = json.loads((out / "report.json").read_text())
            assert report["inputs"]["dead_letters"] == {"unknown_candidate": expected}, (jobs, policy_args)
            whose = "the baseline" if policy_args[0] == "--sweep" else "the alternative policy"
            assert f"warning: {expected} input records were dead-lettered under {whose} (unknown_candidate {expected})" in \
                " ".join((result.stdout + result.stderr).split())
        assert len((out / "ledger" / "dead-letter.jsonl").read_bytes().splitlines()) == 5
