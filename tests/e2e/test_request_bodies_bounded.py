"""Every request body is bounded by the bytes the server reads, not by the
``Content-Length`` the client declares (processors/recurrence_ledger/api/limits.py):
a chunked body (no length) over the cap answers 413 before the client has
sent it all, on a real uvicorn server over loopback, and a decision sent
that way is never published.

The client is a raw socket that writes the chunked body only when the
socket takes more and reads the answer as soon as there is one: the
server's 413 arriving while most of the body is still unsent is what shows
it stopped reading at the cap.
"""

from __future__ import annotations

import json
import select
import socket
from urllib.parse import urlsplit

import httpx
import pytest

from recurrence_ledger.api.limits import MAX_DECISION_BODY, MAX_OTHER_BODY
from recurrence_ledger.catalogue import REVIEW_DECISIONS
from recurrence_ledger.kafka.kafka_io import read_topic
from tests.e2e.review_fixtures import candidate, decision_api

ALICE = "alice-token-0123456789"
OPEN = candidate("s1", "P1", revision=2)
#: What the client offers to send: far more than any cap and than the socket buffers hold.
OFFERED = 64 * 1024 * 1024


def chunked_request(base_url: str, method: str, path: str, headers: dict[str, str], body_start: bytes, total: int) -> tuple[int, int, bytes]:
    """Send ``method path`` with a chunked body of ``total`` bytes
    (``body_start`` then spaces, 64 KiB chunks), writing only while the
    server has not answered; returns ``(body bytes sent, status, answer)``."""
    where = urlsplit(base_url)
    sock = socket.create_connection((where.hostname, where.port), timeout=60)
    try:
        head = f"{method} {path} HTTP/1.1\r\nHost: {where.hostname}:{where.port}\r\nTransfer-Encoding: chunked\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
        sock.sendall(head.encode())
        sock.setblocking(False)
        pending = b""
        sent = 0
        answer = b""
        writing = True
        while True:
            readable, writable, _ = select.select([sock], [sock] if writing and (sent < total or pending) else [], [], 60)
            if readable:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
                if b"\r\n\r\n" in answer and len(answer.partition(b"\r\n\r\n")[2]) >= int(
                        next(line.split(b":")[1] for line in answer.split(b"\r\n") if line.lower().startswith(b"content-length:"))):
                    break
                continue
            if not writable:
                raise AssertionError("the server neither answered nor read within 60 s")
            if not pending:
                size = min(65536, total - sent)
                chunk = (body_start + b" " * size)[:size] if sent == 0 else b" " * size
                body_start = b""
                pending = f"{size:x}\r\n".encode() + chunk + b"\r\n" + (b"0\r\n\r\n" if sent + size == total else b"")
                sent += size
            try:
                pending = pending[sock.send(pending):]
            except (BrokenPipeError, ConnectionResetError):
                writing = False  # the server closed: read its answer
        status = int(answer.split(b" ", 2)[1]) if answer else 0
        return sent, status, answer.partition(b"\r\n\r\n")[2]
    finally:
        sock.close()


@pytest.fixture(scope="module")
def api(bootstrap, redis_url):
    with decision_api(bootstrap, redis_url, (("alice", ALICE),), [OPEN]) as (prefix, base_url):
        yield prefix, base_url


def test_a_chunked_decision_over_the_cap_is_refused_unread_and_never_published(api, bootstrap):
    prefix, base_url = api
    path = f"/review-candidates/{OPEN['candidate_id']}/decision"
    # A valid decision padded with blanks to 1 MiB: well-formed JSON, so only its size can refuse it.
    start = json.dumps({"decision": "approved", "reason": "padded"}).encode()
    sent, status, body = chunked_request(base_url, "POST", path, {"Authorization": f"Bearer {ALICE}", "Content-Type": "application/json"},
                                         start, 1024 * 1024)
    assert status == 413, body
    assert json.loads(body) == {"detail": f"a request body here has at most {MAX_DECISION_BODY} bytes"}
    # 64 MiB offered: the answer comes while most of it is unsent.
    sent, status, _ = chunked_request(base_url, "POST", path, {"Authorization": f"Bearer {ALICE}", "Content-Type": "application/json"},
                                      start, OFFERED)
    assert status == 413 and sent < OFFERED // 4
    assert read_topic(bootstrap, REVIEW_DECISIONS, topic_prefix=prefix) == []
    # Declared too long: refused on the header, before a byte of body.
    declared = httpx.post(f"{base_url}{path}", content=b" " * (MAX_DECISION_BODY + 1), headers={"Authorization": f"Bearer {ALICE}"}, timeout=30)
    assert declared.status_code == 413
    # Within the cap the decision goes through as before.
    accepted = httpx.post(f"{base_url}{path}", json={"decision": "approved"}, headers={"Authorization": f"Bearer {ALICE}"}, timeout=30)
    assert accepted.status_code == 202, accepted.text
    assert [value["decision_id"] for _, _, _, value in read_topic(bootstrap, REVIEW_DECISIONS, topic_prefix=prefix)] == [accepted.json()["decision_id"]]


@pytest.mark.parametrize("path", ["/healthz", "/scopes", "/review-queue", "/", "/static/dashboard.js", "/no-such-path"])
def test_every_route_bounds_a_chunked_body(api, path):
    _, base_url = api
    sent, status, body = chunked_request(base_url, "GET", path, {}, b"", OFFERED)
    assert status == 413 and sent < OFFERED // 4
    assert json.loads(body)["detail"] == f"a request body here has at most {MAX_OTHER_BODY} bytes"


def test_a_trickled_body_is_cut_off_at_the_deadline_and_never_published(api, bootstrap, monkeypatch):
    """A slowloris: a decision whose Content-Length promises more than the
    client sends, or a chunked body that stalls. Before, the server held
    the request open for as long as the client liked (uvicorn has no body
    read timeout); now the body must arrive within BODY_DEADLINE_S."""
    from recurrence_ledger.api import limits

    monkeypatch.setattr(limits, "BODY_DEADLINE_S", 1.0)
    prefix, base_url = api
    where = urlsplit(base_url)
    path = f"/review-candidates/{OPEN['candidate_id']}/decision"
    published = read_topic(bootstrap, REVIEW_DECISIONS, topic_prefix=prefix)
    heads = [b"Content-Length: 200\r\n\r\n" + b'{"decision": "approved"',
             b"Transfer-Encoding: chunked\r\n\r\n" + b'8\r\n{"decisi\r\n']
    for head in heads:
        sock = socket.create_connection((where.hostname, where.port), timeout=60)  # a hang guard, not a timed assertion
        try:
            sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {where.hostname}\r\nAuthorization: Bearer {ALICE}\r\n"
                         "Content-Type: application/json\r\n".encode() + head)
            answer = b""
            while b"\r\n\r\n" not in answer:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
        finally:
            sock.close()
        assert answer.split(b" ", 2)[1] == b"408", answer
    assert read_topic(bootstrap, REVIEW_DECISIONS, topic_prefix=prefix) == published
