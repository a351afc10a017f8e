"""The history pages in headless Debian Chromium (playwright-core, driven by
tests/e2e/browser/timeline.mjs): a real worker and the view follower fed
with the timeline journal (tests/e2e/history_fixtures.py) plus the worked
example; from the dashboard's scope list a click on ``timeline-demo`` shows
its trend, a click on revision T1 r1 opens its timeline, whose chart must
draw exactly the recurred, avoided and unknown-selection points of that
revision in the embedded runner's ledger (contract §7, §8, §10), each kind
with its own point shape, the two runs and the review threshold; clicking a
point offers its ``recurrence-ledger explain`` command. The review inbox
lists both candidates of T1 waiting for a decision. Fails — never skips — without Chromium or
playwright-core (``bash deploy/ensure-browser.sh``).

Screenshots go to ``<tmp_path>``; with RL_HISTORY_SCREENSHOTS=DIR they are
also copied to DIR (that is how docs/timeline.png and docs/dashboard-trend.png
are made; docs/review.png is tests/e2e/test_review_browser.py's).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from recurrence_ledger.api.responses import PAGE_HEADERS
from recurrence_ledger.api.settings import ApiSettings
from tests.conftest import CASES, read_jsonl
from tests.e2e.api_server import fed_view, running_api
from tests.e2e.history_fixtures import SCOPE, run_follower, timeline_journal
from tests.plugins.services import BROWSER_DIR

SHOTS = ("dashboard-trend.png", "timeline.png", "review-waiting.png")
API_TOKEN = "timeline-api-token-0123456789"


def test_click_through_from_the_scope_list_to_a_revision_timeline(bootstrap, redis_url, browser, tmp_path):
    node = browser
    journal = timeline_journal(tmp_path / "timeline.jsonl", extra=CASES / "worked_example.jsonl")
    with fed_view(bootstrap, redis_url, tmp_path, journal=journal) as view:
        run_follower(bootstrap, redis_url, view.prefix, tmp_path / "follower.log")
        observations = [
            record for record in read_jsonl(tmp_path / "embedded" / "recurrence-observations.jsonl")
            if record["scope_id"] == SCOPE and record["artifact_ref"]["artifact_id"] == "T1"
        ]
        # With an API token, as production runs: the timeline opened first, by a navigation, loads and asks for it.
        with running_api(ApiSettings(redis_url=redis_url, topic_prefix=view.prefix, api_token=API_TOKEN)) as base_url:
            result = subprocess.run(
                [node, str(BROWSER_DIR / "timeline.mjs"), base_url, SCOPE, "T1", "build-10", str(tmp_path)],
                cwd=BROWSER_DIR, capture_output=True, text=True, timeout=180, env={**os.environ, "RL_BROWSER_API_TOKEN": API_TOKEN},
            )
    assert result.returncode == 0, result.stderr[-4000:]
    shown = json.loads(result.stdout)
    assert shown["asked"] == {"status": 200, "csp": PAGE_HEADERS["Content-Security-Policy"], "nosniff": "nosniff", "shown": "API token required"}
    # The only console errors: the 401s of the reads before the token was given (Chromium logs failed fetches).
    assert [error for error in shown["consoleErrors"] if "401" not in error] == []

    # The scope's trend: one point per statistics record, the last one the embedded runner's last record.
    expected = view.expected[SCOPE]
    assert shown["trend"]["recurred"][-1] == [expected["as_of_position"], expected["recurred"]]
    assert shown["trend"]["avoided"][-1] == [expected["as_of_position"], expected["avoided"]]

    # The timeline drew exactly the ledger's verdicts of T1 r1 along position.
    assert shown["timelineUrl"].endswith(f"/timeline?scope={SCOPE}&artifact_id=T1&revision=1")
    timeline = shown["timeline"]
    points = timeline["view"]["points"]
    decided = {record["task_outcome_ref"]["source_id"] for record in observations if record["event"] != "selected"}
    assert [(p["x"], p["outcome"]) for p in points["recurred"]] == sorted(
        (r["task_outcome_position"], r["task_outcome_ref"]["source_id"]) for r in observations if r["event"] == "recurred")
    assert [(p["x"], p["outcome"]) for p in points["avoided"]] == sorted(
        (r["task_outcome_position"], r["task_outcome_ref"]["source_id"]) for r in observations if r["event"] == "avoided")
    assert [(p["x"], p["outcome"]) for p in points["unknown"]] == sorted(
        (r["task_outcome_position"], r["task_outcome_ref"]["source_id"]) for r in observations
        if r["event"] == "selected" and r["task_outcome_ref"]["source_id"] not in decided)
    # y: the run's recurred count so far; the avoided verdict at 7 starts a new run.
    assert [p["y"] for p in points["recurred"]] == [1, 2, 3, 1, 2, 3]
    assert [p["y"] for p in points["avoided"]] == [0]
    # Told apart by shape and label, not colour alone.
    assert timeline["styles"] == {"recurred": ["recurred ▲", "triangle"], "avoided": ["avoided ◆", "rectRot"], "unknown": ["unknown selection ✕", "crossRot"]}
    assert timeline["threshold"] == [["review threshold 3", [3, 3]]] and timeline["threshold_shown"] == "3"
    assert [run["start"] for run in timeline["view"]["runs"]] == [None, 7]
    assert [row[:5] for row in timeline["runs"]] == [["start of history", "3", "4–6", "yes", ""], ["from 7", "3", "7–11", "yes", "current"]]
    assert timeline["runs"][1][5] != "–" and timeline["runs"][0][5] == "–"  # run 7's candidate waits, the first one's left the queue
    assert [row[2] for row in timeline["verdicts"]][:3] == ["build-11", "build-10", "build-10"]
    # The clicked point offers its explain command.
    assert shown["explain"]["command"] == f"recurrence-ledger explain {SCOPE} build-10 --topic-prefix {view.prefix}"
    assert shown["explain"]["text"].startswith("build-10: recurred at position 10, run from 7")

    # The review inbox lists both candidates of T1 waiting for a decision (runs from the start and from 7:
    # an avoided verdict ends a run, not a review, contract §18), with their failing items.
    mine = [row for row in shown["review"]["rows"] if row[1] == SCOPE]
    assert [row[2:4] for row in mine] == [["T1 r1", "open"], ["T1 r1", "open"]]
    assert sorted([failure.split()[0] for failure in row[4]] for row in mine) == [["build-04", "build-05", "build-06"], ["build-09", "build-10", "build-11"]]
    # The scope list's filter.
    assert shown["filtered"] == [SCOPE]

    for name in SHOTS:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("RL_HISTORY_SCREENSHOTS"):
        for name in SHOTS:
            shutil.copyfile(tmp_path / name, Path(os.environ["RL_HISTORY_SCREENSHOTS"]) / name)
