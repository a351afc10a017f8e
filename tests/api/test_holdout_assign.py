"""``GET /holdout/assign``: the verified assignment (§21.5) over HTTP, the
same as the library's; it needs no Redis."""

from __future__ import annotations

import httpx

from recurrence_ledger.api.app import ApiSettings
from tests.e2e.api_server import running_api

UNREACHABLE = "redis://127.0.0.1:1/0"


def test_the_api_answers_the_librarys_assignment_without_redis():
    with running_api(ApiSettings(redis_url=UNREACHABLE, namespace="rl:unreachable.")) as base_url:
        query = {"salt": "salt-1", "rate": "1/2", "scope_id": "s1", "handoff_artifact_id": "H1", "experience_artifact_id": "E7"}
        answer = httpx.get(f"{base_url}/holdout/assign", params=query)
        assert answer.status_code == 200
        assert answer.json() == {
            "scope_id": "s1", "handoff_artifact_id": "H1", "experience_artifact_id": "E7", "rate": "1/2", "hash": "61e9c42dbe7f0d51", "withheld": True,
        }
        assert httpx.get(f"{base_url}/holdout/assign", params={**query, "handoff_artifact_id": "H3"}).json()["withheld"] is False
        assert httpx.get(f"{base_url}/holdout/assign", params={**query, "rate": "0.5"}).json()["rate"] == "1/2"
        # Exponents of more than two digits are refused unread: Fraction("1e-99999999") would hold the server for minutes.
        for rate in ("3/4", "x", "1/0", "-1/4", "1e-99999999", "1e-5000", "nan", "0x1p-2", "1/" + "9" * 100):
            refused = httpx.get(f"{base_url}/holdout/assign", params={**query, "rate": rate})
            assert refused.status_code == 400, rate
