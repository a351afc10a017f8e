"""One write per response: the HTTP protocol ``serve`` runs uvicorn with.

uvicorn writes a response's status line and headers when the app sends
``http.response.start`` and the body when it sends ``http.response.body``:
two ``write`` calls, so two TCP segments, two deliveries and two wake-ups of
the client for every answer. On loopback the kernel's send path was a
quarter of the server's CPU per request (py-spy, BENCHMARKS.md,
api-benchmark). :class:`CoalescingTransport` gathers the writes made in one
step of the event loop and sends them as one at the end of that step
(``loop.call_soon``); the bytes and their order are unchanged, and
``close`` sends what is pending first. :func:`http_protocol` is uvicorn's
own protocol class (``auto``: httptools when installed, else h11) with its
transport wrapped so.
"""

from __future__ import annotations

import asyncio
from typing import Any


class CoalescingTransport:
    """``transport`` whose ``write`` calls of one event-loop step go out as
    one ``write`` at the end of the step; everything else is the wrapped
    transport's."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        """Queue ``data``; the first write of a step schedules the flush."""
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(data)

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


def http_protocol() -> type[asyncio.Protocol]:
    """uvicorn's ``auto`` HTTP protocol class with a
    :class:`CoalescingTransport` around each connection's transport."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class CoalescingProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]

    return CoalescingProtocol
