"""The team patterns page (contract §23) in headless Debian Chromium
(tests/e2e/browser/patterns.mjs): a real worker fed with
tests/cases/patterns.jsonl (groups by "/", pattern threshold 2) projects the
signature patterns into Redis; the page of group teamA shows exactly that
group's patterns as the embedded runner published them, most scopes first,
its columns titled by the record's own fields (GET /field-catalogue), and
no scope of another group; switching to teamB shows teamB's only.

Fails — never skips — without /usr/bin/chromium and
tests/e2e/browser/node_modules (``bash deploy/ensure-browser.sh``).
"""

from __future__ import annotations

import subprocess

from recurrence_ledger.api.settings import ApiSettings
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.ledger.fields import field_catalogue
from recurrence_ledger.ledger.patterns import pattern_rank
from recurrence_ledger.ledger.records import SignaturePattern
from tests.conftest import CASES, final_views, read_jsonl
from tests.e2e.api_server import fed_view, running_api
from tests.e2e.test_dashboard_browser import read_line
from tests.plugins.services import BROWSER_DIR

POLICY = ("--pattern-group-separator", "/", "--pattern-threshold", "2")
CONFIG = LedgerConfig(pattern_group_separator="/", pattern_threshold=2)


def shown_rows(rows: list[dict]) -> list[list[str]]:
    """What the page shows of SignaturePattern rows: every field but the group, scopes joined."""
    return [[", ".join(row[name]) if isinstance(row[name], list) else str(row[name]) for name in field_catalogue(SignaturePattern) if name != "group"]
            for row in rows]


def test_the_team_patterns_page_shows_one_group_s_patterns(bootstrap, redis_url, browser, tmp_path):
    with fed_view(bootstrap, redis_url, tmp_path, CASES / "patterns.jsonl", worker_args=POLICY, config=CONFIG) as view, \
            running_api(ApiSettings(redis_url=redis_url, topic_prefix=view.prefix)) as base_url:
        finals = final_views("signature-patterns", read_jsonl(tmp_path / "embedded" / "signature-patterns.jsonl")).values()
        expected = {group: sorted((row for row in finals if row["group"] == group), key=pattern_rank) for group in ("teamA", "teamB")}
        driver = subprocess.Popen(
            [browser, str(BROWSER_DIR / "patterns.mjs"), base_url, "teamA", "teamB", str(tmp_path / "patterns.png")],
            cwd=BROWSER_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            shown = read_line(driver, 60)
            assert driver.wait(timeout=30) == 0, driver.stderr.read()[-4000:]
        finally:
            if driver.poll() is None:
                driver.kill()
    catalogue = field_catalogue(SignaturePattern)
    first, second = shown["first"], shown["second"]
    # The columns: the record's fields but the group, titled and described by the record.
    assert first["headers"] == [[label["title"], label["description"]] for name, label in catalogue.items() if name != "group"]
    assert first["cells"] == shown_rows(expected["teamA"]) and len(first["cells"]) == 2
    assert first["cells"][0] == ["schema migration lock timeout", "3", "teamA/svc1, teamA/svc2, teamA/svc3", "4"]
    assert first["heading"] == "group teamA" and first["count"] == "2 of the group's 2 patterns with at least 1 scope"
    assert first["command"] == "recurrence-ledger patterns export --group 'teamA' --format skill"
    assert not any(scope in str(first) for scope in ("teamB/", "solo"))  # never a scope of another group
    assert second["cells"] == shown_rows(expected["teamB"]) == [["schema migration lock timeout", "2", "teamB/svc1, teamB/svc2", "2"]]
    assert "teamA/" not in str(second["cells"]) and second["heading"] == "group teamB"
    assert shown["url"].endswith("/team-patterns?group=teamB&refresh=400&min_scopes=1")  # kept for a reload, never a navigation
    assert "frame-ancestors 'none'" in shown["csp"] and shown["consoleErrors"] == []
