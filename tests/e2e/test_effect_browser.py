"""The dashboard's effect panel (contract §21.4) in headless Debian
Chromium (playwright-core, driven by tests/e2e/browser/effect.mjs): the
view of tests/cases/holdout_effects (a lesson that helps, one that harms,
one undecided) written into the real Redis from the embedded runner's
records, the API on uvicorn over loopback. The page must show each lesson's
arms with the rates and the verdict and probability the ledger published
(never decided again), the lists of lessons that harm and help, the scope's
counts by verdict, and each arm's 90 % credible interval — checked here
against mpmath's Beta quantiles. Fails — never skips — without Chromium or
tests/e2e/browser/node_modules (``bash deploy/ensure-browser.sh``). The
screenshot is ``<tmp_path>/effect.png``."""

from __future__ import annotations

import json
import subprocess

import mpmath

from recurrence_ledger.api.settings import ApiSettings
from tests.conftest import CASES, read_jsonl
from tests.e2e.api_server import embedded_view, running_api
from tests.plugins.services import BROWSER_DIR

SCOPE = "holdout-effects"
#: --review in dashboard.css (#b3261e) as getComputedStyle reports it.
REVIEW_RED = "rgb(179, 38, 30)"


def beta_interval(recurred: int, resolved: int) -> tuple[float, float]:
    """Quantiles 0.05 and 0.95 of Beta(1 + recurred, 1 + resolved − recurred), by mpmath."""
    a, b = 1 + recurred, 1 + resolved - recurred

    def quantile(q: float) -> float:
        return float(mpmath.findroot(lambda x: mpmath.betainc(a, b, 0, x, regularized=True) - q, (1e-12, 1 - 1e-12), solver="bisect"))

    return quantile(0.05), quantile(0.95)


def test_the_effect_panel_shows_each_lesson_as_the_ledger_published_it(redis_url, browser, tmp_path):
    node = browser
    screenshot = tmp_path / "effect.png"
    with embedded_view(redis_url, tmp_path, CASES / "holdout_effects.jsonl") as view, \
            running_api(ApiSettings(redis_url=redis_url, topic_prefix=view.prefix)) as base_url:
        rows = {}
        for record in read_jsonl(tmp_path / "embedded" / "revision-statistics.jsonl"):
            rows[f"{record['artifact_ref']['artifact_id']} r{record['artifact_ref']['revision']}"] = record
        effects = {label: row["effect"] for label, row in rows.items() if row["effect"] is not None}
        result = subprocess.run([node, str(BROWSER_DIR / "effect.mjs"), f"{base_url}/?refresh=500#scope={SCOPE}", str(screenshot)],
                                cwd=BROWSER_DIR, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-4000:]
        shown = json.loads(result.stdout)
    assert shown["consoleErrors"] == []
    # likeliest to help first: the API's sort=probability_helps
    assert [row["revision"] for row in shown["rows"]] == ["EH r1", "EU r1", "EX r1"]
    for row in shown["rows"]:
        effect = effects[row["revision"]]
        assert row["verdict"] == row["cells"]["verdict"] == effect["verdict"]
        assert row["cells"]["probability_helps"] == f"{effect['probability_helps']:.4f}"
        for arm in ("treated", "withheld"):
            counts, rate = effect[arm], effect[f"recurrence_rate_{arm}"]
            low, high = beta_interval(counts["recurred"], counts["resolved"])
            assert row["cells"][arm] == f"{counts['recurred']}/{counts['resolved']} = {rate:.2f} [{low:.2f}–{high:.2f}]", (row, arm)
    assert [row["cells"]["probability_helps"] for row in shown["rows"]] == ["0.9600", "0.5000", "0.0431"]  # contract §21.4's worked values
    assert shown["harms"] == "EX r1" and shown["helps"] == "EH r1"
    assert shown["counts"] == {"helps": "1", "harms": "1", "undecided": "1", "insufficient": "0"}
    assert shown["panelAlert"] is True  # a lesson harms
    assert [row["verdictColor"] for row in shown["rows"]][2] == REVIEW_RED
    # the column titles are the Effect record's (GET /field-catalogue)
    assert "probability helps" in shown["headers"] and shown["headerTitles"]["verdict"].startswith("helps, harms, undecided")
    for (recurred, resolved), (low, high) in zip([(1, 5), (4, 5), (0, 5), (7, 10), (3, 10), (0, 0)], shown["intervals"], strict=True):
        want = beta_interval(recurred, resolved)
        assert abs(low - want[0]) < 1e-9 and abs(high - want[1]) < 1e-9, (recurred, resolved, low, high, want)
    assert screenshot.stat().st_size > 0
