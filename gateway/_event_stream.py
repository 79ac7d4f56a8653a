"""A ``text/event-stream`` response: chunks of encoded SSE frames, keep-alive comments,
a goodbye on shutdown, and an end when the client leaves.

It replaces sse-starlette's ``EventSourceResponse`` on alallo's streams. That
one serves any content (it encodes each item as it goes) and pays for it on
every event: an anyio cancel scope around each send (``_send_with_timeout``),
an anyio task group of five tasks per stream, a lock shared with its ping
task. Profiled under ``bench/bench_sse.py`` those were a quarter of the
server's CPU per event; alallo's frames come encoded already (once per item,
whatever the number of subscribers: :meth:`alallo.runtime.Item.encoded`), so
what is left here is the wait for the next chunk and its write.

Per stream, three tasks: the response's own task reads the source and writes
each chunk; one waits for the client to leave (``http.disconnect``); one
sends a keep-alive comment when nothing went out for :data:`KEEPALIVE_S` and
watches the app's ``stopping`` event. Shutdown or a disconnect cancels the
one cancel scope around the reading loop (not one scope per wait): the
source is a plain async generator with no cancel scope of its own inside, so
nothing yields across a scope (research/sse-and-streaming.md), and a write
is never cut in half (Hypercorn shields its socket writes; :class:`ChunkWriter`
shields the rest of a partial write).

Writes go through :class:`gateway._chunks.ChunkWriter` when the connection
offers one (HTTP/1.1 over :func:`gateway.serve`'s own connection loop): the
chunk goes straight to the socket, without Hypercorn's and h11's per-message
path; otherwise (HTTP/2, other servers, tests that drive the ASGI app) through
ASGI ``send``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import AbstractContextManager

import trio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ._chunks import ChunkWriter

__all__ = ["KEEPALIVE_S", "RETRY_MS", "SHUTDOWN_FRAME", "EventStreamResponse"]

KEEPALIVE_S = 15
"""Seconds without a frame after which a keep-alive comment goes out, so that proxies keep
idle streams open."""
RETRY_MS = 2000
"""How long browsers wait before reconnecting (the SSE ``retry`` field)."""
Write = Callable[[bytes], Awaitable[None]]

KEEPALIVE_FRAME = b": ping\r\n\r\n"
"""A comment: every SSE parser skips it."""
SHUTDOWN_FRAME = f"event: shutdown\r\ndata: {{}}\r\nretry: {RETRY_MS}\r\n\r\n".encode()
"""The last frame of a stream the server ends because it stops."""


class EventStreamResponse(Response):
    """A streamed ``text/event-stream`` answer of the chunks ``source()`` yields.

    Args:
        source: a function returning an async generator of chunks (bytes of
            whole SSE frames); each chunk is written as it comes. It is called
            once the headers went out, and closed when the stream ends for any
            reason. It must not open cancel scopes or nurseries around a
            ``yield``.
        stopping: set when the server stops: the stream then sends
            :data:`SHUTDOWN_FRAME` and ends (instead of waiting for more).
        headers: more response headers (``Cache-Control: no-store``,
            ``Connection: keep-alive`` and ``X-Accel-Buffering: no`` are always set).
        keepalive_s: seconds of silence before a keep-alive comment.
        while_open: a context manager entered before the headers go out and held while
            the body streams (the account's open streams, :func:`gateway._metrics.open_stream`).
            An error it raises on entry is the answer (nothing was sent yet: Starlette
            answers it from the error table, e.g. 429 for too many streams).

    A HEAD request gets the headers and an empty body; the source is not called.
    """

    media_type = "text/event-stream"

    def __init__(self, source: Callable[[], AsyncGenerator[bytes, None]], *,
                 stopping: trio.Event, headers: Mapping[str, str] | None = None,
                 keepalive_s: float = KEEPALIVE_S,
                 while_open: Callable[[], AbstractContextManager[object]] | None = None,
                 ) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers({**(headers or {}), "Cache-Control": "no-store",
                           "Connection": "keep-alive", "X-Accel-Buffering": "no"})
        self._source = source
        self._while_open = while_open or contextlib.nullcontext
        self._stopping = stopping
        self._keepalive_s = keepalive_s
        self._last_write = trio.current_time()  # the keep-alive task's sign of life
        self._reading: trio.CancelScope | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with self._while_open():
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
            if scope.get("method") == "HEAD":
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            writer = ChunkWriter.of(scope)
            write = writer.write if writer is not None else _asgi_write(send)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._until_disconnect, receive, nursery.cancel_scope)
                nursery.start_soon(self._keep_alive, write)
                gone = await self._stream(write)
                if not gone:
                    if self._stopping.is_set():
                        await write(SHUTDOWN_FRAME)
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                nursery.cancel_scope.cancel()

    async def _stream(self, write: Write) -> bool:
        """Write the source's chunks until it ends or the server stops; True if the
        client is gone."""
        async with contextlib.aclosing(self._source()) as chunks:
            with trio.CancelScope() as self._reading:
                if self._stopping.is_set():
                    return False
                try:
                    async for chunk in chunks:
                        await write(chunk)
                        self._last_write = trio.current_time()
                except trio.BrokenResourceError:
                    return True
            return False

    async def _until_disconnect(self, receive: Receive, stream: trio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        stream.cancel()

    async def _keep_alive(self, write: Write) -> None:
        while not self._stopping.is_set():
            due = self._last_write + self._keepalive_s
            with trio.move_on_at(due):
                await self._stopping.wait()
            if self._stopping.is_set():
                break
            if self._last_write + self._keepalive_s <= trio.current_time():
                try:
                    await write(KEEPALIVE_FRAME)
                except trio.BrokenResourceError:
                    return  # the client is gone: the disconnect ends the stream
                self._last_write = trio.current_time()
        if self._reading is not None:
            self._reading.cancel()


def _asgi_write(send: Send) -> Write:
    async def write(chunk: bytes) -> None:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    return write
