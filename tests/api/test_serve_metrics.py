"""``serve --metrics-port`` (processors/recurrence_ledger/api/metrics.py,
docs/operating.md "The API's capacity"): a real ``serve`` process counts
every request by method, route template and status — refused ones and
unknown paths too, without a series per path — and times them, on a port
of its own that the API token does not guard."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.api.test_serve_connection_limits import UNREACHABLE
from tests.e2e.api_server import serve_cli, stop_process
from tests.plugins.processes import free_port

TOKEN = "metrics-test-token-0123456789abcdef"


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """``{(sample name, sorted labels): value}`` of the metrics port."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_serve_counts_and_times_every_request_by_route_template_and_status(tmp_path):
    port = free_port()
    process, url = serve_cli(["--metrics-port", str(port)], {"REDIS_URL": UNREACHABLE, "RL_API_TOKEN": TOKEN}, tmp_path / "serve.log")
    try:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        answers = [
            httpx.get(f"{url}/", timeout=10).status_code,  # the page reads no Redis
            httpx.get(f"{url}/scopes/a/statistics", timeout=10).status_code,  # no token
            httpx.get(f"{url}/scopes/a/statistics", headers=bearer, timeout=10).status_code,  # Redis down
            httpx.get(f"{url}/scopes/b%2Fc/statistics", headers=bearer, timeout=10).status_code,
            httpx.get(f"{url}/no-such-path-1", headers=bearer, timeout=10).status_code,
            httpx.get(f"{url}/no-such-path-2", headers=bearer, timeout=10).status_code,
            httpx.delete(f"{url}/scopes", headers=bearer, timeout=10).status_code,
            httpx.post(f"{url}/review-candidates/c1/decision", json={"decision": "approved"}, headers=bearer, timeout=10).status_code,
            httpx.post(f"{url}/review-queue", headers=bearer, timeout=10).status_code,
        ]
        assert answers == [200, 401, 503, 503, 404, 404, 405, 403, 405]  # no reviewer tokens: the guard refuses every decision
        samples = scrape(port)
    finally:
        stop_process(process)
    log = (tmp_path / "serve.log").read_text()
    assert "Exception in ASGI application" not in log and "Traceback" not in log, log

    def requests(method: str, route: str, status: str) -> float:
        return samples.get(("recurrence_ledger_api_requests_total", (("method", method), ("route", route), ("status", status))), 0.0)

    assert requests("GET", "/", "200") == 1
    assert requests("GET", "/scopes/{scope:path}/statistics", "401") == 1
    assert requests("GET", "/scopes/{scope:path}/statistics", "503") == 2
    assert requests("GET", "unmatched", "404") == 2  # one series, however many paths
    assert requests("DELETE", "/scopes", "405") == 1
    # routes of an included router (review, history) too, refused before routing or not
    assert requests("POST", "/review-candidates/{candidate_id}/decision", "403") == 1
    assert requests("POST", "/review-queue", "405") == 1
    # serve_cli's own wait for the server: /healthz, 503 without Redis (once or more)
    counted = {labels for (name, labels) in samples if name == "recurrence_ledger_api_requests_total"}
    assert {dict(labels)["route"] for labels in counted} == {
        "/", "/scopes/{scope:path}/statistics", "unmatched", "/scopes", "/healthz", "/review-candidates/{candidate_id}/decision", "/review-queue"}
    timed = samples[("recurrence_ledger_api_request_seconds_count", (("method", "GET"), ("route", "/scopes/{scope:path}/statistics")))]
    assert timed == 3
    assert samples[("recurrence_ledger_api_requests_in_progress", ())] == 0
