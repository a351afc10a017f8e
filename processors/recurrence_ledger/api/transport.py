"""One write per response: the HTTP protocol ``serve`` runs uvicorn with.

uvicorn writes a response's status line and headers when the app sends
``http.response.start`` and the body when it sends ``http.response.body``:
two ``write`` calls, so two TCP segments, two deliveries and two wake-ups of
the client for every answer. On loopback the kernel's send path was a
quarter of the server's CPU per request (py-spy, BENCHMARKS.md,
api-benchmark). :class:`CoalescingTransport` holds a write when nothing is
held and sends it with the next one (the head with the body, at once), or
alone at the end of the event-loop step (``loop.call_soon``) when no other
write comes in that step — never later, so no answer waits for other
requests' work. The bytes and their order are unchanged, and ``close``
sends what is held first. :func:`http_protocol` is uvicorn's
own protocol class (``auto``: httptools when installed, else h11) with its
transport wrapped so.

And each request head bounded (:class:`ServeLimits`): uvicorn bounds idle
kept-alive connections (``timeout_keep_alive``) and the connections it
serves at once (``limit_concurrency``), but not a request head sent slowly
— a client trickling a header line now and then held its connection for as
long as it liked, and a kept-alive connection's timer stops at the first
byte of its next request — nor, under httptools, a head's size. The
protocol of :func:`http_protocol` closes a connection that has not sent a
whole request head :attr:`ServeLimits.header_timeout` seconds after it was
opened or started its next request, and answers 431 (closing it) to a
head over :attr:`ServeLimits.max_header_bytes`, whether it came in one read
or in many (before the request starts). A request
body is bounded by ``recurrence_ledger.api.limits``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from recurrence_ledger import policy

#: The answer to a request head over the size limit (the connection closes after it).
HEAD_TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


@dataclass(frozen=True)
class ServeLimits:
    """The connection limits ``serve`` runs uvicorn with
    (``recurrence_ledger.policy``, docs/operating.md): connections or
    requests at once before 503s, seconds an idle connection stays open,
    seconds to send a request head, bytes of a request head."""

    limit_concurrency: int = policy.SERVE_LIMIT_CONCURRENCY.default
    timeout_keep_alive: int = policy.SERVE_TIMEOUT_KEEP_ALIVE.default
    header_timeout: int = policy.SERVE_HEADER_TIMEOUT.default
    max_header_bytes: int = policy.SERVE_MAX_HEADER_BYTES.default

    def uvicorn_options(self) -> dict[str, int]:
        """The options of ``uvicorn.run`` these limits set. uvicorn answers
        503 once the open connections, the requesting one included, reach its
        ``limit_concurrency``, so it is given one more than
        :attr:`limit_concurrency`: that many clients are served at once (with
        uvicorn's own value, 1 would refuse every request)."""
        return {"limit_concurrency": self.limit_concurrency + 1, "timeout_keep_alive": self.timeout_keep_alive,
                "h11_max_incomplete_event_size": self.max_header_bytes}


class CoalescingTransport:
    """``transport`` whose writes go out in pairs (a held write with the
    next) or alone at the end of the event-loop step (module docstring);
    everything else is the wrapped transport's."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        """Hold ``data`` when nothing is held (a response's head), sending
        it at the end of the loop step unless another write comes first;
        send what is held and ``data`` together when something is (the
        head and the body: one write, sent at once)."""
        self._pending.append(data)
        if len(self._pending) > 1:
            self.flush()
        else:
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Send what is queued, as one write (nothing once the transport closes)."""
        if self._pending:
            data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        """Send what is queued, then close."""
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def http_protocol(limits: ServeLimits | None = None) -> type[asyncio.Protocol]:
    """uvicorn's ``auto`` HTTP protocol class with a
    :class:`CoalescingTransport` around each connection's transport, and
    each request head bounded in time and size by ``limits`` (default
    :class:`ServeLimits`; module docstring)."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    limits = limits or ServeLimits()

    class CoalescingProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        head_timer: asyncio.TimerHandle | None = None
        head_bytes = 0
        head_tail = b""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
            self.await_head()

        def data_received(self, data: bytes) -> None:
            cycle = self.cycle
            idle = cycle is None or cycle.response_complete
            if idle and self.head_timer is None:  # the first bytes of the next request on a kept-alive connection
                self.await_head()
            if self.head_timer is not None and self.head_over_limit(data):
                self.refuse(HEAD_TOO_LARGE)  # before the parser sees it: no request starts
                return
            super().data_received(data)
            if self.cycle is not cycle:  # a request head was complete: the timer stops, the body has its own deadline
                self.stop_head_timer()

        def head_over_limit(self, data: bytes) -> bool:
            """Whether the head being received passes the size limit with
            ``data``: its bytes up to the blank line that ends it, when
            ``data`` holds that line (the rest is the body), else all of
            them — so a head over the limit is refused whether it comes in
            one read or in many."""
            seen = self.head_tail + data  # the blank line may straddle two reads
            end = seen.find(b"\r\n\r\n")
            if end >= 0:
                return self.head_bytes - len(self.head_tail) + end + 4 > limits.max_header_bytes
            self.head_bytes += len(data)
            self.head_tail = seen[-3:]
            return self.head_bytes > limits.max_header_bytes

        def connection_lost(self, exc: Exception | None) -> None:
            self.stop_head_timer()
            super().connection_lost(exc)

        def await_head(self) -> None:
            """Start the time and byte count of the next request head."""
            self.head_bytes, self.head_tail = 0, b""
            self.head_timer = self.loop.call_later(limits.header_timeout, self.refuse, b"")

        def stop_head_timer(self) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
                self.head_timer = None

        def refuse(self, answer: bytes) -> None:
            """Send ``answer`` (none: the head took too long) and close the connection."""
            self.stop_head_timer()
            if not self.transport.is_closing():
                if answer:
                    self.transport.write(answer)
                self.transport.close()

    return CoalescingProtocol
