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
"""

from __future__ import annotations

import asyncio
from typing import Any


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


def http_protocol() -> type[asyncio.Protocol]:
    """uvicorn's ``auto`` HTTP protocol class with a
    :class:`CoalescingTransport` around each connection's transport."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class CoalescingProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]

    return CoalescingProtocol
