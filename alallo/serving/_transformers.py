"""The transformers engine: one worker process per loaded model, requests queued per model
(issue 17), for the models vLLM cannot serve or where vLLM is not installed (issue 33).

:class:`InferenceWorkers` starts ``python -m alallo.trainers.generate`` for a model the
first time a completion asks for it (with a scrubbed environment, in ``data_dir/inference``,
in its own session), keeps it loaded while it is asked for, and lets go of it after
``inference_idle_s`` unused, or when ``inference_max_models`` are loaded and another one is
needed (the one used longest ago goes). torch never runs in the server's event loop.

One request runs in a model at a time (``transformers``' ``generate`` is one sequence at a
time); the others wait their turn on the model's lock, which Trio makes FIFO. A request whose
caller goes away (a closed stream) is cancelled in the worker at once, and the model serves
the next one; a worker that does not answer the cancel, or dies, is let go of and started
anew for the next request.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import structlog
import trio
from anyio.streams.buffered import BufferedByteReceiveStream

from .._errors import InvalidRequest, Unavailable
from ..executors import scrubbed_environment
from ..settings import Settings
from ._idle import let_go_when_idle
from ._meter import TokenMeter
from ._models import ModelFiles

__all__ = ["CANCEL_GRACE_S", "InferenceWorkers"]

log = structlog.get_logger("alallo.serving.transformers")

CANCEL_GRACE_S = 10.0
"""How long a worker has to answer a cancelled request before it is let go of (s)."""
_MAX_LINE = 1 << 20


@dataclass(eq=False)
class _Worker:
    files: ModelFiles
    ready: trio.Event = field(default_factory=trio.Event)
    lock: trio.Lock = field(default_factory=trio.Lock)
    users: int = 0
    """Requests waiting for it or running in it: a worker with users is never let go of
    to make room (one still loading has no lock held, but has them)."""
    failure: str | None = None
    last_used: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    process: anyio.abc.Process | None = None
    lines: BufferedByteReceiveStream | None = None

    async def send(self, message: dict[str, Any]) -> None:
        """Write one line to the worker. Raises Unavailable when it has stopped."""
        assert self.process is not None and self.process.stdin is not None
        try:
            await self.process.stdin.send((json.dumps(message) + "\n").encode())
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise Unavailable("the model's worker stopped; ask again") from exc

    async def receive(self) -> dict[str, Any]:
        """The worker's next line. Raises Unavailable when it has stopped."""
        assert self.lines is not None
        try:
            line = await self.lines.receive_until(b"\n", _MAX_LINE)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound,
                anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise Unavailable("the model's worker stopped; ask again") from exc
        message: dict[str, Any] = json.loads(line)
        return message

    def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()


class InferenceWorkers:
    """The loaded models, a worker process each.

    Args:
        settings: ``python``, ``trainer_env``, ``data_dir``, ``inference_max_models``,
            ``inference_idle_s``.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._workers: dict[ModelFiles, _Worker] = {}
        self._nursery: trio.Nursery | None = None
        self.requests = 0
        """Requests under way (waiting for their model's turn, or generating)."""
        self._asked: dict[ModelFiles, int] = {}
        """Requests under way by model, counted from the moment they are submitted."""
        self.tokens = TokenMeter()
        """Completion tokens generated (for ``/metrics``)."""

    @property
    def loaded(self) -> list[ModelFiles]:
        """The models loaded (or loading) now, the one used longest ago first."""
        return [w.files for w in sorted(self._workers.values(), key=lambda w: w.last_used)]

    def free(self, files: ModelFiles) -> bool:
        """Whether a request for ``files`` would start at once: its worker is loaded and
        no request holds or waits for it, or none is loaded and room is left for it."""
        if self._asked.get(files):
            return False
        worker = self._workers.get(files)
        if worker is None:
            return len(self._workers) < self._settings.inference_max_models
        return worker.ready.is_set() and worker.failure is None

    @asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        """Serve while inside; every worker is stopped on the way out."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(let_go_when_idle, self._workers.values,
                               lambda worker: bool(worker.users), self._let_go,
                               self._settings.inference_idle_s, "transformers")
            try:
                yield
            finally:
                self._nursery = None
                for worker in list(self._workers.values()):
                    worker.kill()
                self._workers.clear()
                nursery.cancel_scope.cancel()

    def submit(self, files: ModelFiles, request: dict[str, Any],
               ) -> trio.MemoryReceiveChannel[dict[str, Any] | Exception]:
        """Queue one request (:mod:`alallo.trainers.generate`'s form) on the model ``files``.

        Returns:
            A channel of its answers, ``{"text"}`` pieces then one ``{"done"}``, or an
            exception as the last item: :class:`InvalidRequest` when the worker refused the
            request (``param`` names the field), :class:`Unavailable` when the model could
            not be loaded or its worker stopped. Closing the channel early cancels the
            request in the worker. The request runs in a task of its own, so the channel
            may be read from any task (a streaming response's).

        Raises:
            Unavailable: the server is stopping.
        """
        if self._nursery is None:
            raise Unavailable("the server is stopping")
        send, receive = trio.open_memory_channel[dict[str, Any] | Exception](16)
        self.requests += 1
        self._asked[files] = self._asked.get(files, 0) + 1
        self._nursery.start_soon(self._serve, files, request, send)
        return receive

    async def _serve(self, files: ModelFiles, request: dict[str, Any],
                     send: trio.MemorySendChannel[dict[str, Any] | Exception]) -> None:
        """Run ``request`` on its model's worker, in turn, forwarding each answer to ``send``;
        a caller gone part way (a closed channel) cancels it in the worker."""
        try:
            await self._serve_in_turn(files, request, send)
        finally:
            self.requests -= 1
            self._asked[files] -= 1
            if not self._asked[files]:
                del self._asked[files]

    async def _serve_in_turn(self, files: ModelFiles, request: dict[str, Any],
                             send: trio.MemorySendChannel[dict[str, Any] | Exception]) -> None:
        async with send:
            try:
                worker = await self._worker(files)
            except Unavailable as exc:
                with contextlib.suppress(trio.BrokenResourceError):
                    await send.send(exc)
                return
            try:
                async with worker.lock:
                    await self._in_worker(worker, request, send)
            finally:
                worker.users -= 1

    async def _in_worker(self, worker: _Worker, request: dict[str, Any],
                         send: trio.MemorySendChannel[dict[str, Any] | Exception]) -> None:
        """Run ``request`` in ``worker`` (its lock held), forwarding each answer."""
        worker.last_used = trio.current_time()
        finished = False
        try:
            await worker.send(request)
            while not finished:
                message = await worker.receive()
                if message.get("id") != request["id"]:
                    continue
                finished = "done" in message or "error" in message
                if "done" in message:
                    self.tokens.add(int(message["done"].get("completion_tokens", 0)))
                await send.send(message if "error" not in message else InvalidRequest(
                    message["error"], param=message.get("param")))
        except Unavailable as exc:  # the worker stopped
            finished = True
            self._let_go(worker)
            with contextlib.suppress(trio.BrokenResourceError):
                await send.send(exc)
        except trio.BrokenResourceError:
            pass  # the caller went away: cancelled below
        finally:
            if not finished:
                await self._cancel(worker, request["id"])
            worker.last_used = trio.current_time()

    async def _cancel(self, worker: _Worker, request_id: str) -> None:
        with trio.move_on_after(CANCEL_GRACE_S, shield=True):
            try:
                await worker.send({"cancel": request_id})
                while True:
                    message = await worker.receive()
                    if message.get("id") == request_id and ("done" in message
                                                            or "error" in message):
                        return
            except Unavailable:
                pass
        self._let_go(worker)  # no answer in time, or gone: the next request starts it anew

    async def _worker(self, files: ModelFiles) -> _Worker:
        worker = self._workers.get(files)
        if worker is None:
            if self._nursery is None:
                raise Unavailable("the server is stopping")
            self._make_room()
            worker = self._workers[files] = _Worker(files, last_used=trio.current_time())
            self._nursery.start_soon(self._run, worker)
        worker.users += 1  # the caller's: given back by _serve_in_turn
        try:
            await worker.ready.wait()
        except BaseException:
            worker.users -= 1
            raise
        if worker.failure is not None:
            worker.users -= 1
            raise Unavailable(f"the model could not be loaded: {worker.failure}")
        return worker

    def _make_room(self) -> None:
        idle = sorted((w for w in self._workers.values() if not w.users),
                      key=lambda w: w.last_used)
        excess = len(self._workers) - self._settings.inference_max_models + 1
        for worker in idle[:max(excess, 0)]:
            self._let_go(worker)

    def _let_go(self, worker: _Worker) -> None:
        if self._workers.get(worker.files) is worker:
            del self._workers[worker.files]
        worker.kill()

    async def _run(self, worker: _Worker) -> None:
        """Start the worker, wait for its ``ready``, and reap it when it ends."""
        settings = self._settings
        home = settings.data_dir / "inference"
        home.mkdir(parents=True, exist_ok=True)
        command = [settings.python, "-m", "alallo.trainers.generate",
                   "--model", str(worker.files.model)]
        if worker.files.adapter is not None:
            command += ["--adapter", str(worker.files.adapter)]
        if worker.files.tiny:
            command += ["--tiny", worker.files.tiny]
        with (home / "workers.log").open("ab") as stderr:
            try:
                process = await anyio.open_process(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                    cwd=home, env=scrubbed_environment(settings.trainer_env),
                    start_new_session=True)
            except OSError as exc:
                worker.failure = f"{type(exc).__name__}: {exc}"
                self._let_go(worker)
                worker.ready.set()
                return
        worker.process = process
        assert process.stdout is not None
        worker.lines = BufferedByteReceiveStream(process.stdout)
        async with process:  # on the way out: its pipes closed, and reaped (killed if need be)
            try:
                first = await worker.receive()
                if "ready" in first:
                    worker.info = first["ready"]
                    log.info("inference.loaded", model=str(worker.files.model),
                             adapter=str(worker.files.adapter or ""), **worker.info)
                else:
                    worker.failure = str(first.get("error", first))
            except (Unavailable, ValueError) as exc:
                worker.failure = str(exc)
            finally:
                if worker.failure is not None:
                    self._let_go(worker)
                worker.ready.set()
            await process.wait()
        self._let_go(worker)
