"""Every HTML page loads without the API token, with the same security
headers (processors/recurrence_ledger/api/responses.py PAGE_HEADERS): a browser's
navigation carries no Authorization header, and the pages hold no data —
they ask for the token, then read the API with it. On a real uvicorn
server over loopback, with the API token set, as production runs."""

from __future__ import annotations

import httpx
import pytest

from recurrence_ledger.api.app import ApiSettings
from recurrence_ledger.api.responses import PAGE_HEADERS
from tests.e2e.api_server import running_api

TOKEN = "pages-0123456789abcdef"
#: A Redis URL nothing answers: no page reads Redis.
UNREACHABLE = "redis://127.0.0.1:1/0"


@pytest.mark.parametrize("path", ["/", "/review", "/review?status=open&scope=a", "/timeline", "/timeline?scope=a&artifact_id=P1&revision=1"])
def test_a_page_loads_without_the_token_with_the_pages_headers(path):
    with running_api(ApiSettings(redis_url=UNREACHABLE, api_token=TOKEN)) as base_url:
        page = httpx.get(f"{base_url}{path}", headers={"Accept": "text/html"})
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert b'<script src="/static/login.js" defer></script>' in page.content  # it renders the #login form
        for name, value in PAGE_HEADERS.items():
            assert page.headers[name] == value
        assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"] and page.headers["X-Content-Type-Options"] == "nosniff"
        # The data behind the page still needs the token.
        assert httpx.get(f"{base_url}/review-queue").status_code == 401


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/docs/oauth2-redirect"])
def test_the_documentation_pages_cannot_be_framed(path):
    with running_api(ApiSettings(redis_url=UNREACHABLE, api_token=TOKEN)) as base_url:
        page = httpx.get(f"{base_url}{path}", headers={"Accept": "text/html"})
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert page.headers.get("X-Content-Type-Options") == "nosniff"
        assert "frame-ancestors 'none'" in page.headers.get("Content-Security-Policy", "")
