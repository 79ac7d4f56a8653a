"""How a supervisor runs its children: the restart engine behind `Supervisor`.

Each child incarnation runs as a task in the supervisor's nursery and never lets an actor's
exception out; instead it reports its end on a channel read by one task, `_supervise`, which
decides, one report at a time, what to restart. Doing every decision in one task keeps the
strategies simple to state: there is never a restart racing another. Only
`SupervisorEscalation` (and cancellation) ever leaves the nursery.

A child with a restart intensity of its own (``start_child(..., intensity=...)``) is counted
in its own window only; when it exceeds it, the engine gives it up (`Supervision._give_up`)
and goes on: one child's crash loop is that child's business, as with Akka's per-child
``OneForOneStrategy(maxNrOfRetries, withinTimeRange)``. The supervisor's own intensity (OTP's)
then only counts the children without one.

Children that the engine stops on purpose (siblings in a group restart, a relocation,
`stop_child`) are detached first (``child.incarnation = None``), so that the report of their end
is recognised as stale and ignored.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
import trio

from ._actor import Actor
from ._checkpoint import CheckpointStore
from ._child import Child, SupervisorIncarnation
from ._dead_letters import DeadLetters
from ._exceptions import ActorStopped, SupervisorEscalation
from ._incarnation import Environment, Incarnation, IncarnationBase
from ._restart import (
    Backoff,
    Restart,
    RestartIntensity,
    Strategy,
    _RestartWindow,
    restarts,
)

__all__ = ["DEFAULT_SHUTDOWN_TIMEOUT", "Supervision"]

DEFAULT_SHUTDOWN_TIMEOUT = 5.0
"""Seconds a child gets to stop gracefully before it is cancelled (OTP's worker default)."""

_log = structlog.get_logger("actors")


class Supervision:
    """State and mechanics of one supervisor; `Supervisor` adds the public API on top."""

    def __init__(
        self,
        *,
        name: str,
        strategy: Strategy,
        intensity: RestartIntensity,
        backoff: Backoff,
        shutdown_timeout: float,
        checkpoints: CheckpointStore | None,
        dead_letters: DeadLetters | None,
    ) -> None:
        if not (shutdown_timeout >= 0):
            raise ValueError(f"shutdown_timeout must be >= 0, got {shutdown_timeout}")
        self._name = name
        self._strategy = strategy
        self._intensity = intensity
        self._backoff = backoff
        self._shutdown_timeout = shutdown_timeout
        self._checkpoints = checkpoints
        self._dead_letters = dead_letters if dead_letters is not None else DeadLetters()
        self._children: dict[str, Child] = {}
        self._window = _RestartWindow(intensity)
        self._due: list[float] = []  # heap of restart times, for the next wake-up
        self._pending: dict[str, Child] = {}  # children waiting for their restart time
        self._seq = itertools.count()
        self._nursery: trio.Nursery | None = None
        self._supervise_scope = trio.CancelScope()
        self._closing = True
        self._exits_send, self._exits_recv = trio.open_memory_channel[IncarnationBase](math.inf)
        self._env = Environment(
            supervisor=name,
            dead_letters=self._dead_letters,
            checkpoints=checkpoints,
            on_exit=self._exits_send.send_nowait,
        )
        self._started = self._restarted = self._crashed = 0
        self._relocated = self._escalations = self._given_up = 0

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        """Open the nursery, (re)start the registered children in order, supervise, shut down."""
        self._closing = False
        self._window.clear()
        self._due.clear()
        self._pending.clear()
        self._supervise_scope = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                for child in list(self._children.values()):  # a nested supervisor's restart
                    child.attempts = 0
                    if child.window is not None:
                        child.window.clear()
                    await self._start_incarnation(child, why="restart")
                nursery.start_soon(self._supervise)
                yield
            finally:
                with trio.CancelScope(shield=True):
                    await self._shutdown()
                nursery.cancel_scope.cancel()

    async def _start_new(self, child: Child) -> None:
        if self._closing or self._nursery is None:
            raise ActorStopped(f"supervisor {self._name!r} is not running")
        if child.name in self._children:
            raise ValueError(f"supervisor {self._name!r} already has a child named {child.name!r}")
        child.seq = next(self._seq)
        self._children[child.name] = child
        try:
            failure = await self._start_incarnation(child, why="start")
        except BaseException:
            self._forget(child)
            raise
        if failure is not None:
            self._forget(child)
            raise failure

    def _forget(self, child: Child) -> None:
        if self._children.get(child.name) is child:
            del self._children[child.name]
        if self._pending.get(child.name) is child:
            del self._pending[child.name]

    async def _start_incarnation(self, child: Child, *, why: str) -> BaseException | None:
        """Start the next incarnation of ``child``; return the exception if it failed to start.

        ``why`` is "start" (`start_child`), "restart" or "relocate". Unless it is "start", a
        failure is also queued as the end of the incarnation, so that `_supervise` handles it
        like any crash.
        """
        if child.incarnation is not None or self._nursery is None:
            return None
        child.number += 1
        env, number = self._env, child.number
        incarnation: IncarnationBase
        if child.supervisor is not None:
            incarnation = SupervisorIncarnation(child.supervisor, env, number=number)
            run = incarnation.run
        else:
            if child.factory is None:  # pragma: no cover - every actor child has one
                raise RuntimeError("actor child without a factory")
            try:
                actor = child.factory(*child.args)
                if not isinstance(actor, Actor):
                    raise TypeError(f"factory for {child.name!r} returned {actor!r}, not an Actor")
            except Exception as exc:
                if why == "start":
                    raise
                failed = IncarnationBase(
                    env, name=child.name, number=number, throughput=1, placement=child.placement
                )
                failed.cause = exc
                failed.stopped.set()
                child.incarnation = failed
                self._exits_send.send_nowait(failed)
                return exc
            actor_incarnation = Incarnation(
                actor,
                env,
                name=child.name,
                number=number,
                throughput=child.throughput,
                placement=child.placement,
                mailbox_size=child.mailbox_size,
            )
            incarnation, run = actor_incarnation, actor_incarnation.run
        child.incarnation = incarnation
        if why == "restart":
            self._restarted += 1
        failure: BaseException | None = await self._nursery.start(run)
        if failure is not None:
            if why != "start":
                self._exits_send.send_nowait(incarnation)
            return failure
        self._started += 1
        if why == "restart":
            _log.info(
                "actor.restarted", actor=child.name, incarnation=child.number, supervisor=self._name
            )
        return None

    async def _supervise(self) -> None:
        """Handle ends of incarnations and due restarts, one at a time, until shutdown."""
        with self._supervise_scope:
            while True:
                ended: IncarnationBase | None = None
                with trio.move_on_at(self._due[0] if self._due else math.inf):
                    ended = await self._exits_recv.receive()
                if ended is not None:
                    await self._on_exit(ended)
                else:
                    await self._restart_due()

    async def _on_exit(self, ended: IncarnationBase) -> None:
        child = self._children.get(ended.name)
        if child is None or child.incarnation is not ended:
            return  # stopped on purpose (sibling restart, relocation, stop_child): not news
        child.incarnation = None
        crashed = ended.cause is not None
        if crashed:
            self._crashed += 1
        if not restarts(child.restart, crashed=crashed):
            self._forget(child)
            return
        now = trio.current_time()
        if child.window is not None:
            if not child.window.admit(now):
                self._give_up(child, ended.cause)
                return
        elif not self._window.admit(now):
            await self._escalate(ended.cause)
        backoff = child.backoff or self._backoff
        if ended.started_at and now - ended.started_at >= backoff.reset_after:
            child.attempts = 0
        delay = backoff.delay(child.attempts)
        child.attempts += 1
        group = self._group(child)
        for other in reversed(group):
            incarnation, other.incarnation = other.incarnation, None
            if incarnation is not None:
                # Cancelled, not asked: its state is about to be thrown away, and a graceful
                # stop would hold the whole group's restart hostage to one slow handler.
                incarnation.cancel()
                await incarnation.stopped.wait()
            if other is not child and other.restart is Restart.TEMPORARY:
                self._forget(other)
        due = now + delay
        for other in group:
            if self._children.get(other.name) is other:
                other.restart_due = due
                self._pending[other.name] = other
        heapq.heappush(self._due, due)
        await self._restart_due()

    def _group(self, child: Child) -> list[Child]:
        """The children that restart with ``child`` under the strategy, in start order."""
        if self._strategy is Strategy.ONE_FOR_ONE:
            return [child]
        everyone = list(self._children.values())
        if self._strategy is Strategy.ONE_FOR_ALL:
            return everyone
        return everyone[everyone.index(child) :]

    async def _restart_due(self) -> None:
        now = trio.current_time()
        while self._due and self._due[0] <= now:
            heapq.heappop(self._due)
        due = [
            child
            for child in self._pending.values()
            if child.restart_due is not None and child.restart_due <= now
        ]
        due.sort(key=lambda child: child.seq)  # restart in start order
        for child in due:
            del self._pending[child.name]
            if self._children.get(child.name) is not child or child.restart_due is None:
                continue
            child.restart_due = None
            await self._start_incarnation(child, why="restart")

    def _give_up(self, child: Child, cause: BaseException | None) -> None:
        """Forget ``child``, which exceeded its own intensity, and run its ``on_give_up``.

        The handler runs as a task of the supervisor's nursery, so that a slow one holds up no
        other child's restart; an exception out of it is the supervisor's own fault and ends
        the supervisor like any error in its nursery.
        """
        self._forget(child)
        self._given_up += 1
        intensity = child.intensity
        _log.error(
            "actor.given_up",
            actor=child.name,
            supervisor=self._name,
            incarnations=child.number,
            max_restarts=intensity.max_restarts if intensity else None,
            within=intensity.within if intensity else None,
            error=repr(cause),
        )
        if child.on_give_up is not None and self._nursery is not None:
            self._nursery.start_soon(child.on_give_up, child.name, cause)

    async def _escalate(self, cause: BaseException | None) -> None:
        self._escalations += 1
        self._closing = True
        intensity = self._intensity
        _log.error(
            "supervisor.escalated",
            supervisor=self._name,
            max_restarts=intensity.max_restarts,
            within=intensity.within,
            error=repr(cause),
        )
        await self._stop_all()
        raise SupervisorEscalation(
            f"supervisor {self._name!r} gave up: more than {intensity.max_restarts} restarts"
            f" within {intensity.within} s"
        ) from cause

    async def _shutdown(self) -> None:
        self._closing = True
        self._supervise_scope.cancel()
        await self._stop_all()

    async def _stop_all(self) -> None:
        """Stop every child gracefully, in reverse start order; keep the specs for a restart."""
        self._due.clear()
        self._pending.clear()
        for child in reversed(list(self._children.values())):
            child.restart_due = None
            incarnation, child.incarnation = child.incarnation, None
            if incarnation is not None:
                await self._stop_gracefully(incarnation)
            if child.restart is Restart.TEMPORARY:
                self._forget(child)

    async def _stop_gracefully(self, incarnation: IncarnationBase) -> None:
        """Ask ``incarnation`` to stop; cancel it if it has not within the shutdown timeout."""
        incarnation.request_stop()
        timeout = (
            math.inf if isinstance(incarnation, SupervisorIncarnation) else self._shutdown_timeout
        )
        with trio.move_on_after(timeout):
            await incarnation.stopped.wait()
            return
        incarnation.cancel()
        await incarnation.stopped.wait()
