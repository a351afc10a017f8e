"""The README's quick start on Kafka, its review walkthrough, in headless
Chromium (tests/e2e/browser/review.mjs): the packaged example published, a
worker that keeps running (projecting into Redis), ``serve`` with the
repository's local-trial reviewer tokens file; the inbox lists the
example's one open candidate, the reviewer approves it with the next
revision as the fix, and the page shows it decided — approved by the
trial reviewer, the fix revision and its repair status (pending: the fix is
not published yet)."""

from __future__ import annotations

import os
import subprocess

import httpx

from recurrence_ledger.api.settings import read_reviewer_tokens
from tests.conftest import REPO, read_jsonl
from tests.e2e import harness
from tests.e2e.api_server import serve_cli, stop_process
from tests.e2e.test_dashboard_browser import read_line
from tests.plugins.processes import run_cli
from tests.plugins.services import BROWSER_DIR

EXAMPLE = REPO / "processors" / "recurrence_ledger" / "examples" / "openapi_drift.jsonl"
TRIAL_TOKENS = REPO / "deploy" / "local-trial-reviewer-tokens.toml"


def open_candidate(tmp_path) -> dict:
    """The packaged example's one candidate left open (run-journal's outputs)."""
    result = run_cli("run-journal", EXAMPLE, "--out", tmp_path / "embedded", "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    statuses = {row["candidate_id"]: row["status"] for row in read_jsonl(tmp_path / "embedded" / "review-status.jsonl")}
    candidates = read_jsonl(tmp_path / "embedded" / "review-candidates.jsonl")
    assert sorted(statuses.get(c["candidate_id"], "open") for c in candidates) == ["approved", "open", "rejected"]
    [candidate] = [c for c in candidates if statuses.get(c["candidate_id"], "open") == "open"]
    return candidate


def test_the_quick_start_approves_the_open_candidate_in_the_inbox(bootstrap, redis_url, browser, tmp_path):
    candidate = open_candidate(tmp_path)
    [(reviewer, token)] = read_reviewer_tokens(TRIAL_TOKENS)
    prefix = harness.new_prefix()
    worker = serve = None
    try:
        harness.prepare(bootstrap, prefix, 4)
        harness.publish(bootstrap, EXAMPLE, prefix)
        worker = harness.start_worker(bootstrap, prefix, tmp_path / "worker.log", redis_url=redis_url, idle_exit=None)
        serve, url = serve_cli(["--redis-url", redis_url, "--topic-prefix", prefix, "--reviewer-tokens", TRIAL_TOKENS, "--bootstrap", bootstrap],
                               {}, tmp_path / "serve.log")
        harness.wait_until(lambda: any(item["candidate_id"] == candidate["candidate_id"]
                                       for item in httpx.get(f"{url}/review-queue").json()["candidates"]), 120, "the open candidate in the inbox")
        fix = candidate["artifact_ref"]["revision"] + 1
        driver = subprocess.Popen(
            [browser, str(BROWSER_DIR / "review.mjs"), url, candidate["candidate_id"], str(tmp_path / "quick-start.png")],
            cwd=BROWSER_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "RL_BROWSER_DECISION": "approved", "RL_BROWSER_FIX": str(fix)},
        )
        try:
            driver.stdin.write(f"{token}\n\n\n")  # the trial token; no reason, no reason code
            driver.stdin.flush()
            waiting = read_line(driver, 60)
            assert [row[3] for row in waiting["view"]["waiting"] if row[0] == candidate["candidate_id"]] == ["open"]
            sent = read_line(driver, 30)
            [(candidate_id, _, decision, who, _)] = sent["view"]["sent"]
            assert (candidate_id, decision, who) == (candidate["candidate_id"], "approved", reviewer)
            driver.stdin.write("wait\n")  # the running worker applies it; its follower projects the review status
            driver.stdin.flush()
            decided = read_line(driver, 150)
            artifact = candidate["artifact_ref"]["artifact_id"]
            assert [row for row in decided["view"]["decided"] if row[0] == candidate["candidate_id"]] == [
                [candidate["candidate_id"], "approved", reviewer, None, None, f"{artifact} r{fix}", "pending"]]
            assert decided["view"]["stale"] == ""
            driver.stdin.close()
            assert driver.wait(timeout=30) == 0, driver.stderr.read()[-4000:]
        finally:
            if driver.poll() is None:
                driver.kill()
    finally:
        if serve is not None:
            stop_process(serve)
        if worker is not None:
            harness.kill(worker)
        harness.remove_prefix(bootstrap, prefix, redis_url)
