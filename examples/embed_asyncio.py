"""Embed alallo in an asyncio program: Trio runs as a guest inside asyncio's event loop.

    python examples/embed_asyncio.py [--data-dir DIR] [--steps N]

``alallo.Runtime`` is Trio code. An asyncio app runs it with Trio's guest
mode (``trio.lowlevel.start_guest_run``): Trio's scheduler runs its steps as
callbacks of asyncio's loop, on the same thread, while its I/O waits happen
in a helper thread. So the runtime's tasks and the app's tasks take turns on
one thread, the trainers it starts are children of that thread, and nothing
needs a lock. :class:`TrioRuntime` below is the bridge: the asyncio side
awaits a runtime call with :meth:`TrioRuntime.call`, or iterates a runtime
stream with :meth:`TrioRuntime.iterate`; each runs as a Trio task.

Other ways, and why not here: ``trio.run`` in a second thread works too
(``trio.from_thread.run`` to call in), at the cost of two threads touching
the app's objects; and an app that can run a server talks to it with
``alallo.AsyncClient``, which runs under asyncio as it is.
"""

from __future__ import annotations

import argparse
import sys
import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog
import trio

import alallo

SAMPLE = Path(__file__).with_name("sample.jsonl")
_END = object()


class TrioRuntime:
    """An ``alallo.Runtime`` opened in Trio guest mode, for asyncio code.

    ``async with TrioRuntime(settings) as bridge``: ``bridge.runtime`` is the
    open runtime; call its coroutine methods through :meth:`call` and its
    async iterators through :meth:`iterate`, never directly (they must run
    in Trio). Leaving the block closes the runtime and ends the guest run.
    """

    def __init__(self, settings: alallo.Settings) -> None:
        self._settings = settings
        self.runtime: alallo.Runtime | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._requests, self._incoming = trio.open_memory_channel[Callable[[], Awaitable[None]]](
            100)

    async def __aenter__(self) -> TrioRuntime:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._done: asyncio.Future[Any] = loop.create_future()

        async def trio_main() -> None:
            async with alallo.Runtime(self._settings) as runtime, trio.open_nursery() as nursery:
                self.runtime = runtime
                self._token = trio.lowlevel.current_trio_token()
                loop.call_soon_threadsafe(ready.set_result, None)
                async for request in self._incoming:
                    nursery.start_soon(request)
                nursery.cancel_scope.cancel()

        def done(outcome: Any) -> None:
            if not ready.done():  # the runtime failed to open: say why
                ready.set_exception(_unwrap(outcome))
            self._done.set_result(outcome)

        trio.lowlevel.start_guest_run(
            trio_main, run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=done, host_uses_signal_set_wakeup_fd=True)
        await ready
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        assert self._token is not None
        self._token.run_sync_soon(self._requests.close)
        _unwrap(await self._done, raise_=True)

    async def call(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """``await fn(*args)`` in Trio; its result, or its exception, in asyncio."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        async def run() -> None:
            try:
                result = await fn(*args)
            except Exception as exc:  # handed to the asyncio side, which raises it
                loop.call_soon_threadsafe(_settle, future, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, future, result, None)

        self._submit(run)
        return await future

    async def iterate(self, fn: Callable[..., AsyncIterator[Any]], *args: Any,
                      ) -> AsyncIterator[Any]:
        """``async for`` over ``fn(*args)`` run in Trio; stopping early cancels it there."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        scope = trio.CancelScope()

        async def run() -> None:
            with scope:
                try:
                    async for item in fn(*args):
                        loop.call_soon_threadsafe(queue.put_nowait, item)
                except Exception as exc:  # handed to the asyncio side, which raises it
                    loop.call_soon_threadsafe(queue.put_nowait, _Failed(exc))
                    return
            loop.call_soon_threadsafe(queue.put_nowait, _END)

        self._submit(run)
        try:
            while (item := await queue.get()) is not _END:
                if isinstance(item, _Failed):
                    raise item.exc
                yield item
        finally:
            if self._token is not None:
                self._token.run_sync_soon(scope.cancel)

    def _submit(self, run: Callable[[], Awaitable[None]]) -> None:
        if self._token is None:
            raise RuntimeError("use `async with TrioRuntime(...)` first")
        self._token.run_sync_soon(self._requests.send_nowait, run)


class _Failed:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc


def _settle(future: asyncio.Future[Any], result: Any, exc: Exception | None) -> None:
    if future.cancelled():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


def _unwrap(outcome: Any, *, raise_: bool = False) -> Any:
    # ``outcome`` is an outcome.Value or outcome.Error (trio's own result type).
    error = getattr(outcome, "error", None)
    if raise_ and error is not None:
        raise error
    return error


async def main(data_dir: Path, steps: int) -> None:
    async with TrioRuntime(alallo.Settings(data_dir=data_dir)) as bridge:
        rt = bridge.runtime
        assert rt is not None
        account = await bridge.call(rt.authenticate, rt.api_key)
        file = await bridge.call(rt.upload_file, account, SAMPLE.name, SAMPLE.read_bytes())
        job = await bridge.call(rt.create_job, account, {
            "model": "alallo/tiny-gpt2", "training_file": file.id, "name": "from asyncio",
            "hyperparameters": {"max_steps": steps},
            "trainer": {"type": "simulated", "step_delay_s": 0.01}})
        print(f"created {job.id}: {job.status.value} ({job.message})")
        ticks = 0

        async def heartbeat() -> None:  # the asyncio app keeps running meanwhile
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        beating = asyncio.create_task(heartbeat())
        async for item in bridge.iterate(rt.stream, account, job.id):
            if item.kind == "job":
                print(f"[{item.seq}] job {item.data['status']} "
                      f"step {item.data['progress']['step']}/{item.data['progress']['max_steps']}")
            elif item.kind == "event":
                print(f"[{item.seq}] event {item.data['type']}: {item.data['message']}")
        beating.cancel()
        final = await bridge.call(rt.get_job, account, job.id)
        print(f"finished {final.status.value}: {final.fine_tuned_model} "
              f"(asyncio ran {ticks} heartbeats meanwhile)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path(".alallo-embedded"))
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    # alallo logs with structlog: to stderr here, so that stdout tells the job's story.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    asyncio.run(main(args.data_dir, args.steps))
