"""The event-stream response (gateway/_event_stream.py) and its direct chunk writer
(gateway/_chunks.py), driven as ASGI in virtual time: keep-alive comments on a quiet
stream, the goodbye on shutdown, the end when the client leaves, HEAD, and chunks written
to a real socket whole and in order, a slow reader included."""

from __future__ import annotations

import socket
from collections.abc import AsyncGenerator
from typing import Any

import pytest
import trio
import trio.testing
from starlette.types import Message

from gateway._chunks import CONNECTION_KEY, ChunkWriter
from gateway._event_stream import KEEPALIVE_FRAME, SHUTDOWN_FRAME, EventStreamResponse


class Client:
    """One request to a response: what it sent, with the virtual time of each message."""

    def __init__(self, method: str = "GET", scope: dict[str, Any] | None = None) -> None:
        self.messages: list[tuple[float, Message]] = []
        self.left = trio.Event()
        self.scope = {"type": "http", "method": method, "http_version": "1.1", **(scope or {})}
        self._asked = False

    async def receive(self) -> Message:
        if not self._asked:
            self._asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.messages.append((trio.current_time(), message))

    def bodies(self) -> list[tuple[float, bytes]]:
        return [(t, m["body"]) for t, m in self.messages if m["type"] == "http.response.body"]

    def ended(self) -> bool:
        return any(m["type"] == "http.response.body" and not m.get("more_body", False)
                   for _, m in self.messages)


class Source:
    """Chunks to stream: ``first``, then nothing until closed; records that it was closed."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks
        self.calls = 0
        self.closed = False

    async def __call__(self) -> AsyncGenerator[bytes, None]:
        self.calls += 1
        try:
            for chunk in self.chunks:
                yield chunk
            await trio.sleep_forever()
        finally:
            self.closed = True


async def test_a_quiet_stream_gets_a_keepalive_every_15_s_and_ends_when_the_client_leaves(
        autojump_clock: trio.testing.MockClock) -> None:
    source, client = Source(b"data: 1\r\n\r\n"), Client()
    response = EventStreamResponse(source, stopping=trio.Event(), headers={"Last-Event-ID": "7"})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(response, client.scope, client.receive, client.send)
        await trio.sleep(46)
        client.left.set()
    start = client.messages[0][1]
    assert start["status"] == 200
    headers = dict(start["headers"])
    assert headers[b"content-type"].startswith(b"text/event-stream")
    assert headers[b"cache-control"] == b"no-store"
    assert headers[b"x-accel-buffering"] == b"no"
    assert headers[b"last-event-id"] == b"7"
    assert [(round(t), body) for t, body in client.bodies()] == [
        (0, b"data: 1\r\n\r\n"), (15, KEEPALIVE_FRAME), (30, KEEPALIVE_FRAME),
        (45, KEEPALIVE_FRAME)]
    assert source.closed and not client.ended(), "a client that left is sent nothing more"


async def test_shutdown_sends_the_goodbye_and_ends_the_body(
        autojump_clock: trio.testing.MockClock) -> None:
    source, client, stopping = Source(b"data: 1\r\n\r\n"), Client(), trio.Event()
    response = EventStreamResponse(source, stopping=stopping)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(response, client.scope, client.receive, client.send)
        await trio.sleep(20)
        stopping.set()
    assert [body for _, body in client.bodies()] == [
        b"data: 1\r\n\r\n", KEEPALIVE_FRAME, SHUTDOWN_FRAME, b""]
    assert client.ended() and source.closed


async def test_a_source_that_ends_ends_the_body_and_head_never_starts_one() -> None:
    async def finite() -> AsyncGenerator[bytes, None]:
        yield b"data: a\r\n\r\n"
        yield b"data: b\r\n\r\n"

    client = Client()
    await EventStreamResponse(finite, stopping=trio.Event())(
        client.scope, client.receive, client.send)
    assert [body for _, body in client.bodies()] == [b"data: a\r\n\r\n", b"data: b\r\n\r\n", b""]
    assert client.ended()

    source, head = Source(b"data: 1\r\n\r\n"), Client("HEAD")
    await EventStreamResponse(source, stopping=trio.Event())(head.scope, head.receive, head.send)
    assert [body for _, body in head.bodies()] == [b""] and source.calls == 0


class FakeServer:
    """What a Hypercorn ``TCPServer`` offers the writer: its stream and its send lock."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.send_lock = trio.Lock()


async def test_the_writer_is_offered_only_for_http_1_1_on_gateways_own_connections() -> None:
    a, b = trio.socket.socketpair()
    server = FakeServer(trio.SocketStream(a))
    state = {CONNECTION_KEY: server}
    try:
        assert ChunkWriter.of({"http_version": "1.1", "state": state}) is not None
        assert ChunkWriter.of({"http_version": "1.0", "state": state}) is None
        assert ChunkWriter.of({"http_version": "2", "state": state}) is None
        assert ChunkWriter.of({"http_version": "1.1", "state": {}}) is None
        assert ChunkWriter.of({"http_version": "1.1"}) is None
    finally:
        a.close()
        b.close()


def dechunk(raw: bytes) -> list[bytes]:
    chunks = []
    while raw:
        size, _, raw = raw.partition(b"\r\n")
        n = int(size, 16)
        assert raw[n:n + 2] == b"\r\n"
        chunks.append(raw[:n])
        raw = raw[n + 2:]
    return chunks


@pytest.mark.parametrize("locked", [False, True], ids=["free", "while Hypercorn writes"])
async def test_chunks_reach_a_slow_reader_whole_and_in_order(locked: bool) -> None:
    a, b = trio.socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    server = FakeServer(trio.SocketStream(a))
    writer = ChunkWriter.of({"http_version": "1.1", "state": {CONNECTION_KEY: server}})
    assert writer is not None
    sent = [bytes([65 + i % 26]) * (1000 + 37 * i) for i in range(200)]  # ~0.9 MB
    received = bytearray()

    async def write_all() -> None:
        if locked:
            await server.send_lock.acquire()  # Hypercorn is writing: the writer waits its turn
            await trio.sleep(0.05)
            server.send_lock.release()
        for chunk in sent:
            await writer.write(chunk)
        a.shutdown(socket.SHUT_WR)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_all)
        while data := await b.recv(65536):
            received += data
    assert dechunk(bytes(received)) == sent
    a.close()
    with pytest.raises(trio.BrokenResourceError):
        await writer.write(b"after the close")
    b.close()


async def test_a_write_to_a_client_that_left_is_a_broken_resource() -> None:
    a, b = trio.socket.socketpair()
    writer = ChunkWriter(trio.SocketStream(a), trio.Lock())
    b.close()
    with pytest.raises(trio.BrokenResourceError):
        for _ in range(100):  # the first writes may still land in the socket's buffer
            await writer.write(b"x" * 1000)
    a.close()
