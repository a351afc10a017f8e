"""The pages' scripts without a bundler: the JSON getter (`getJSON`, with
its ETag cache and the tab's API token) is implemented once, in
history-common.js, and every page whose scripts call it loads that file
first, from this service (the pages' CSP allows only 'self' scripts)."""

import re
from pathlib import Path

STATIC = Path(__file__).resolve().parents[2] / "processors" / "recurrence_ledger" / "static"
SHARED = "history-common.js"
SCRIPT_TAG = re.compile(r'<script\s+src="([^"]+)"')
#: An implementation of the getter: the fetch with If-None-Match.
IMPLEMENTATION = re.compile(r'"If-None-Match"')


def page_scripts(page: str) -> list[str]:
    """The file names of a page's <script src> tags under /static/, in order."""
    sources = SCRIPT_TAG.findall((STATIC / page).read_text(encoding="utf-8"))
    assert all(src.startswith("/static/") for src in sources), sources
    return [src.removeprefix("/static/") for src in sources]


def test_the_json_getter_is_implemented_once_in_the_shared_file():
    implementing = sorted(path.name for path in STATIC.glob("*.js") if IMPLEMENTATION.search(path.read_text(encoding="utf-8")))
    assert implementing == [SHARED]
    assert [path.name for path in STATIC.glob("*.js") if "function getJSON" in path.read_text(encoding="utf-8")] == []


def test_every_page_that_gets_json_loads_the_shared_file_first():
    pages = {page.name: page_scripts(page.name) for page in STATIC.glob("*.html")}
    assert pages == {
        "index.html": ["vendor/chart.umd.min.js", SHARED, "dashboard-history.js", "dashboard-unknown.js", "dashboard.js"],
        "review.html": [SHARED, "review.js"],
        "timeline.html": ["vendor/chart.umd.min.js", SHARED, "timeline.js"],
    }
    for page, scripts in pages.items():
        callers = [name for name in scripts if "getJSON(" in (STATIC / name).read_text(encoding="utf-8")]
        assert callers, page
        assert all(scripts.index(SHARED) < scripts.index(name) for name in callers), (page, scripts)
    dashboard = (STATIC / "dashboard.js").read_text(encoding="utf-8")
    assert "const getJSON = jsonClient(stats);" in dashboard


def test_the_dashboard_knows_the_unknown_reasons_in_the_contract_order():
    # dashboard-unknown.js spells the eleven reasons of contract §17 once, for their order and sentences.
    from recurrence_ledger.ledger.verdicts import UNKNOWN_REASONS

    script = (STATIC / "dashboard-unknown.js").read_text(encoding="utf-8")
    listed = re.search(r"const REASONS = \[(.*?)\];", script, re.S).group(1)
    assert re.findall(r'"([a-z_]+)"', listed) == list(UNKNOWN_REASONS)
    # One sentence per reason family, and a colour per reason.
    families = re.search(r"const FAMILY_SENTENCES = \{(.*?)\n  \};", script, re.S).group(1)
    assert re.findall(r"^    ([a-z_]+): ", families, re.M) == [
        "condition_empty", "condition", "check_missing", "check_unverified", "check_duplicated", "check_not_run", "check_failed",
        "ambiguous", "multiple_matches",
    ]
    colours = re.search(r"const COLORS = \{(.*?)\};", script, re.S).group(1)
    assert sorted(re.findall(r"([a-z_]+): \"#", colours)) == sorted(UNKNOWN_REASONS)
