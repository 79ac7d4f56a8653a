"""`Starter`: the one way a job's actor is started, at most once per job.

Three paths start job actors: recovery when the runtime opens (the live jobs whose leases it
takes back), adoption (the jobs of a process that stopped), and a job's creation. They may ask
for the same job: a job recovered at start can be adopted again at the first scan when this
process's heartbeat came late, while its actor still waits in the start queue or for a
restart. Starting it twice was refused by the supervisor with an error (the child's name is
taken), and once raised while the runtime was still opening it left Trio's nurseries open: a
``TrioInternalError`` (issue 14). Here a second request for a job that is queued, starting,
running, waiting for a restart or being failed is a no-op.

Queued starts run in the background one after the other, oldest first, so that queued jobs ask
the scheduler for capacity in their order and jobs created meanwhile join the end, behind them
(the runtime serves meanwhile: ``docs/operations.md``, "Recovery").

A job whose actor cannot start, or whose actor its supervisor gave up after too many crashes,
is failed through its lifecycle by ``fail`` (`alallo.runtime._actor_failure.fail_job`); no start is
accepted for it until that is done.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import structlog
import trio

from actors import ActorStopped, Backoff, RestartIntensity

from .._errors import AlalloError
from ..jobs import Job

__all__ = ["JOB_ACTOR_BACKOFF", "JOB_ACTOR_INTENSITY", "JOB_RESTART_INTENSITY", "Starter"]

JOB_RESTART_INTENSITY = RestartIntensity(max_restarts=50, within=60.0)
"""Restarts the supervisor of job actors allows its children without an intensity of their own
(the scheduler) before it gives up; each job's actor has its own (:data:`JOB_ACTOR_INTENSITY`)."""
JOB_ACTOR_INTENSITY = RestartIntensity(max_restarts=5, within=60.0)
"""Restarts one job's actor gets: a 6th crash within a minute gives it up, and the job fails."""
JOB_ACTOR_BACKOFF = Backoff(initial=0.1, factor=2.0, cap=1.6)
"""Delays before a job actor's restarts: 0.1, 0.2, 0.4, 0.8, 1.6 s (less up to 10 % jitter),
so that a crash loop gives up after about 3 s instead of 51 restarts in 40 ms."""

StartActor = Callable[[Job, "str | None"], Awaitable[None]]
"""Starts the actor of a job, with the cause of a restart (None: a first start or a recovery)."""
FailJob = Callable[[str, str], Awaitable[None]]
"""Fails a job whose actor is gone for good: ``fail(job_id, reason)``; never raises."""

log = structlog.get_logger("alallo.runtime")


class Starter:
    """Starts job actors, in the background or at once, never twice for one job.

    Args:
        start: Starts the actor of a job (`StartActor`); its errors fail the job.
        exists: Whether the supervisor has a child for the job now (running, starting or
            waiting for a restart): ``job_id in supervisor``.
        fail: Fails a job whose actor cannot start or was given up (`FailJob`).

    Use ``async with starter.open():`` for the lifetime of the runtime; leaving it stops the
    starts still queued (their jobs start again at the next recovery).
    """

    def __init__(self, start: StartActor, *, exists: Callable[[str], bool],
                 fail: FailJob) -> None:
        self._start = start
        self._exists = exists
        self._fail = fail
        self._queue: deque[tuple[Job, str | None]] = deque()
        self._busy: dict[str, trio.Event] = {}
        """Jobs queued, starting or being failed here: set when that is over."""
        self._nursery: trio.Nursery | None = None
        self._draining = False

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Starter]:
        """Run the background starts until the block ends (then they are cancelled)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                yield self
            finally:
                self._nursery = None
                nursery.cancel_scope.cancel()

    @property
    def recovering(self) -> bool:
        """True while queued starts are still being made in the background."""
        return self._draining

    def idle(self, job_id: str) -> bool:
        """Whether a start of the job would be accepted now: no actor, and none on its way."""
        return job_id not in self._busy and not self._exists(job_id)

    def request(self, job: Job, cause: str | None = None) -> bool:
        """Queue a start of the job's actor, behind those queued already.

        Returns:
            False, doing nothing, if the job is queued, starting, running, waiting for a
            restart or being failed; True if it was queued.

        Raises:
            RuntimeError: the starter is not open.
        """
        if self._nursery is None:
            raise RuntimeError("the starter is not open: use 'async with starter.open()'")
        if not self.idle(job.id):
            return False
        self._busy[job.id] = trio.Event()
        self._queue.append((job, cause))
        if not self._draining:
            self._draining = True
            self._nursery.start_soon(self._drain)
        return True

    async def start(self, job: Job, cause: str | None = None) -> bool:
        """Start the job's actor now, or queue it while queued starts are being made (so that
        it does not overtake them).

        Returns:
            As `request`: False if that did nothing.

        Raises:
            ActorStopped: the runtime is closing.
        """
        if self._draining:
            return self.request(job, cause)
        if not self.idle(job.id):
            return False
        done = self._busy[job.id] = trio.Event()
        try:
            await self._start_or_fail(job, cause)
        finally:
            del self._busy[job.id]
            done.set()
        return True

    async def wait_started(self, job_id: str) -> None:
        """Wait until the job's actor has started (or failed to), if it is on its way."""
        event = self._busy.get(job_id)
        if event is not None:
            await event.wait()

    async def given_up(self, job_id: str, crash: BaseException | None) -> None:
        """Fail a job whose actor its supervisor gave up (the supervisor's ``on_give_up``)."""
        limit = JOB_ACTOR_INTENSITY
        reason = (f"its actor failed {limit.max_restarts + 1} times within {limit.within:g} s; "
                  f"the last time: {_describe(crash)}")
        done = self._busy.setdefault(job_id, trio.Event())
        try:
            await self._fail(job_id, reason)
        finally:
            if self._busy.get(job_id) is done:
                del self._busy[job_id]
            done.set()

    async def _drain(self) -> None:
        started = time.monotonic()
        count = 0
        try:
            while self._queue:
                job, cause = self._queue.popleft()
                done = self._busy[job.id]
                try:
                    if not self._exists(job.id):
                        await self._start_or_fail(job, cause)
                        count += 1
                except ActorStopped:
                    return  # the runtime is closing
                finally:
                    del self._busy[job.id]
                    done.set()
        finally:
            self._draining = False
            while self._queue:  # left by a close: nobody waits for them in vain
                job, _ = self._queue.popleft()
                self._busy.pop(job.id, trio.Event()).set()
        log.info("runtime.actors_started", jobs=count,
                 seconds=round(time.monotonic() - started, 3))

    async def _start_or_fail(self, job: Job, cause: str | None) -> None:
        try:
            await self._start(job, cause)
        except ActorStopped:
            raise
        except Exception as exc:  # the actor could not start: the job fails, the operator is told
            log.exception("job.start_failed", job_id=job.id)
            await self._fail(job.id, f"its actor could not start: {_describe(exc)}")


def _describe(crash: BaseException | None) -> str:
    if crash is None:
        return "it stopped"
    text = crash.message if isinstance(crash, AlalloError) else str(crash)  # no HTTP status
    return f"{type(crash).__name__}: {text}"
