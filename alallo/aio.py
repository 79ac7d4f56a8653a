"""alallo in an asyncio app (FastAPI, aiohttp, ...): the Trio runtime as a guest of the host's
event loop.

::

    import alallo.aio

    async with alallo.aio.open_runtime(alallo.Settings(data_dir=path)) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "train.jsonl", data)
        job = await rt.create_job(account, {"model": "alallo/tiny-gpt2",
                                            "training_file": file.id})
        async for item in rt.stream(account, job.id):
            print(item.kind, item.seq, item.data)

:class:`alallo.Runtime` is Trio code. Here it runs in Trio's guest mode
(``trio.lowlevel.start_guest_run``, the Trio docs' "Using guest mode to run Trio on top
of other event loops"): Trio's scheduler runs its steps as callbacks of the host's
asyncio loop, on the same thread, while Trio waits for I/O in a helper thread. The
runtime's tasks and the app's take turns on one thread, so nothing needs a lock, and the
trainers it starts are children of the app's process.

:class:`AioRuntime` has the methods of :class:`alallo.Runtime`, each a coroutine the host
awaits (the runtime's own plain methods too), and its streams (``stream``,
``stream_batches``, ``stream_jobs``) as async iterators that take one item at a time from
the runtime as the host asks for it. Cancelling the awaiting task (a request whose client
went away) cancels the call in the runtime.

Logging: unless the app configured structlog itself, the runtime's log records go to
the standard library's ``logging`` (loggers ``alallo.*``), to whatever handlers the app
set; the runtime prints nothing to the app's stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import structlog
import trio

from .runtime import Runtime
from .settings import Settings

__all__ = ["AioRuntime", "open_runtime"]

STREAMS = frozenset({"stream", "stream_batches", "stream_jobs"})
"""The runtime's methods that return async iterators."""


class AioRuntime:
    """An open :class:`alallo.Runtime` seen from asyncio (from :func:`open_runtime`).

    Every method of the runtime is here as a coroutine function with the same
    arguments, result and exceptions (``await rt.create_job(account, spec)``); the
    streams are async iterators (``async for item in rt.stream(account, job_id)``);
    attributes read through (``rt.api_key``, ``rt.settings``). Use it only on the loop
    that opened it, while the ``async with`` block is open.
    """

    def __init__(self, runtime: Runtime, token: trio.lowlevel.TrioToken,
                 spawn: Callable[[Callable[[], Awaitable[None]]], None]) -> None:
        self._runtime = runtime
        self._token = token
        self._spawn = spawn

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._runtime, name)
        if name.startswith("_") or not callable(value):
            return value
        if name in STREAMS:
            return functools.partial(self._iterate, value)
        return functools.partial(self._call, value)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {n for n in dir(self._runtime)
                                                if not n.startswith("_")})

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` (awaited if a coroutine) as a Trio task; its result
        or exception here. Cancelled here: cancelled there."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        scope = trio.CancelScope()

        async def run() -> None:
            with scope:
                try:
                    result = fn(*args, **kwargs)
                    if inspect.isawaitable(result):
                        result = await result
                except trio.Cancelled:  # by the host (its future is cancelled), or closing
                    _settle(future, None, RuntimeError("the alallo runtime is closing"))
                    raise
                except BaseException as exc:  # handed over whole; the host raises it
                    _settle(future, None, exc)
                    if not isinstance(exc, Exception):
                        raise
                else:
                    _settle(future, result, None)

        self._spawn(run)
        try:
            return await future
        except asyncio.CancelledError:
            self._tell(scope.cancel)
            raise

    async def _iterate(self, fn: Callable[..., AsyncIterator[Any]], *args: Any,
                       **kwargs: Any) -> AsyncIterator[Any]:
        """``async for`` over ``fn(*args, **kwargs)``: one Trio task drives it and hands each
        item over when the host asks for the next; leaving the loop early stops it."""
        send, receive = trio.open_memory_channel[Any](0)
        scope = trio.CancelScope()

        async def drive() -> None:
            with scope:
                async with send:
                    try:
                        async for item in fn(*args, **kwargs):
                            await send.send(item)
                    except Exception as exc:  # to the host, after the items before it
                        await send.send(_Failed(exc))

        self._spawn(drive)
        try:
            while True:
                try:
                    item = await self._call(receive.receive)
                except trio.EndOfChannel:
                    return
                if isinstance(item, _Failed):
                    raise item.exc
                yield item
        finally:
            self._tell(scope.cancel)

    def _tell(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` in Trio soon; nothing once the runtime has ended."""
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(fn)


@asynccontextmanager
async def open_runtime(settings: Settings | None = None) -> AsyncIterator[AioRuntime]:
    """Open an :class:`alallo.Runtime` on the running asyncio loop, as a Trio guest.

    Leaving the block closes the runtime (its job actors and trainers stop; running
    jobs continue from their checkpoints when a runtime opens on the same data again)
    and ends the guest run.

    Raises:
        SettingError: a setting that cannot work here (as :class:`alallo.Runtime`).
        RuntimeError: called with no running asyncio loop.
    """
    route_logs_to_logging()
    loop = asyncio.get_running_loop()
    opened: asyncio.Future[AioRuntime] = loop.create_future()
    ended: asyncio.Future[None] = loop.create_future()
    requests, incoming = trio.open_memory_channel[Callable[[], Awaitable[None]]](float("inf"))

    async def guest_main() -> None:
        async with Runtime(settings) as runtime, trio.open_nursery() as nursery:
            token = trio.lowlevel.current_trio_token()

            def spawn(request: Callable[[], Awaitable[None]]) -> None:
                token.run_sync_soon(lambda: requests.send_nowait(request))

            _settle(opened, AioRuntime(runtime, token, spawn), None)
            async for request in incoming:
                nursery.start_soon(request)
            nursery.cancel_scope.cancel()

    def done(outcome: Any) -> None:
        error = getattr(outcome, "error", None)
        if not opened.done():  # the runtime failed to open: say why
            _settle(opened, None, error or RuntimeError("the alallo runtime did not open"))
        _settle(ended, None, error)

    trio.lowlevel.start_guest_run(
        guest_main, run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        run_sync_soon_not_threadsafe=loop.call_soon, done_callback=done,
        host_uses_signal_set_wakeup_fd=True)
    runtime = await opened
    try:
        yield runtime
    finally:
        runtime._tell(requests.close)
        await asyncio.shield(ended)


def route_logs_to_logging() -> None:
    """Send structlog's records to the standard library's ``logging`` (loggers named as
    alallo names them, ``alallo.job`` ...), unless the app configured structlog itself."""
    if structlog.is_configured():
        return
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars,
                    structlog.processors.add_log_level,
                    structlog.processors.format_exc_info,
                    structlog.processors.KeyValueRenderer(key_order=["event"])],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        cache_logger_on_first_use=True)


class _Failed:
    """An exception the iterated stream raised, carried to the host in order."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    # Runs inside a Trio step, which guest mode runs as a callback of the host's loop,
    # on its thread: the future may be settled directly.
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)
