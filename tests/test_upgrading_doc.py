"""docs/upgrading.md: its data check script runs and finds what revision 2
treats differently, and its numbers are the code's."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

from tests.journal import check, experience, line, outcome
from tests.ledger.test_normalize_unicode import CHANGED

DOC = Path(__file__).resolve().parents[1] / "docs" / "upgrading.md"


def check_script(tmp_path: Path) -> Path:
    [code] = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    script = tmp_path / "check_rev2.py"
    script.write_text(code)
    return script


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
