"""The client library's ``Advisor`` fails open: a ledger API that is down
or does not answer in time gives every lesson the advice "unknown"
(``available`` false), the recall goes on, and the log says so once; within
``retry_after`` it does not ask again. (Against a real serve process:
tests/e2e/test_client_advisor.py.)"""

from __future__ import annotations

import logging
import socket

from recurrence_ledger.client import UNKNOWN_ADVICE, Advisor

SCOPE = "review-loop"


def ref(artifact_id: str, revision: int = 1) -> dict:
    return {"family": "experience", "artifact_id": artifact_id, "revision": revision}


def test_the_advisor_fails_open_when_the_ledger_is_down_and_says_so_once(caplog):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens on it once closed
    caplog.set_level(logging.INFO, logger="recurrence_ledger.client.advisor")
    with Advisor(f"http://127.0.0.1:{port}", timeout=1, retry_after=0) as advisor:
        rounds = [advisor.advise(SCOPE, [ref("EXP-a"), ref("EXP-b")]) for _ in range(3)]
    assert all((advice.available, advice.known, advice.advice) == (False, False, UNKNOWN_ADVICE) for advices in rounds for advice in advices)
    assert (advisor.requests, advisor.failures) == (3, 3)
    warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1 and "recall goes on without its advice" in warnings[0].getMessage()


def test_the_advisor_fails_open_when_the_ledger_does_not_answer_in_time(caplog):
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        caplog.set_level(logging.WARNING, logger="recurrence_ledger.client.advisor")
        with Advisor(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.2, retry_after=60) as advisor:
            first = advisor.advise(SCOPE, [ref("EXP-a")])
            second = advisor.advise(SCOPE, [ref("EXP-a")])
    assert first[0].advice == second[0].advice == UNKNOWN_ADVICE and not first[0].available
    assert advisor.requests == 1  # within retry_after it does not ask again
    assert "no answer within the timeout" in caplog.records[0].getMessage()
