"""A minute of ``recurrence-ledger simulate`` against the real services,
watched in the dashboard (headless Debian Chromium, driven by
tests/e2e/browser/dashboard.mjs with RL_DASHBOARD_LIVE): a worker that keeps
running projects the simulated platform's events into the Redis namespace of
the test's own topic prefix, and a ``serve`` process on the same prefix
answers simulate's advisory requests and serves the page.

simulate runs endlessly at 100 events/s. The page, opened before the first
event, lists the four simulated scopes and a scope's ``selected`` count
grows between two looks while simulate publishes. Once simulate has
published a minute of events (6,000) it gets Ctrl-C: it exits 0 and says
how many events it published, all of them on ``source-journal``. When the
worker has drained into the view and stopped, the page shows, for every
scope, the figures of the last statistics record the worker published on
``recurrence-statistics``; those equal run-journal's on the same seed's
events (contract §10), and nothing was dead-lettered. Every wait is on a
condition, with bounds meant for a busy two-core machine: a slow Chromium
start makes the run longer, never a failure.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from recurrence_ledger import catalogue
from recurrence_ledger.kafka.kafka_io import export_topic
from recurrence_ledger.read.keys import default_namespace
from recurrence_ledger.read.projection import RedisView
from tests.e2e import harness
from tests.e2e.api_server import serve_cli, stop_process
from tests.e2e.simulation_fixtures import last_positions, simulated_reference
from tests.e2e.test_dashboard_browser import COUNTERS, SCOPE_COLUMNS, read_line, tell
from tests.plugins.processes import cli_command, cli_env
from tests.plugins.services import BROWSER_DIR

SEED = 23
PER_SECOND = 100
MINUTE = 60 * PER_SECOND  # events: a minute of load at PER_SECOND
WATCHED = f"sim{SEED}-checkout-web"
SCOPES = [f"sim{SEED}-billing-api", WATCHED, f"sim{SEED}-mobile-sync", f"sim{SEED}-search-indexer"]


def look_until(driver: subprocess.Popen, done, timeout: float, what: str) -> dict:
    """Ask the dashboard driver for a look (a snapshot of the page now) every
    0.2 s until ``done(snapshot)``; returns that snapshot. AssertionError
    with the last snapshot after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        shown = tell(driver, "look")
        if done(shown):
            return shown
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; the page showed {shown}")
        time.sleep(0.2)


def selected(shown: dict) -> int:
    """The ``selected`` counter of the scope shown in a snapshot's panel."""
    return int(shown["counters"]["selected"])


@pytest.mark.slow
def test_a_minute_of_simulate_moves_the_dashboard_to_the_workers_figures(bootstrap, redis_url, browser, topic_prefix, tmp_path):
    node = browser
    harness.prepare(bootstrap, topic_prefix, 2)
    view = RedisView(redis_url, namespace=default_namespace(topic_prefix))
    worker_log, simulate_log = tmp_path / "worker.log", tmp_path / "simulate.log"
    worker = harness.start_worker(bootstrap, topic_prefix, worker_log, redis_url=redis_url, idle_exit=None)
    serve = simulate = driver = None
    references = ThreadPoolExecutor(max_workers=1)
    try:
        serve, url = serve_cli(["--redis-url", redis_url, "--topic-prefix", topic_prefix], {}, tmp_path / "serve.log")
        # The page opens on the empty view (Chromium may take long to start on a busy machine: it does so while simulate runs).
        driver = subprocess.Popen(
            [node, str(BROWSER_DIR / "dashboard.mjs"), f"{url}/?refresh=500", str(tmp_path / "dashboard.png")],
            cwd=BROWSER_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "RL_DASHBOARD_LIVE": "1"},
        )
        with open(simulate_log, "wb") as output:  # endless, until the test has seen a minute of it and the page move
            simulate = subprocess.Popen(
                cli_command("simulate", "--rate", f"{PER_SECOND}/s", "--seed", SEED, "--bootstrap", bootstrap, "--topic-prefix", topic_prefix,
                            "--serve-url", url),
                cwd=harness.REPO, stdout=output, stderr=subprocess.STDOUT, env=cli_env({"PYTHONUNBUFFERED": "1"}, columns=200),
                start_new_session=True,
            )
        # The worker projects the first events: the page shows a scope, then lists all four.
        read_line(driver, 180)
        look_until(driver, lambda shown: sorted(row[0] for row in shown["scopes"]) == SCOPES, 120, "the four simulated scopes")
        first = tell(driver, f"select {WATCHED}", 90)
        assert first["scope"] == WATCHED
        # Its figures move while simulate publishes: a later look shows more selections of the scope.
        later = look_until(driver, lambda shown: selected(shown) > selected(first), 120, f"{WATCHED}'s selected count to grow")
        assert later["scope"] == WATCHED and selected(first) < selected(later)
        assert later["consoleErrors"] == [] and later["stats"]["errors"] == 0
        assert simulate.poll() is None, simulate_log.read_text()[-3000:]

        # A minute of load (MINUTE events), then Ctrl-C: simulate flushes what it sent and says how much.
        harness.wait_until(lambda: f"{MINUTE:,} events in " in simulate_log.read_text() or simulate.poll() is not None, 300,
                           f"simulate's first {MINUTE:,} events")
        assert simulate.poll() is None, simulate_log.read_text()[-3000:]
        simulate.send_signal(signal.SIGINT)
        assert simulate.wait(timeout=60) == 0, simulate_log.read_text()[-3000:]
        said = simulate_log.read_text()
        published_line = re.search(r"^published (\d+) events in ([0-9.]+) s to 4 scopes", said, re.MULTILINE)
        assert published_line is not None, said[-3000:]
        events, seconds = int(published_line[1]), float(published_line[2])
        assert events >= MINUTE and seconds >= (MINUTE - 1) / PER_SECOND  # the rate's schedule: event i leaves at i / PER_SECOND s
        assert "recall ranking with the advisory of" in said
        assert harness.count_records(bootstrap, harness.physical(topic_prefix, catalogue.SOURCE_JOURNAL)) == events

        # run-journal on the same seed's first ``events`` events, computed while the worker drains and the page is read.
        reference = references.submit(simulated_reference, SEED, events, tmp_path)
        # The worker drains: every scope's record in the view reaches the scope's last journal position.
        positions = last_positions(SEED, events)
        assert sorted(positions) == SCOPES

        def drained() -> bool:
            records = {scope: view.read(scope) for scope in SCOPES}
            return all(record is not None and record["as_of_position"] == positions[scope] for scope, record in records.items())

        harness.wait_until(drained, 180, "the worker to drain into the view")
        worker.terminate()  # it commits what it holds and exits while the page is read

        # The page settles on each scope's final figures (the drained view's) ...
        final = {scope: view.read(scope) for scope in SCOPES}
        shown = {}
        for scope in SCOPES:
            counters = {name: str(final[scope][name]) for name in COUNTERS}
            row = [scope, *(str(final[scope][name]) for name in SCOPE_COLUMNS)]
            assert tell(driver, f"select {scope}", 90)["scope"] == scope
            shown[scope] = look_until(driver, lambda snapshot, counters=counters, row=row: snapshot["counters"] == counters
                                      and row in snapshot["scopes"], 60, f"{scope}'s final figures")
            assert shown[scope]["scope"] == scope and shown[scope]["asOf"] == str(positions[scope])
            assert shown[scope]["consoleErrors"] == []
        driver.stdin.close()
        assert driver.wait(timeout=30) == 0, driver.stderr.read()[-4000:]

        # ... which are those of the last statistics record the worker published for it, with no dead letter.
        assert harness.wait_exit(worker, 60, worker_log) == 0, worker_log.read_text()[-3000:]
        assert export_topic(bootstrap, catalogue.DEAD_LETTER, tmp_path / "dead-letter.jsonl", topic_prefix=topic_prefix) == 0
        export_topic(bootstrap, catalogue.STATISTICS, tmp_path / "statistics.jsonl", topic_prefix=topic_prefix)
        published = harness.last_statistics((tmp_path / "statistics.jsonl").read_bytes())
        assert published == harness.last_statistics(reference.result(timeout=600)["recurrence-statistics"])
        assert selected(later) < published[WATCHED]["selected"]  # the looks were taken before the end
        rows = sorted([scope, *(str(published[scope][name]) for name in SCOPE_COLUMNS)] for scope in SCOPES)
        for scope in SCOPES:
            assert shown[scope]["counters"] == {name: str(published[scope][name]) for name in COUNTERS}, scope
            assert sorted(shown[scope]["scopes"]) == rows, scope
    finally:
        for process in (driver, simulate):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        for process in (serve, worker):
            if process is not None and process.poll() is None:
                stop_process(process)
        references.shutdown(wait=True)
        view.clear()
        view.close()
