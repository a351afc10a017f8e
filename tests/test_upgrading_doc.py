"""docs/upgrading.md: its data check scripts run and find what revisions 2
and 3 treat differently, and its numbers are the code's."""

from __future__ import annotations

import ast
import base64
import json
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import case
from tests.journal import check, experience, line, outcome
from tests.ledger.test_normalize_unicode import CHANGED

DOC = Path(__file__).resolve().parents[1] / "docs" / "upgrading.md"


def check_script(tmp_path: Path, name: str = "check_rev2.py") -> Path:
    """The doc's script whose first line names it (``# check_rev2.py …``)."""
    [code] = [code for code in re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S) if code.startswith(f"# {name} ")]
    script = tmp_path / name
    script.write_text(code)
    return script


def run_script(script: Path, *files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *map(str, files)], capture_output=True, text=True, timeout=60)


def test_the_check_script_finds_each_kind_of_change(tmp_path):
    journal = tmp_path / "journal.jsonl"
    journal.write_bytes(b"\xef\xbb\xbf" + b"".join(line(record) + b"\n" for record in [
        experience("s", 1, "E1", cue="\u03a0\u03a1\u03a9\u03aa\u0301 batch failed"),
        outcome("s", 2, "O1", checks=[check("port already bound", evidence=[{"kind": "exact", "ref": " "}])]),
        experience("s", 3, "E2", cue="e\u0301" * 300),
        experience("s", 4, "E3"),
    ]))
    dead = tmp_path / "dead-letter.jsonl"
    dead.write_text(json.dumps({"topic": "source-journal", "partition": 0, "offset": 7, "key": "s", "reason": "malformed_json",
                                "message": "m", "raw": base64.b64encode(b"\xef\xbb\xbf{}").decode()}) + "\n")
    per_kind = tmp_path / "task-outcomes.jsonl"
    per_kind.write_text(json.dumps(outcome("s", 5, "O2", checks=[check("\u1fb6 failed")])["value"]) + "\n")
    result = subprocess.run([sys.executable, str(check_script(tmp_path)), str(journal), str(dead), str(per_kind)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == str({"bom": 1, "key": 2, "blank locator": 1, "nfc length": 1, "dead-lettered bom": 1})
    assert "journal.jsonl:0: key changes: '\\u03c0\\u03c1\\u03c9\\u03ca\\u0301 batch failed' -> '\\u03c0\\u03c1\\u03c9\\u0390 batch failed'" in result.stdout
    assert "task-outcomes.jsonl:0: key changes" in result.stdout


def test_a_clean_journal_has_nothing_to_report(tmp_path):
    journal = tmp_path / "journal.jsonl"
    journal.write_bytes(b"".join(line(record) + b"\n" for record in [experience("s", 1, "E1"), outcome("s", 2, "O1", checks=[check("x")])]))
    result = subprocess.run([sys.executable, str(check_script(tmp_path)), str(journal)], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "nothing revision 2 treats differently", result.stderr


def test_the_doc_lists_the_26_changed_code_points():
    text = DOC.read_text()
    listed = {int(code, 16) for code in re.findall(r"U\+([0-9A-F]{4})", text)}
    ranges = {0x1E96, 0x1E97, 0x1E98, 0x1E99}  # written as a range
    changed = set(CHANGED["14.0.0"])
    assert changed <= listed | ranges
    assert "26 single characters" in text


def test_the_revision_3_check_script_finds_each_kind_of_change(tmp_path):
    journal = tmp_path / "journal.jsonl"
    journal.write_bytes(b"".join(line(record) + b"\n" for record in [
        experience("s", 1, "E1", cue="port\x1fbound"),  # the key keeps U+001F now
        experience("s", 2, "E2", cue="port\x1f"),  # stripped at the end, as before
        outcome("s", 3, "O1", checks=[check("disk full", evidence=[{"kind": "exact", "ref": "\u200b\u2060"}])]),
        outcome("s", 4, "O2", checks=[check("disk full", evidence=[{"kind": "exact", "ref": " "}])]),  # blank in revision 2 too
    ]))
    dead = tmp_path / "dead-letter.jsonl"
    dead.write_text("".join(json.dumps({"topic": "task-outcomes", "partition": partition, "offset": 7, "key": "s", "reason": reason,
                                        "message": "m", "raw": base64.b64encode(raw).decode()}) + "\n"
                            for partition, reason, raw in [(0, "bad_magic_byte", b"  {}"), (0, "bad_magic_byte", b"\x07{}"),
                                                           (None, "malformed_json", b" {"), (1, "bad_magic_byte", b"[1]")]))
    forward, expected = case("forward_refs")
    result = run_script(check_script(tmp_path, "check_rev3.py"), journal, dead, forward)
    assert result.returncode == 0, result.stderr
    counts = ast.literal_eval(result.stdout.splitlines()[-1])
    assert counts == {"key": 1, "lost evidence": 1, "dead-lettered json": 2,
                      "forward reference": expected["scopes"]["fwd-ledger"]["statistics"]["forward_references"]}
    assert "journal.jsonl:0: key changes: 'port bound' -> 'port\\x1fbound'" in result.stdout
    assert "journal.jsonl:2: exact evidence only of control or format characters" in result.stdout
    assert "forward_refs.jsonl:4: forward reference in fwd-ledger: task-outcomes O-fwd-receipt at 5 -> handoff-receipts RF2 at 8" in result.stdout


def test_the_revision_3_check_script_has_nothing_to_report_on_the_other_cases(tmp_path):
    journals = [case(name)[0] for name in ("minimum_case", "worked_example", "late_run", "unknown_reasons")]
    result = run_script(check_script(tmp_path, "check_rev3.py"), *journals)
    assert result.stdout.strip() == "nothing revision 3 treats differently", result.stderr
