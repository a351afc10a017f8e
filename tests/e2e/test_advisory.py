"""The recall-time advisory (``POST /advisories``) on a real Redis and a
real Redis Cluster: the fixture cases review_loop (approved repairs that
held, recur and failed, an open candidate, a rejected one, a superseded
one), unknown_reasons (a binding suspect, a low yield) and critical_runs
(critical revisions) and the packaged example (a lesson whose effect is
measured, contract §21) through run-journal into the view and the review
read models, then per ref what the ledger published and the advice that
words it; the read token guards it; more than 64 refs answer 422.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from recurrence_ledger.api.app import create_app
from recurrence_ledger.api.settings import ApiSettings
from tests.e2e import harness
from tests.e2e.advisory_fixtures import clear, feed, ref, run_cases

TOKEN = "advisory-read-token-0123456789abcdef"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, Path]:
    return run_cases(tmp_path_factory.mktemp("advisory"), ("review_loop", "unknown_reasons", "critical_runs", "example"))


@pytest.fixture
def api(read_redis_url, outputs) -> Iterator[TestClient]:
    prefix = harness.new_prefix()
    try:
        for out in outputs.values():
            feed(read_redis_url, prefix, out)
        settings = ApiSettings(redis_url=read_redis_url, topic_prefix=prefix, api_token=TOKEN)
        with TestClient(create_app(settings), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            yield client
    finally:
        clear(read_redis_url, prefix)


def advise(api: TestClient, scope_id: str, refs: list[dict]) -> dict:
    response = api.post("/advisories", json={"scope_id": scope_id, "artifact_refs": refs})
    assert response.status_code == 200, response.text
    return response.json()


def test_the_advisory_reads_each_review_status_and_repair(api):
    body = advise(api, "review-loop", [ref("EXP-a"), ref("EXP-b"), ref("EXP-c"), ref("EXP-c", 2), ref("EXP-d"), ref("EXP-e"), ref("EXP-e", 2)])
    assert body["scope_id"] == "review-loop" and body["known"] is True and body["as_of_position"] > 0
    rows = {(row["artifact_ref"]["artifact_id"], row["artifact_ref"]["revision"]): row for row in body["advisories"]}
    assert [(row["artifact_ref"]["artifact_id"], row["artifact_ref"]["revision"]) for row in body["advisories"]] == [
        ("EXP-a", 1), ("EXP-b", 1), ("EXP-c", 1), ("EXP-c", 2), ("EXP-d", 1), ("EXP-e", 1), ("EXP-e", 2)]
    summary = {
        key: (row["known"], row["needs_review"], row["terminal_recurred_streak"], row["review"] and row["review"]["status"],
              row["review"] and row["review"]["repair_status"], row["head"], row["superseded_by"] and row["superseded_by"]["revision"])
        for key, row in rows.items()
    }
    assert summary == {
        ("EXP-a", 1): (True, True, 3, "approved", "held", None, None),
        ("EXP-b", 1): (True, True, 3, "approved", "recurring", None, None),
        ("EXP-c", 1): (True, True, 3, "approved", "failed", None, None),
        ("EXP-c", 2): (True, True, 3, "open", None, None, None),
        ("EXP-d", 1): (True, True, 3, "rejected", None, None, None),
        ("EXP-e", 1): (True, True, 3, "superseded", "pending", False, 2),
        ("EXP-e", 2): (False, False, 0, None, None, None, None),
    }
    assert rows[("EXP-a", 1)]["review"]["decision"] == "approved" and rows[("EXP-a", 1)]["review"]["fix_revision"] == ref("EXP-a", 2)
    assert {key: row["advice"] for key, row in rows.items()} == {
        ("EXP-a", 1): "review approved a fix (r2, repair held); 3 recurrences in a row",
        ("EXP-b", 1): "review approved a fix (r2, repair recurring); 3 recurrences in a row",
        ("EXP-c", 1): "review approved a fix (r2, repair failed); 3 recurrences in a row",
        ("EXP-c", 2): "3 recurrences in a row, waiting for review",
        ("EXP-d", 1): "3 recurrences in a row, review rejected the candidate",
        ("EXP-e", 1): "superseded by r2; 3 recurrences in a row",
        ("EXP-e", 2): "unknown to the ledger: no selection or verdict recorded for this revision yet",
    }


def test_the_advisory_says_a_binding_suspect_and_a_low_yield(api):
    body = advise(api, "bind-audit", [ref("B1"), ref("B2"), ref("A1")])
    b1, b2, a1 = body["advisories"]
    assert (b1["binding_suspect"], b1["low_yield"], b1["selected"], b1["review"]) == (True, False, 9, None)
    assert b1["advice"] == "its bound check proves nothing: check missing in 1 of 9 selections"
    assert (b2["binding_suspect"], b2["low_yield"], b2["yield"]) == (False, True, 0.0)
    assert b2["advice"] == "recurred 1 time since its last avoided verdict; low yield 0.0 (0 avoided, 1 recurred)"
    assert a1["advice"] == "no warning"


def test_the_advisory_carries_severity_and_marks_a_critical_line(api):
    body = advise(api, "tenant-guard", [ref("X1"), ref("M1")])
    x1, m1 = body["advisories"]
    assert (x1["severity"], x1["needs_review"], m1["severity"], m1["needs_review"]) == ("critical", True, "medium", False)
    assert x1["advice"].startswith("critical: ") and "recurrences in a row" in x1["advice"]
    assert not m1["advice"].startswith("critical")


def test_an_unknown_scope_answers_every_ref_unknown(api):
    body = advise(api, "no-such-scope", [ref("EXP-a")])
    assert (body["known"], body["as_of_position"]) == (False, None)
    assert body["advisories"][0]["known"] is False and body["advisories"][0]["review"] is None


def test_the_advisory_takes_64_refs_and_refuses_65_with_422(api):
    refs = [ref(f"R{n}") for n in range(65)]
    assert len(advise(api, "review-loop", refs[:64])["advisories"]) == 64
    response = api.post("/advisories", json={"scope_id": "review-loop", "artifact_refs": refs})
    assert response.status_code == 422 and "at most 64" in response.json()["detail"]


def test_the_advisory_needs_the_read_token_and_a_well_formed_body(api):
    body = {"scope_id": "review-loop", "artifact_refs": [ref("EXP-a")]}
    assert api.post("/advisories", json=body, headers={"Authorization": "Bearer wrong-token-0123456789abcdef"}).status_code == 401
    assert api.post("/advisories", json={**body, "extra": 1}).status_code == 400
    assert api.post("/advisories", json={"scope_id": "", "artifact_refs": []}).status_code == 400


def test_an_advisory_body_over_its_cap_answers_413(api):
    from recurrence_ledger.api.limits import MAX_ADVISORY_BODY

    padding = "x" * MAX_ADVISORY_BODY
    response = api.post("/advisories", json={"scope_id": padding, "artifact_refs": []})
    assert response.status_code == 413 and str(MAX_ADVISORY_BODY) in response.json()["detail"]


def test_needing_review_is_split_by_the_revisions_candidates(api):
    """review_loop: six revisions need review — EXP-c r2's candidate is open and EXP-e r1's superseded (both in the
    inbox's waiting list), the four others decided; bind-audit needs none."""
    body = api.get("/scopes/review-loop/review-candidates").json()
    assert body["needing_review"] == 6
    assert body["split"] == {"waiting": 2, "decided": 4, "no_candidate": 0}
    assert api.get("/scopes/bind-audit/review-candidates").json()["split"] == {"waiting": 0, "decided": 0, "no_candidate": 0}
    tenant = api.get("/scopes/tenant-guard/review-candidates").json()
    assert sum(tenant["split"].values()) == tenant["needing_review"]


def test_the_advisory_carries_a_lesson_s_effect(api):
    """The packaged example's checkout-web: the feature-flag lesson was withheld from half of the tasks, and the
    ledger's effect says it helps (contract §21.4)."""
    [flag] = advise(api, "checkout-web", [ref("EXP-flag-snapshot")])["advisories"]
    assert (flag["known"], flag["verdict"], flag["probability_helps"]) == (True, "helps", 0.96)
    assert flag["advice"] == "helps (P(helps) = 0.96)"
