"""The pages' scripts without a bundler: the JSON getter (`getJSON`, with
its ETag cache and the tab's API token) is implemented once, in
history-common.js, and every page whose scripts call it loads that file
first, from this service (the pages' CSP allows only 'self' scripts); the
API token's login form is rendered and handled once, in login.js, which
every page loads before the rest."""

import re
from pathlib import Path

STATIC = Path(__file__).resolve().parents[2] / "processors" / "recurrence_ledger" / "static"
SHARED = "history-common.js"
LOGIN = "login.js"
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
        "index.html": ["vendor/chart.umd.min.js", LOGIN, SHARED, "dashboard-history.js", "dashboard-unknown.js", "dashboard-effect.js", "dashboard.js"],
        "review.html": [LOGIN, SHARED, "review.js"],
        "patterns.html": [LOGIN, SHARED, "patterns.js"],
        "timeline.html": ["vendor/chart.umd.min.js", LOGIN, SHARED, "timeline.js"],
    }
    for page, scripts in pages.items():
        callers = [name for name in scripts if "getJSON(" in (STATIC / name).read_text(encoding="utf-8")]
        assert callers, page
        assert all(scripts.index(SHARED) < scripts.index(name) for name in callers), (page, scripts)
    dashboard = (STATIC / "dashboard.js").read_text(encoding="utf-8")
    assert "const getJSON = jsonClient(stats);" in dashboard


def test_the_login_form_is_stated_once_in_its_script():
    # No page spells the form; one script renders it and handles its submit.
    for page in STATIC.glob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "login-form" not in text and "token-input" not in text, page.name
    holding = sorted(path.name for path in STATIC.glob("*.js") if '"login-form"' in path.read_text(encoding="utf-8"))
    assert holding == [LOGIN]
    assert [path.name for path in STATIC.glob("*.js") if "sessionStorage.setItem(TOKEN_KEY" in path.read_text(encoding="utf-8")] == [LOGIN]


def test_the_dashboard_takes_the_unknown_reasons_from_the_field_catalogue():
    # The eleven reasons of contract §17, their order, families, suspect rule and sentences are the ledger's
    # (GET /field-catalogue, from ledger/records.py): the page's scripts spell none of them.
    from recurrence_ledger.ledger.verdicts import UNKNOWN_REASONS

    unknown = (STATIC / "dashboard-unknown.js").read_text(encoding="utf-8")
    dashboard = (STATIC / "dashboard.js").read_text(encoding="utf-8")
    for reason in (reason for reason in UNKNOWN_REASONS if reason != "ambiguous"):  # ambiguous is also a revision's figure
        assert f'"{reason}"' not in unknown and f"{reason}:" not in unknown, reason
    assert 'startsWith("check_")' not in unknown
    assert 'getJSON("/field-catalogue")' in dashboard and "window.rlUnknown.load(catalogue.unknown_reasons)" in dashboard

