"""The client library's ``Advisor`` against a real ``recurrence-ledger
serve`` process over a real Redis view (the review_loop case): it answers
per lesson from ``POST /advisories``, reuses an answer within its TTL,
splits more than 64 lessons into requests the API takes, and fails open
when the API refuses its token (a ledger that is down or slow:
tests/client/test_advisor_fails_open.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from recurrence_ledger.client import Advisor
from tests.e2e import harness
from tests.e2e.advisory_fixtures import clear, feed, ref, run_cases
from tests.e2e.api_server import serve_cli, stop_process

TOKEN = "advisor-read-token-0123456789abcdef"
SCOPE = "review-loop"


@pytest.fixture(scope="module")
def served(redis_url, tmp_path_factory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("advisor")
    outputs = run_cases(workdir, ("review_loop",))
    prefix = harness.new_prefix()
    process = None
    try:
        feed(redis_url, prefix, outputs["review_loop"])
        process, url = serve_cli(["--redis-url", redis_url, "--topic-prefix", prefix], {"RL_API_TOKEN": TOKEN}, workdir / "serve.log")
        yield url
    finally:
        if process is not None:
            stop_process(process)
        clear(redis_url, prefix)


def test_the_advisor_answers_per_lesson_and_reuses_answers_within_its_ttl(served):
    with Advisor(served, token=TOKEN, timeout=5, ttl=600) as advisor:
        first = advisor.advise(SCOPE, [ref("EXP-e"), ref("EXP-c", 2), ref("EXP-a")])
        assert [(advice.available, advice.advice) for advice in first] == [
            (True, "superseded by r2; 3 recurrences in a row"),
            (True, "3 recurrences in a row, waiting for review"),
            (True, "review approved a fix (r2, repair held); 3 recurrences in a row"),
        ]
        assert (first[0].superseded_by, first[0].review_status, first[1].review_status, first[2].repair_status) == (
            ref("EXP-e", 2), "superseded", "open", "held")
        again = advisor.advise(SCOPE, [ref("EXP-a"), ref("EXP-e")])
        assert [advice.advice for advice in again] == [first[2].advice, first[0].advice]
        assert (advisor.requests, advisor.failures) == (1, 0)


def test_the_advisor_splits_more_than_64_lessons(served):
    with Advisor(served, token=TOKEN, timeout=5) as advisor:
        advices = advisor.advise(SCOPE, [ref("EXP-a")] + [ref(f"other-{n}") for n in range(69)])
    assert len(advices) == 70 and advisor.requests == 2
    assert advices[0].known and not any(advice.known for advice in advices[1:]) and all(advice.available for advice in advices)


def test_the_advisor_fails_open_when_the_token_is_refused(served, caplog):
    caplog.set_level(logging.WARNING, logger="recurrence_ledger.client.advisor")
    with Advisor(served, token="not-the-token-0123456789abcdef", timeout=5) as advisor:
        advices = advisor.advise(SCOPE, [ref("EXP-a")])
    assert not advices[0].available and "HTTP 401" in caplog.records[0].getMessage()
