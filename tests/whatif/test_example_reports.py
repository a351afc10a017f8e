"""The example reports of docs/tuning.md are what the commands it shows
write today (apart from the seconds the replay took), so the page never
shows a report of an earlier release."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import REPO
from tests.plugins.processes import run_cli

JOURNAL = "processors/recurrence_ledger/examples/openapi_drift.jsonl"
EXAMPLES = {
    "example-what-if": ("--review-threshold", "1", "--near-duplicate-threshold", "9/10"),
    "example-sweep": ("--sweep", "review-threshold=1..4"),
}


def without_timing(text: str) -> str:
    return re.sub(r"Replayed in (\d+) pass(es)?, [0-9.]+ s\.", r"Replayed in \1 pass\2.", text)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_example_report_is_what_the_documented_command_writes(name, tmp_path):
    folder = f"docs/tuning/{name}"
    out = tmp_path / folder
    result = run_cli("what-if", JOURNAL, *EXAMPLES[name], "--out", str(out), "--quiet", cwd=REPO, env={"RL_JOBS": "1"})
    assert result.returncode == 0, result.stderr
    written, kept = json.loads((out / "report.json").read_text()), json.loads((REPO / folder / "report.json").read_text())
    for document in (written, kept):
        document.pop("seconds")
        if document["ledger_files"] is not None:
            document["ledger_files"] = document["ledger_files"].rsplit(folder, 1)[-1]
    assert written == kept
    assert without_timing((out / "report.md").read_text().replace(str(tmp_path) + "/", "")) == without_timing((REPO / folder / "report.md").read_text())
