"""The steps of a call (:mod:`alallo.client._steps`) performed with HTTPX: blocking by
:class:`SyncDriver` (``httpx.Client``, ``time.sleep``), async by :class:`AsyncDriver`
(``httpx.AsyncClient``, ``anyio.sleep``, so under Trio or asyncio).

The two are written side by side and do the same: run a call's generator,
perform each step, give each item on, and throw a transport error into the
generator, which says what it means; an open stream is closed as
:mod:`alallo.client._steps` says, and when the call ends however it ends.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Iterator
from typing import Any, TypeVar

import anyio
import httpx
from httpx_sse import EventSource, ServerSentEvent

from alallo.client._steps import (
    Connect,
    Feed,
    Give,
    NextFrame,
    Op,
    Send,
    Step,
    returning,
)

__all__ = ["AsyncDriver", "SyncDriver"]

T = TypeVar("T")


class SyncDriver:
    """Runs calls with a blocking HTTPX client."""

    def __init__(self, http: httpx.Client) -> None:
        self._http = http

    def run(self, op: Op[T]) -> T:
        """Run a call to its result."""
        [result] = self.drive(returning(op))
        return result

    def drive(self, feed: Feed[T]) -> Iterator[T]:
        """Run a call, giving its items one by one."""
        stream = _SyncStream()
        reply: Any = None
        error: Exception | None = None
        try:
            while True:
                try:
                    step = feed.send(reply) if error is None else feed.throw(error)
                except StopIteration:
                    return
                reply, error = None, None
                if isinstance(step, Give):
                    yield step.item
                    continue
                try:
                    reply = self._perform(step, stream)
                except httpx.TransportError as exc:  # httpx_sse.SSEError is one
                    error = exc
        finally:
            feed.close()
            stream.close()

    def _perform(self, step: Step, stream: _SyncStream) -> Any:
        if not isinstance(step, NextFrame):
            stream.close()
        if isinstance(step, Send):
            return self._http.request(step.method, step.path, headers=step.headers,
                                      params=step.params, json=step.json, files=step.files,
                                      data=step.data)
        if isinstance(step, Connect):
            request = self._http.build_request("GET", step.path, headers=step.headers,
                                               timeout=step.timeout)
            response = stream.response = self._http.send(request, stream=True)
            if response.is_error:
                response.read()
            return response
        if isinstance(step, NextFrame):
            return stream.next_frame()
        time.sleep(step.seconds)
        return None


class AsyncDriver:
    """Runs calls with an async HTTPX client."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    async def run(self, op: Op[T]) -> T:
        """Run a call to its result."""
        [result] = [item async for item in self.drive(returning(op))]
        return result

    async def drive(self, feed: Feed[T]) -> AsyncGenerator[T, None]:
        """Run a call, giving its items one by one.

        One async generator that closes its stream itself: a nested one (such as
        ``aiter_sse``, left open) would be left to the garbage collector when the
        reader stops early, and Trio warns about that.
        """
        stream = _AsyncStream()
        reply: Any = None
        error: Exception | None = None
        try:
            while True:
                try:
                    step = feed.send(reply) if error is None else feed.throw(error)
                except StopIteration:
                    return
                reply, error = None, None
                if isinstance(step, Give):
                    yield step.item
                    continue
                try:
                    reply = await self._perform(step, stream)
                except httpx.TransportError as exc:  # httpx_sse.SSEError is one
                    error = exc
        finally:
            feed.close()
            await stream.aclose()

    async def _perform(self, step: Step, stream: _AsyncStream) -> Any:
        if not isinstance(step, NextFrame):
            await stream.aclose()
        if isinstance(step, Send):
            return await self._http.request(step.method, step.path, headers=step.headers,
                                            params=step.params, json=step.json,
                                            files=step.files, data=step.data)
        if isinstance(step, Connect):
            request = self._http.build_request("GET", step.path, headers=step.headers,
                                               timeout=step.timeout)
            response = stream.response = await self._http.send(request, stream=True)
            if response.is_error:
                await response.aread()
            return response
        if isinstance(step, NextFrame):
            return await stream.next_frame()
        await anyio.sleep(step.seconds)
        return None


class _SyncStream:
    # A call's open event stream, if any.
    def __init__(self) -> None:
        self.response: httpx.Response | None = None
        self._frames: Iterator[ServerSentEvent] | None = None

    def next_frame(self) -> ServerSentEvent | None:
        if self.response is None:
            return None
        if self._frames is None:
            self._frames = EventSource(self.response).iter_sse()
        return next(self._frames, None)

    def close(self) -> None:
        if self.response is not None:
            self.response.close()
        self.response = self._frames = None


class _AsyncStream:
    # A call's open event stream, if any.
    def __init__(self) -> None:
        self.response: httpx.Response | None = None
        self._frames: AsyncGenerator[ServerSentEvent, None] | None = None

    async def next_frame(self) -> ServerSentEvent | None:
        if self.response is None:
            return None
        if self._frames is None:
            self._frames = EventSource(self.response).aiter_sse()
        return await anext(self._frames, None)

    async def aclose(self) -> None:
        if self._frames is not None:
            await self._frames.aclose()
        if self.response is not None:
            await self.response.aclose()
        self.response = self._frames = None
