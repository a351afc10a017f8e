"""The dashboard marks critical revisions (contract §22), in headless Debian
Chromium (tests/e2e/browser/dashboard.mjs): the fixture case
tests/cases/critical_runs.jsonl through a real worker into Redis; the
scope's revisions table and its review panel show each critical revision
with a ``critical`` mark (and the row class ``critical``), the others
without; the two critical revisions need review at their first recurrence,
the medium one with a streak of 2 does not.

Fails — never skips — without /usr/bin/chromium and
tests/e2e/browser/node_modules (``bash deploy/ensure-browser.sh``).
"""

from __future__ import annotations

import subprocess

from recurrence_ledger.api.settings import ApiSettings
from tests.conftest import case
from tests.e2e.api_server import fed_view, running_api
from tests.e2e.test_dashboard_browser import read_line
from tests.plugins.services import BROWSER_DIR


def test_dashboard_marks_critical_revisions(bootstrap, redis_url, browser, tmp_path):
    journal, expected = case("critical_runs")
    with fed_view(bootstrap, redis_url, tmp_path, journal) as view, running_api(ApiSettings(redis_url=redis_url, topic_prefix=view.prefix)) as base_url:
        driver = subprocess.Popen(
            [browser, str(BROWSER_DIR / "dashboard.mjs"), f"{base_url}/?refresh=400#scope=tenant-guard", str(tmp_path / "critical.png")],
            cwd=BROWSER_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            shown = read_line(driver, 60)
            assert shown["scope"] == "tenant-guard"
            # rank, revision (with its mark), signature, streak, needs review: contract §8 order
            assert [row[:5] for row in shown["revisions"]] == [
                ["1", "M1 r1", "slow fixture", "2", ""],
                ["2", "P1 r1 critical", "wrong tenant recalled", "1", "needs review"],
                ["3", "X1 r1 critical", "cross tenant write", "1", "needs review"],
                ["4", "X9 r1", "disk full", "1", ""],
            ]
            assert shown["reviewRowClasses"] == ["", "needs-review critical", "needs-review critical", ""]
            assert [row[0] for row in shown["review"]] == ["P1 r1 critical", "X1 r1 critical"]
            assert shown["counters"]["needing_review"] == str(expected["scopes"]["tenant-guard"]["statistics"]["needing_review"])
            assert shown["consoleErrors"] == []
            driver.stdin.close()
            assert driver.wait(timeout=30) == 0, driver.stderr.read()[-4000:]
        finally:
            if driver.poll() is None:
                driver.kill()
