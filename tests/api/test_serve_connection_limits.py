"""``serve``'s connection limits (docs/operating.md, settings; the protocol
of processors/recurrence_ledger/api/transport.py), on a real ``serve``
process: a request head trickled or left unfinished is cut off — on a new
connection and on a kept-alive one — a head over the size limit is answered
431, connections over ``--limit-concurrency`` are answered 503; and the
server goes on serving others."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx
import pytest

from tests.e2e.api_server import serve_cli, stop_process

#: A Redis URL nothing answers: the dashboard page (GET /) reads no Redis.
UNREACHABLE = "redis://127.0.0.1:1/0"
HEAD = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"


@pytest.fixture
def serve(tmp_path):
    """``start(*args)``: a serve process with ARGS; its base URL. Stopped after the test."""
    processes = []

    def start(*args: str) -> str:
        process, url = serve_cli(list(args), {"REDIS_URL": UNREACHABLE}, tmp_path / f"serve{len(processes)}.log")
        processes.append(process)
        return url

    yield start
    for process in processes:
        stop_process(process)


def connect(url: str) -> socket.socket:
    """A raw TCP connection to ``url``'s server (reads give up after 30 s)."""
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname, parts.port), timeout=30)


def read_response(connection: socket.socket) -> bytes:
    """One whole response (head and its Content-Length body) from ``connection``."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += connection.recv(65536)
    return head


def closed_while_trickling(connection: socket.socket, lines: int) -> bool:
    """Send a header line at a time (waiting up to 0.2 s for an answer after
    each), up to ``lines``: whether the server closed the connection first,
    without an answer."""
    connection.settimeout(0.2)
    for number in range(lines):
        try:
            connection.sendall(b"X-Trickle-%d: a\r\n" % number)
            answer = connection.recv(1024)
        except TimeoutError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            return True
        assert answer == b"", answer  # closed, never answered
        return True
    return False


def test_a_request_head_trickled_is_cut_off_on_a_new_and_on_a_kept_alive_connection(serve):
    url = serve("--header-timeout", "1", "--timeout-keep-alive", "600")
    with connect(url) as slow:
        slow.sendall(HEAD)
        assert closed_while_trickling(slow, lines=300)
    with connect(url) as kept:
        kept.sendall(HEAD + b"\r\n")
        assert read_response(kept).startswith(b"HTTP/1.1 200")
        kept.sendall(HEAD)  # the next request on the kept-alive connection, never finished
        assert closed_while_trickling(kept, lines=300)
    with connect(url) as silent:  # a connection that sends nothing at all
        assert silent.recv(1024) == b""
    assert httpx.get(f"{url}/").status_code == 200


def test_a_request_head_over_the_size_limit_is_answered_431(serve):
    url = serve("--max-header-bytes", "4096")
    with connect(url) as big:
        try:
            big.sendall(HEAD + b"X-Big: " + b"a" * 20_000)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed while the head was still being sent
        answer = b""
        try:
            while chunk := big.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
        assert answer.startswith(b"HTTP/1.1 431 "), answer
    assert httpx.get(f"{url}/", headers={"X-Fits": "a" * 1000}).status_code == 200


def answer_to(url: str, request: bytes) -> bytes:
    """The bytes the server sends back to ``request``, sent in one write, until it closes."""
    with connect(url) as connection:
        connection.sendall(request)
        answer = b""
        try:
            while chunk := connection.recv(65536):
                answer += chunk
                if answer.startswith(b"HTTP/1.1 200") and b"\r\n\r\n" in answer:
                    break
        except ConnectionResetError:
            pass
        return answer


def test_a_whole_request_head_over_the_size_limit_in_one_read_is_answered_431_and_one_within_it_is_served(serve):
    """The head is measured to the blank line that ends it, so a body in the
    same read does not count, and a head that arrives whole is refused as
    one that arrives in pieces is."""
    url = serve("--max-header-bytes", "1024")
    assert answer_to(url, HEAD + b"X-Big: " + b"a" * 3_000 + b"\r\n\r\n").startswith(b"HTTP/1.1 431 ")
    fits = HEAD + b"X-Fits: " + b"a" * (1024 - len(HEAD) - len(b"X-Fits: ") - 4) + b"\r\n\r\n"
    assert len(fits) == 1024
    assert answer_to(url, fits).startswith(b"HTTP/1.1 200 ")
    assert answer_to(url, fits[:-4] + b"a\r\n\r\n").startswith(b"HTTP/1.1 431 ")  # one byte more
    body = b"x" * 5_000
    with_body = HEAD.replace(b"GET", b"POST") + b"Content-Length: %d\r\n\r\n" % len(body) + body
    assert not answer_to(url, with_body).startswith(b"HTTP/1.1 431")  # the body is not the head


def test_a_concurrency_limit_of_one_serves_one_client_at_a_time(serve):
    url = serve("--limit-concurrency", "1")
    assert httpx.get(f"{url}/").status_code == 200
    with connect(url) as idle:
        idle.sendall(b"GET / HTTP/1.1\r\n")  # one client connected, its head unfinished
        assert httpx.get(f"{url}/").status_code == 503


def test_connections_over_the_concurrency_limit_are_answered_503_until_some_close(serve):
    url = serve("--limit-concurrency", "3")
    idle = [connect(url) for _ in range(3)]
    try:
        for connection in idle:
            connection.sendall(b"GET / HTTP/1.1\r\n")  # open, their heads unfinished
        answer = httpx.get(f"{url}/")
        assert answer.status_code == 503
    finally:
        for connection in idle:
            connection.close()
    statuses = []
    for _ in range(100):  # the server sees the closes as it reads them
        statuses.append(httpx.get(f"{url}/").status_code)
        if statuses[-1] == 200:
            break
    assert statuses[-1] == 200 and set(statuses) <= {200, 503}, statuses
