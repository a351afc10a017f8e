"""``recurrence_ledger.api.transport``: a held write goes out with the next
one at once, or alone at the end of the event-loop step, in order, and
``close`` sends what is held first — over a real socket pair and asyncio's
own transport."""

from __future__ import annotations

import asyncio
import socket

from recurrence_ledger.api.transport import CoalescingTransport, http_protocol


class Counting(asyncio.Protocol):
    """A protocol that only keeps its transport."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport


async def exchange() -> tuple[list[bytes], bytes]:
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    transport, _ = await loop.create_connection(Counting, sock=ours)
    writes: list[bytes] = []
    real_write = transport.write

    def write(data: bytes) -> None:
        writes.append(bytes(data))
        real_write(data)

    transport.write = write  # count the real transport's writes
    coalescing = CoalescingTransport(transport, loop)
    coalescing.write(b"HTTP/1.1 200 OK\r\n\r\n")
    assert writes == []  # the head is held
    coalescing.write(b"body")
    assert writes == [b"HTTP/1.1 200 OK\r\n\r\nbody"]  # and sent with the body, at once
    coalescing.write(b"-tail")
    assert len(writes) == 1
    await asyncio.sleep(0)  # a write alone goes out at the end of the step
    assert writes[1:] == [b"-tail"]
    coalescing.write(b"-last")
    coalescing.close()  # sends what is held first
    theirs.setblocking(True)
    received = b""
    while chunk := await loop.run_in_executor(None, theirs.recv, 4096):
        received += chunk
    theirs.close()
    return writes, received


def test_writes_go_out_in_pairs_or_at_the_end_of_the_step_in_order() -> None:
    writes, received = asyncio.run(exchange())
    assert writes == [b"HTTP/1.1 200 OK\r\n\r\nbody", b"-tail", b"-last"]
    assert received == b"HTTP/1.1 200 OK\r\n\r\nbody-tail-last"


def test_the_protocol_is_uvicorns_auto_protocol() -> None:
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    assert issubclass(http_protocol(), AutoHTTPProtocol)
