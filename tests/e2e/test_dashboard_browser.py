"""The dashboard in headless Debian Chromium (playwright-core, driven by
tests/e2e/browser/dashboard.mjs): a real worker fed with
tests/cases/worked_example.jsonl writes the Redis view, the API runs on
uvicorn over loopback, and the page must show the numbers of the last
statistics record of the same journal (embedded runner, contract §10), draw
the top revisions (streaks 4 and 3) as Chart.js bars, and refresh itself when
the view changes. A second scope whose revisions all have streak 0 shows "no
revision has a streak" instead of an empty chart, "needing review 0" not in
red, and a "none" row in the empty review table.

With an API token (``test_dashboard_with_an_api_token…``), the page first
shows only its token form, refuses a wrong token, then shows the scope with
the token sent as a Bearer header on every API request, kept in
sessionStorage only and never in a URL.

Needs /usr/bin/chromium and tests/e2e/browser/node_modules: `bash
deploy/ensure-browser.sh` installs both. The test fails — never skips — when
they are missing. The screenshot is saved as ``<tmp_path>/dashboard.png``;
with RL_DASHBOARD_SCREENSHOT=PATH it is also copied to PATH (that is how
docs/dashboard.png is made).
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import time
import uuid

from recurrence_ledger.api.settings import ApiSettings
from recurrence_ledger.embedded import run_journal
from recurrence_ledger.ledger.records import UnknownReasons
from recurrence_ledger.ledger.verdicts import UNKNOWN_REASONS
from recurrence_ledger.read.projection import RedisView
from tests.conftest import case, read_jsonl
from tests.e2e.api_server import embedded_view, fed_view, running_api
from tests.plugins.services import BROWSER_DIR

#: --review in dashboard.css (#b3261e) as getComputedStyle reports it.
REVIEW_RED = "rgb(179, 38, 30)"
QUIET = "quiet"


def quiet_scope(record: dict) -> tuple[dict, list[dict]]:
    """A statistics record and two revision rows of a scope whose two
    revisions were each selected once and avoided once: streak 0 both,
    nothing needing review."""
    rows = [
        {"scope_id": QUIET, "artifact_ref": {"family": "experience", "artifact_id": artifact_id, "revision": 1},
         "signature_key": "quiet failure", "terminal_recurred_streak": 0, "needs_review": False, "repair_surface": "working_state",
         "selected": 1, "recurred": 0, "avoided": 1, "yield": 1.0, "low_yield": False}
        for artifact_id in ("Z1", "Z2")
    ]
    statistics = {**record, "scope_id": QUIET, "selected": 2, "recurred": 0, "avoided": 2, "unknown": 0, "unlinked_handoff_citations": 0,
                  "needing_review": 0, "top_revisions": [], "pending_outcomes": 0, "late_revisions": 0, "repeat_failure_rate": 0.0,
                  "recurred_by_severity": {name: 0 for name in record["recurred_by_severity"]}}  # no recurrence: none by severity (§22)
    return statistics, rows
SCOPE = "dns-mirror"
#: The counters of the scope's panels (data-counter), contract §8 and §16–§17.
COUNTERS = (
    "selected", "recurred", "avoided", "needing_review", "unknown", "unlinked_handoff_citations", "pending_outcomes", "ambiguous_matches",
    "unmatched_failures", "binding_suspects", "late_revisions", "forward_references",
)
#: The columns of the scopes table after the scope id.
SCOPE_COLUMNS = (
    "as_of_position", "selected", "recurred", "avoided", "needing_review", "unknown", "unlinked_handoff_citations", "pending_outcomes",
    "binding_suspects",
)
AUDIT = "bind-audit"


def audit_records(tmp_path) -> tuple[dict, list[dict], list[dict]]:
    """The expected facts of tests/cases/unknown_reasons (every reason of
    contract §17, one binding suspect) and its last statistics record and
    revision rows from the embedded runner, to put into the view."""
    journal, expected = case("unknown_reasons")
    run_journal(journal, tmp_path / "unknown-reasons", show_progress=False)
    statistics = read_jsonl(tmp_path / "unknown-reasons" / "recurrence-statistics.jsonl")
    revisions = read_jsonl(tmp_path / "unknown-reasons" / "revision-statistics.jsonl")
    return expected["scopes"][AUDIT], statistics, revisions


def put(redis_url: str, namespace: str, statistics: list[dict], revisions: list[dict] = ()) -> None:
    """Write statistics records and revision rows into the view, as a worker would."""
    writer = RedisView(redis_url, namespace=namespace)
    try:
        writer.submit(statistics, revisions=revisions)
        assert writer.pending == 0
    finally:
        writer.close()


def tell(driver: subprocess.Popen, line: str, timeout: float = 30) -> dict:
    """Send the driver one line of its protocol; its next snapshot."""
    driver.stdin.write(f"{line}\n")
    driver.stdin.flush()
    return read_line(driver, timeout)


def chips(reasons: dict) -> list[str]:
    """The page's reason chips of an unknown_reasons object: the reasons that occurred, in the contract's order."""
    return [f"{reason} {reasons[reason]}" for reason in UNKNOWN_REASONS if reasons.get(reason)]


def read_line(process: subprocess.Popen, timeout: float) -> dict:
    """The next JSON line the driver prints; fails with its stderr when it
    exits or says nothing within ``timeout`` seconds."""
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if selector.select(timeout=0.2):
            line = process.stdout.readline()
            if line:
                return json.loads(line)
            break
    process.kill()
    raise AssertionError(f"browser driver gave no snapshot within {timeout} s; stderr:\n{process.stderr.read()[-4000:]}")


def yield_label(row: dict) -> str:
    """The dashboard's yield cell: 2 decimals, "–" without terminal verdicts, " low" for low_yield."""
    if row["yield"] is None:
        return "–"
    return f"{row['yield']:.2f}" + (" low" if row["low_yield"] else "")


def test_dashboard_shows_the_worked_example_and_refreshes(bootstrap, redis_url, browser, tmp_path, record_property):
    node = browser

    screenshot = tmp_path / "dashboard.png"
    unknown_screenshot = tmp_path / "dashboard-unknown.png"
    with fed_view(bootstrap, redis_url, tmp_path) as view, running_api(ApiSettings(redis_url=redis_url, topic_prefix=view.prefix)) as base_url:
        record = view.expected[SCOPE]
        driver = subprocess.Popen(
            [node, str(BROWSER_DIR / "dashboard.mjs"), f"{base_url}/?refresh=400", str(screenshot)],
            cwd=BROWSER_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            shown = read_line(driver, 60)

            # The counters of the last statistics record, as the page shows them.
            assert shown["scope"] == SCOPE
            assert shown["asOf"] == str(record["as_of_position"])
            assert shown["counters"] == {name: str(record[name]) for name in COUNTERS}
            assert shown["scopes"] == [[SCOPE, *(str(record[name]) for name in SCOPE_COLUMNS)]]
            assert shown["gapsHeading"] == "Evidence gaps — not failures"

            # The two top revisions of the worked example, streaks 4 and 3, in
            # the table, in the chart, and both highlighted as needing review.
            top = [(row["artifact_ref"]["artifact_id"], row["artifact_ref"]["revision"], row["terminal_recurred_streak"]) for row in record["top_revisions"]]
            assert top == [("D2", 1, 4), ("K5", 1, 3)]
            assert [row[:4] for row in shown["revisions"]] == [
                [str(rank), f"{ident} r{revision}", row["signature_key"], str(streak)]
                for rank, ((ident, revision, streak), row) in enumerate(zip(top, record["top_revisions"], strict=True), start=1)
            ]
            assert [row[4] for row in shown["revisions"]] == ["needs review", "needs review"]
            # Each revision's repair_surface, counts and yield, from the record's rows.
            assert [row["repair_surface"] for row in record["top_revisions"]] == ["experience_content", "recall_policy"]
            assert [row[5:] for row in shown["revisions"]] == [
                [row["repair_surface"], str(row["recurred"]), str(row["avoided"]), yield_label(row)] for row in record["top_revisions"]
            ]
            assert shown["reviewRowClasses"] == ["needs-review", "needs-review"]
            assert shown["chart"]["data"] == [4, 3]
            assert shown["chart"]["labels"] == [f"{ident} r{revision} · {row['signature_key']}" for (ident, revision, _), row in zip(top, record["top_revisions"], strict=True)]
            assert shown["review"] == [
                [f"{ident} r{revision}", row["signature_key"], str(streak), row["repair_surface"], yield_label(row)]
                for (ident, revision, streak), row in zip(top, record["top_revisions"], strict=True)
            ]
            # It polls with If-None-Match: an unchanged view answers 304.
            assert shown["stats"]["notModified"] >= 1 and shown["stats"]["errors"] == 0
            assert shown["consoleErrors"] == []
            # needing review 2: red, like the review panel — D2 r1's candidate waits for a decision and K5 r1
            # (recall_policy) has none to decide; the chart is drawn.
            assert shown["reviewSplit"] == "1 waiting for a decision · 0 decided · 1 no candidate"
            assert shown["needingReview"] == {"alert": True, "color": REVIEW_RED}
            assert shown["reviewPanelAlert"] is True
            assert shown["chartShown"] is True and shown["noStreakNote"] is None

            # A new statistics record in the view reaches the open page by itself.
            newer = {**record, "as_of_position": record["as_of_position"] + 1, "pending_outcomes": record["pending_outcomes"] + 3}
            put(redis_url, view.namespace, [newer])
            refreshed = tell(driver, f"expect pending_outcomes {newer['pending_outcomes']}")
            assert refreshed["asOf"] == str(newer["as_of_position"])
            assert refreshed["counters"]["pending_outcomes"] == str(newer["pending_outcomes"])
            assert refreshed["scopes"][0][8] == str(newer["pending_outcomes"])
            assert refreshed["stats"]["renders"] >= 2
            assert refreshed["consoleErrors"] == []

            # A scope whose revisions all have streak 0 and none needing review.
            quiet, rows = quiet_scope(record)
            put(redis_url, view.namespace, [quiet], rows)
            calm = tell(driver, f"select {QUIET}")
            assert calm["scope"] == QUIET and calm["counters"]["needing_review"] == "0"
            assert calm["needingReview"]["alert"] is False and calm["needingReview"]["color"] != REVIEW_RED
            assert calm["reviewPanelAlert"] is False
            assert calm["chartShown"] is False
            assert calm["noStreakNote"] == "No revision has a streak: every revision's streak is 0."
            assert [row[:4] for row in calm["revisions"]] == [["1", "Z1 r1", "quiet failure", "0"], ["2", "Z2 r1", "quiet failure", "0"]]
            assert calm["review"] == [["none: no revision's streak reaches 3"]]
            assert calm["consoleErrors"] == []
            # Nothing unknown, no binding suspect: the unknown panel and the suspects say none.
            assert calm["unknown"]["rows"] == [["none: every selection of this scope has a terminal verdict"]]
            assert calm["unknown"]["shown"] is False and calm["unknown"]["scopeReasonsNone"] is True
            assert calm["suspects"]["rows"] == [["none: no revision without a verdict has 3 unknown selections its binding explains"]]
            assert calm["suspects"]["panelAlert"] is False

            # The unknown_reasons case (contract §17): every reason, one binding suspect.
            audit, audit_statistics, audit_revisions = audit_records(tmp_path)
            put(redis_url, view.namespace, audit_statistics, audit_revisions)
            shown_audit = tell(driver, f"select {AUDIT}")
            tell(driver, f"screenshot {unknown_screenshot}")
            assert_unknown_explained(shown_audit, audit, audit_revisions)

            driver.stdin.close()
            assert driver.wait(timeout=30) == 0, driver.stderr.read()[-4000:]
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()

    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    record_property("dashboard_screenshot", str(screenshot))
    print(f"dashboard screenshot: {screenshot} ({screenshot.stat().st_size} bytes)")
    if os.environ.get("RL_DASHBOARD_SCREENSHOT"):
        shutil.copyfile(screenshot, os.environ["RL_DASHBOARD_SCREENSHOT"])
    assert unknown_screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    record_property("dashboard_unknown_screenshot", str(unknown_screenshot))
    print(f"dashboard screenshot of the unknown reasons: {unknown_screenshot}")
    if os.environ.get("RL_DASHBOARD_UNKNOWN_SCREENSHOT"):
        shutil.copyfile(unknown_screenshot, os.environ["RL_DASHBOARD_UNKNOWN_SCREENSHOT"])


def assert_unknown_explained(shown: dict, audit: dict, revisions: list[dict]) -> None:
    """What the page shows of the unknown_reasons case: the figures of its
    expected file (never computed by the code under test), in the places a
    user looks."""
    statistics = audit["statistics"]
    expected_revisions = audit["revisions"]
    signatures = {f"{row['artifact_ref']['artifact_id']} r{row['artifact_ref']['revision']}": row["signature_key"] for row in revisions}
    assert shown["scope"] == AUDIT and shown["consoleErrors"] == []
    for name in ("unknown", "ambiguous_matches", "unmatched_failures", "binding_suspects", "forward_references"):
        assert shown["counters"][name] == str(statistics[name]), name
    assert [row[-1] for row in shown["scopes"] if row[0] == AUDIT] == [str(statistics["binding_suspects"])]
    # The scope's unknown by reason: all eleven reasons occur, in the contract's order.
    assert shown["unknown"]["scopeReasons"] == chips(statistics["unknown_reasons"]) and len(shown["unknown"]["scopeReasons"]) == 11
    # Each revision's unknown, most first (A1 and A2 tie at 1: contract §8 order), broken down by reason.
    order = ["B1 r1", "B2 r1", "A1 r1", "A2 r1"]
    figures = {name: expected_revisions[name.replace(" ", "")] for name in order}
    assert [figures[name]["unknown"] for name in order] == [9, 3, 1, 1]
    assert shown["unknown"]["rows"] == [
        [name, signatures[name], str(figures[name]["unknown"]), str(figures[name]["ambiguous"]), "".join(chips(figures[name]["unknown_reasons"])),
         "binding suspect" if figures[name]["binding_suspect"] else ""]
        for name in order
    ]
    assert shown["unknown"]["rowReasons"] == [chips(figures[name]["unknown_reasons"]) for name in order]
    # The binding's reasons (condition_empty, check_…) are marked; every chip says what its reason means.
    assert shown["unknown"]["suspectReasons"] == [chip for name in order for chip in chips(figures[name]["unknown_reasons"])
                                                 if chip.startswith(("condition_empty", "check_"))]
    assert all(title for title in shown["unknown"]["reasonTitles"])
    # The stacked chart: one bar per revision, one dataset per reason that occurs, adding up to each revision's unknown.
    chart = shown["unknown"]["chart"]
    assert shown["unknown"]["shown"] is True
    assert chart["labels"] == [f"{name} · {signatures[name]}" for name in order]
    assert [dataset["label"] for dataset in chart["datasets"]] == list(UNKNOWN_REASONS)
    for index, name in enumerate(order):
        assert sum(dataset["data"][index] for dataset in chart["datasets"]) == figures[name]["unknown"]
        assert {d["label"]: d["data"][index] for d in chart["datasets"] if d["data"][index]} == figures[name]["unknown_reasons"]
    # The binding suspect, with what to fix: B1 r1's nine unknowns have nine reasons, one each; the first of
    # the binding's in the contract's order (check_missing) names the fix, the others follow.
    suspects = shown["suspects"]
    assert (suspects["count"], suspects["threshold"], suspects["panelAlert"]) == ("1", "3", True)
    assert suspects["counterColor"] == REVIEW_RED
    [suspect] = suspects["rows"]
    assert suspect[:3] == ["B1 r1", signatures["B1 r1"], "9"]
    # The sentence is the reason's description in ledger/records.py (GET /field-catalogue), not the page's.
    description = UnknownReasons.model_fields["check_missing"].description
    assert suspect[3].startswith(f"1 unknown selection: {description} (also ")
    assert suspects["fixReasons"] == ["check_missing"]
    others = [chip for chip in chips(figures["B1 r1"]["unknown_reasons"]) if not chip.startswith("check_missing")]
    assert suspects["also"] == [f"(also {', '.join(others)})"]


def test_dashboard_with_an_api_token_asks_once_and_shows_the_scope(redis_url, browser, tmp_path):
    node = browser
    token = f"dash-{uuid.uuid4().hex}"
    with embedded_view(redis_url, tmp_path) as view:
        record = view.expected[SCOPE]
        settings = ApiSettings(redis_url=redis_url, topic_prefix=view.prefix, api_token=token)
        with running_api(settings) as base_url:
            env = {**os.environ, "RL_DASHBOARD_TOKEN": token, "RL_DASHBOARD_WRONG_TOKEN": "not-the-token-0123456789"}
            driver = subprocess.Popen(
                [node, str(BROWSER_DIR / "dashboard.mjs"), f"{base_url}/?refresh=400", str(tmp_path / "dashboard.png")],
                cwd=BROWSER_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            )
            try:
                shown = read_line(driver, 60)
                auth = shown["auth"]
                # Before the token: the form only, no data, the API said 401.
                assert auth["before"]["loginShown"] is True
                assert auth["before"]["scopesShown"] is False and auth["before"]["detailShown"] is False
                assert auth["before"]["scopeRows"] == 0 and auth["before"]["unauthorized"] >= 1
                assert auth["before"]["status"] == "API token required"
                assert auth["rejected"] == "The token was not accepted."
                # With it: the scope, as the last statistics record says.
                assert shown["scope"] == SCOPE and shown["asOf"] == str(record["as_of_position"])
                assert shown["counters"]["needing_review"] == str(record["needing_review"])
                assert shown["counters"]["selected"] == str(record["selected"])
                assert shown["chart"]["data"] == [row["terminal_recurred_streak"] for row in record["top_revisions"]]
                assert [row[0] for row in shown["scopes"]] == [SCOPE]
                # The token: a Bearer header on every API request, never in a URL, kept in sessionStorage only.
                assert auth["apiRequests"] >= 4 and auth["apiRequestsWithoutBearer"] == []
                assert auth["urlsWithToken"] == [] and auth["locationHasToken"] is False
                assert auth["sessionHasToken"] is True and auth["localStorageKeys"] == 0
                assert auth["loginShown"] is False and auth["forgetShown"] is True
                assert shown["stats"]["errors"] == 0 and shown["stats"]["notModified"] >= 1
                # The refused token's 401 is the only console error (Chromium logs failed fetches).
                assert [error for error in shown["consoleErrors"] if "401" not in error] == []
                driver.stdin.close()
                assert driver.wait(timeout=30) == 0, driver.stderr.read()[-4000:]
            finally:
                if driver.poll() is None:
                    driver.kill()
                    driver.wait()
