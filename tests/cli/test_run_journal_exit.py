"""run-journal exits 3 with a loud warning when any journal line was
dead-lettered (unless --allow-dead-letters); run, the demo, warns but
exits 0; a journal that cannot be run (a pipe, or one of the files the run
writes) is a usage error (exit 2) before anything is written."""

from __future__ import annotations

import json
import os
import subprocess

from tests.conftest import REPO
from tests.journal import check, experience, line, outcome, write_journal
from tests.plugins.processes import cli_command, cli_env, run_cli

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


def test_a_journal_among_the_files_the_run_writes_is_refused_and_kept(tmp_path):
    """The output files are opened (emptied) before the journal is read: a
    journal that is one of them is a usage error, and stays as it was."""
    out = tmp_path / "out"
    out.mkdir()
    journal = write_journal(out / "recurrence-matches.jsonl", GOOD)
    before = journal.read_bytes()
    for command in (("run-journal",), ("run",), ("what-if", "--review-threshold", "2")):
        target = out.parent if command[0] == "what-if" else out  # what-if writes the ledger files under --out/ledger
        if command[0] == "what-if":
            (out.parent / "ledger").mkdir(exist_ok=True)
            journal = write_journal(out.parent / "ledger" / "recurrence-matches.jsonl", GOOD)
        result = run_cli(*command, str(journal), "--out", str(target), env={"COLUMNS": "400"})
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert "is one of the files the run writes" in " ".join(result.stderr.split()), command
        assert journal.read_bytes() == before, command


def test_a_journal_hard_linked_to_an_output_file_is_refused_and_kept(tmp_path):
    """A hard link is the same file under another path (resolve() does not
    see it): run-journal would empty the journal before reading it."""
    journal = write_journal(tmp_path / "j.jsonl", GOOD)
    before = journal.read_bytes()
    out = tmp_path / "out"
    out.mkdir()
    os.link(journal, out / "recurrence-matches.jsonl")
    for jobs in ("1", "2"):
        result = run_cli("run-journal", str(journal), "--out", str(out), "--jobs", jobs, env={"COLUMNS": "400"})
        assert result.returncode == 2, (result.stdout, result.stderr)
        assert "is one of the files the run writes" in " ".join(result.stderr.split())
        assert journal.read_bytes() == before


def test_a_journal_from_a_pipe_is_a_usage_error_not_a_traceback(tmp_path):
    """A journal is read by offset (and once per --jobs process): a pipe is
    refused with a message (exit 2); a file given as standard input is read."""
    journal = write_journal(tmp_path / "j.jsonl", GOOD)
    for command in (("run-journal", "/dev/stdin", "--jobs", "2"), ("what-if", "/dev/stdin", "--review-threshold", "2")):
        result = subprocess.run(cli_command(*command, "--out", tmp_path / "piped", "--quiet"), input=journal.read_bytes(),
                                capture_output=True, env=cli_env({"COLUMNS": "400"}), cwd=REPO, check=False)
        assert result.returncode == 2, (command, result.stderr)
        assert "is not a regular file" in " ".join(result.stderr.decode().split()), command
    with journal.open("rb") as stdin:
        result = subprocess.run(cli_command("run-journal", "/dev/stdin", "--out", tmp_path / "redirected", "--quiet"), stdin=stdin,
                                capture_output=True, env=cli_env(), cwd=REPO, check=False)
    assert result.returncode == 0, result.stderr
    assert len((tmp_path / "redirected" / "recurrence-matches.jsonl").read_bytes().splitlines()) == 1
