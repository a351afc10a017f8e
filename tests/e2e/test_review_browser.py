"""The review inbox in headless Debian Chromium (playwright-core, driven by
tests/e2e/browser/review.mjs), end to end through the API, Kafka and the
worker (contract §18): a real worker fed with tests/cases/worked_example.jsonl
— and tests/cases/critical_runs.jsonl beside it, whose two candidates are
critical (contract §22) — publishes its review candidates and writes the
Redis view (the critical candidates listed first and marked); the page shows
the candidate waiting with its failing items — served with an API token,
as production runs: the page loads without it, asks for it, and reads the
queue with it; the reviewer enters a reviewer token, clicks Reject, types a
reason, picks a reason code (contract §24) and double-clicks send; the API publishes exactly one decision to
``review-decisions`` (the button is disabled while the request is in
flight, which carries an ``Idempotency-Key``); with no worker running, the
page says after a few seconds that no worker seems to apply decisions; a worker applies it and publishes the
candidate's ReviewStatus, its follower projects it, and the open page
shows the candidate decided — rejected, by the token's reviewer, with the
reason and its reason code.

Needs /usr/bin/chromium and tests/e2e/browser/node_modules (`bash
deploy/ensure-browser.sh`); fails — never skips — without them. The
screenshot is ``<tmp_path>/review.png``; with RL_REVIEW_SCREENSHOT=PATH it
is also copied to PATH (docs/review.png).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from recurrence_ledger.api.settings import ApiSettings
from recurrence_ledger.catalogue import REVIEW_DECISIONS
from recurrence_ledger.kafka.kafka_io import read_topic
from tests.conftest import case, read_jsonl
from tests.e2e import harness
from tests.e2e.api_server import fed_view, running_api
from tests.e2e.test_dashboard_browser import read_line
from tests.plugins.services import BROWSER_DIR

TOKEN = "reviewer-token-0123456789abcdef"
API_TOKEN = "api-token-0123456789abcdef"
REASON = "a mirror outage, not a lesson: the revision is right"
REASON_CODE = "false_cause"


@pytest.mark.slow
def test_reject_in_the_inbox_reaches_the_ledger_and_comes_back_decided(bootstrap, redis_url, browser, tmp_path):
    screenshot = tmp_path / "review.png"
    journal = tmp_path / "journal.jsonl"
    journal.write_bytes(case("worked_example")[0].read_bytes() + case("critical_runs")[0].read_bytes())
    with fed_view(bootstrap, redis_url, tmp_path, journal) as view:
        candidates = read_jsonl(tmp_path / "embedded" / "review-candidates.jsonl")
        [candidate] = [c for c in candidates if c["scope_id"] == "dns-mirror"]
        critical = sorted(c["candidate_id"] for c in candidates if c["scope_id"] == "tenant-guard")
        settings = ApiSettings(redis_url=redis_url, topic_prefix=view.prefix, api_token=API_TOKEN, reviewer_tokens=(("alice", TOKEN),), kafka=bootstrap)
        with running_api(settings) as base_url:
            driver = subprocess.Popen(
                [browser, str(BROWSER_DIR / "review.mjs"), base_url, candidate["candidate_id"], str(screenshot)],
                cwd=BROWSER_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env={**os.environ, "RL_BROWSER_API_TOKEN": API_TOKEN, "RL_BROWSER_EXPECT_STALE": "1"},
            )
            try:
                driver.stdin.write(f"{TOKEN}\n{REASON}\n{REASON_CODE}\n")
                driver.stdin.flush()
                waiting = read_line(driver, 60)
                [row] = [row for row in waiting["view"]["waiting"] if row[0] == candidate["candidate_id"]]
                failures = [f"{ref['task_outcome_ref']['source_id']} {ref['item_kind']}[{ref['item_index']}]" for ref in candidate["failure_refs"]]
                assert row == [candidate["candidate_id"], candidate["scope_id"], f"{candidate['artifact_ref']['artifact_id']} r1", "open", failures, None]
                # contract §22: the critical candidates first, whatever their age
                assert [(r[1], r[5]) for r in waiting["view"]["waiting"]] == [("tenant-guard", "critical")] * 2 + [("dns-mirror", None)]
                assert sorted(r[0] for r in waiting["view"]["waiting"][:2]) == critical
                assert waiting["criticalMarks"] == 2
                assert waiting["asked"] == "API token required"
                assert waiting["csp"] == 0
                # The only console errors: the 401s of the reads before the token was given (Chromium logs failed fetches).
                assert [error for error in waiting["consoleErrors"] if "401" not in error] == []

                sent = read_line(driver, 30)
                [(candidate_id, decision_id, decision, reviewer, code)] = sent["view"]["sent"]
                assert (candidate_id, decision, reviewer, code) == (candidate["candidate_id"], "rejected", "alice", REASON_CODE)
                [post] = sent["posts"]  # a double click sends one decision
                assert post["bearer"] and json.loads(post["body"]) == {"decision": "rejected", "reason": REASON, "reason_code": REASON_CODE}
                assert len(post["idempotencyKey"]) == 32
                assert TOKEN not in post["url"] and "recurrence-ledger.reviewer-token" in sent["stored"]
                assert "no worker seems to be applying decisions" in sent["view"]["stale"]
                assert sent["view"]["stale"].startswith("1 decision sent, not applied after ")
                [published] = [value for _, _, _, value in read_topic(bootstrap, REVIEW_DECISIONS, topic_prefix=view.prefix)]
                assert (published["decision_id"], published["reviewer"], published["reason"], published["reason_code"]) == (
                    decision_id, "alice", REASON, REASON_CODE)

                # The ledger applies the decision: a worker reads it and publishes the review status, its follower projects it.
                harness.run_to_idle(bootstrap, view.prefix, tmp_path / "worker-decision.log", redis_url=redis_url)
                driver.stdin.write("wait\n")
                driver.stdin.flush()
                decided = read_line(driver, 150)
                assert [row for row in decided["view"]["decided"] if row[0] == candidate["candidate_id"]] == [
                    [candidate["candidate_id"], "rejected", "alice", REASON, REASON_CODE, None, None]]
                assert all(row[0] != candidate["candidate_id"] for row in decided["view"]["waiting"])
                assert decided["view"]["stale"] == ""  # applied: the notice is gone
                assert [error for error in decided["consoleErrors"] if "401" not in error] == []
                driver.stdin.close()
                assert driver.wait(timeout=30) == 0, driver.stderr.read()[-4000:]
            finally:
                if driver.poll() is None:
                    driver.kill()
    assert screenshot.is_file()
    if os.environ.get("RL_REVIEW_SCREENSHOT"):
        shutil.copyfile(screenshot, os.environ["RL_REVIEW_SCREENSHOT"])
