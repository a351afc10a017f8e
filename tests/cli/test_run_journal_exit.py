"""run-journal exits 3 with a loud warning when any journal line was
dead-lettered (unless --allow-dead-letters); run, the demo, warns but
exits 0."""

from __future__ import annotations

import json

from tests.journal import check, experience, line, outcome, write_journal
from tests.plugins.processes import run_cli

GOOD = [experience("s", 1, "E1"), outcome("s", 2, "O1", checks=[check("port already bound")])]
BAD = [b'{"topic": "task-outcomes", "value": {', json.dumps({"topic": "nope", "value": {}}).encode()]


def test_a_clean_journal_exits_0_without_a_warning(tmp_path):
    journal = write_journal(tmp_path / "j.jsonl", GOOD)
    result = run_cli("run-journal", str(journal), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr + result.stdout


def test_dead_lettered_lines_exit_3_with_the_count_even_when_quiet(tmp_path):
    journal = write_journal(tmp_path / "j.jsonl", [GOOD[0], *BAD, GOOD[1]])
    for extra in ((), ("--quiet",)):
        result = run_cli("run-journal", str(journal), "--out", str(tmp_path / "out"), *extra, env={"COLUMNS": "400"})
        assert result.returncode == 3, result.stderr
        warning = " ".join(result.stderr.split())
        assert "WARNING: 2 of 4 journal lines were dead-lettered (malformed_json 1, unknown_topic 1)" in warning
        assert "dead-letter.jsonl" in warning
    # The outputs are complete all the same.
    assert len((tmp_path / "out" / "dead-letter.jsonl").read_text().splitlines()) == 2
    assert len((tmp_path / "out" / "recurrence-matches.jsonl").read_text().splitlines()) == 1


def test_allow_dead_letters_exits_0_and_still_warns(tmp_path):
    journal = write_journal(tmp_path / "j.jsonl", [*GOOD, BAD[0]])
    result = run_cli("run-journal", str(journal), "--out", str(tmp_path / "out"), "--allow-dead-letters", "--quiet")
    assert result.returncode == 0, result.stderr
    assert "WARNING: 1 of 3 journal lines were dead-lettered" in " ".join(result.stderr.split())


def test_run_warns_but_exits_0(tmp_path):
    journal = write_journal(tmp_path / "j.jsonl", [*GOOD, BAD[0]])
    result = run_cli("run", str(journal), "--out", str(tmp_path / "out"), env={"COLUMNS": "400"})
    assert result.returncode == 0, result.stderr
    assert "WARNING: 1 of 3 journal lines were dead-lettered (malformed_json 1)" in " ".join(result.stderr.split())


def test_the_help_documents_the_exit_code():
    result = run_cli("run-journal", "--help", env={"COLUMNS": "200"})
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "--allow-dead-letters" in text and "3 when any line was dead-lettered" in text


def test_a_bom_journal_is_not_dead_lettered(tmp_path):
    journal = tmp_path / "j.jsonl"
    journal.write_bytes(b"\xef\xbb\xbf" + b"".join(line(record) + b"\n" for record in GOOD))
    result = run_cli("run-journal", str(journal), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stderr
