"""`Supervisor` and `open_supervisor`: start children, watch them, restart them by policy.

A supervisor owns a trio nursery. Each child incarnation runs as a task in it and never lets an
actor's exception out; instead it reports its end to the supervisor's own task
(`Supervisor._supervise`), which decides, one report at a time, what to restart. Doing every
decision in one task keeps the strategies simple to state: there is never a restart racing
another. Only `SupervisorEscalation` (and cancellation) ever leaves the nursery.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, TypeVarTuple

import structlog
import trio

from ._actor import Actor
from ._checkpoint import CheckpointStore
from ._child import Child, SupervisorIncarnation
from ._dead_letters import DeadLetters
from ._exceptions import ActorStopped, SupervisorEscalation
from ._incarnation import (
    DEFAULT_STOP_TIMEOUT,
    DEFAULT_THROUGHPUT,
    Incarnation,
    IncarnationBase,
    unwrap,
)
from ._mailbox import DEFAULT_MAILBOX_SIZE
from ._ref import ActorRef
from ._restart import (
    DEFAULT_BACKOFF,
    DEFAULT_INTENSITY,
    Backoff,
    Restart,
    RestartIntensity,
    Strategy,
    _RestartWindow,
)

__all__ = ["DEFAULT_SHUTDOWN_TIMEOUT", "Supervisor", "SupervisorStatistics", "open_supervisor"]

DEFAULT_SHUTDOWN_TIMEOUT = 5.0
"""Seconds a child gets to stop gracefully before it is cancelled (OTP's worker default)."""

MessageT = TypeVar("MessageT")
ArgsT = TypeVarTuple("ArgsT")

_log = structlog.get_logger("actors")


@dataclass(frozen=True, slots=True)
class SupervisorStatistics:
    """Counters of one supervisor since it was opened, as returned by `Supervisor.statistics`.

    They count incarnations of the supervisor's direct children; nested supervisors keep their
    own.
    """

    children: int
    """Children registered now, running or waiting to be restarted."""
    running: int
    """Children with a running incarnation now."""
    started: int
    """Incarnations started successfully, first starts and restarts alike."""
    restarted: int
    """Restarts attempted: incarnations begun by a restart, whether or not ``on_start`` then
    succeeded (first starts and `Supervisor.relocate` are not restarts)."""
    crashed: int
    """Incarnations that ended with an exception."""
    relocated: int
    """Completed `Supervisor.relocate` calls."""
    escalations: int
    """Times the restart intensity was exceeded."""
    dead_letters: int
    """Dead letters recorded in `Supervisor.dead_letters` (shared with nested supervisors)."""


class Supervisor:
    """Starts actors and nested supervisors, restarts them by policy, stops them in order.

    Get one from `open_supervisor` or `Supervisor.start_supervisor`; do not build one yourself.
    Children start in the order `start_child` is called, and stop in reverse order, each with a
    graceful stop (``shutdown_timeout`` seconds) and then cancellation. When a child's
    incarnation ends, its `Restart` type decides whether it comes back; the `Strategy` decides
    which siblings are stopped and restarted with it; the `Backoff` how long to wait; the
    `RestartIntensity` when to give up and raise `SupervisorEscalation`. `docs/actors.md` states
    the rules in full.
    """

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
        self._due: list[float] = []
        self._nursery: trio.Nursery | None = None
        self._supervise_scope = trio.CancelScope()
        self._closing = True
        self._exits_send, self._exits_recv = trio.open_memory_channel[IncarnationBase](math.inf)
        self._auto_names = itertools.count(1)
        self._started = self._restarted = self._crashed = 0
        self._relocated = self._escalations = 0

    def __repr__(self) -> str:
        return f"<Supervisor {self._name!r} {self._strategy.name} children={len(self._children)}>"

    @property
    def name(self) -> str:
        """The supervisor's name (a child name too, when nested)."""
        return self._name

    @property
    def dead_letters(self) -> DeadLetters:
        """Where messages left in the mailboxes of ended incarnations are recorded."""
        return self._dead_letters

    def children(self) -> list[str]:
        """Return the names of the children, running or about to restart, in start order."""
        return list(self._children)

    def lookup(self, name: str) -> ActorRef[Any] | None:
        """Return the reference to the current incarnation of actor ``name``.

        Returns:
            The `ActorRef` of the running incarnation, or ``None`` if there is no such child,
            it is a nested supervisor, or it is between incarnations (stopped, restarting).
        """
        child = self._children.get(name)
        if child is None:
            return None
        incarnation = child.incarnation
        if not isinstance(incarnation, Incarnation) or incarnation.mailbox.closed:
            return None
        ref: ActorRef[Any] = incarnation.ref
        return ref

    def statistics(self) -> SupervisorStatistics:
        """Return a `SupervisorStatistics` snapshot of this supervisor's counters."""
        return SupervisorStatistics(
            children=len(self._children),
            running=sum(
                1
                for c in self._children.values()
                if c.incarnation is not None and not c.incarnation.stopped.is_set()
            ),
            started=self._started,
            restarted=self._restarted,
            crashed=self._crashed,
            relocated=self._relocated,
            escalations=self._escalations,
            dead_letters=self._dead_letters.count,
        )

    async def start_child(
        self,
        factory: Callable[[*ArgsT], Actor[MessageT]],
        *args: *ArgsT,
        name: str | None = None,
        restart: Restart = Restart.PERMANENT,
        mailbox_size: int = DEFAULT_MAILBOX_SIZE,
        throughput: int = DEFAULT_THROUGHPUT,
        placement: object = None,
    ) -> ActorRef[MessageT]:
        """Start an actor built by ``factory(*args)`` and supervise it.

        The factory is called again for every restart, so each incarnation starts from a fresh
        instance (and from the latest checkpoint, if the supervisor has a store).

        Args:
            factory: Builds the actor, usually its class.
            *args: Positional arguments for ``factory``.
            name: Unique among this supervisor's children; ``<factory name>-<n>`` if ``None``.
            restart: When the child comes back after its incarnation ends.
            mailbox_size: Capacity of the user lane of its mailbox (0: rendezvous).
            throughput: Messages it may handle in a row before yielding to other tasks.
            placement: Opaque value the actor sees as ``Actor.placement``.

        Returns:
            The reference to the first incarnation, once its ``on_start`` has returned.

        Raises:
            ValueError: ``name`` is taken, ``mailbox_size`` < 0 or ``throughput`` < 1.
            ActorStopped: The supervisor is not running (shut down or escalated).
            Exception: Whatever ``factory``, ``Actor.restore`` or ``on_start`` raised; the
                child is then not registered.
        """
        if throughput < 1:
            raise ValueError(f"throughput must be >= 1, got {throughput}")
        if mailbox_size < 0:
            raise ValueError(f"mailbox_size must be >= 0, got {mailbox_size}")
        if name is None:
            name = f"{getattr(factory, '__name__', 'actor')}-{next(self._auto_names)}"
        child = Child(
            name=name,
            factory=factory,
            args=tuple(args),
            supervisor=None,
            restart=restart,
            mailbox_size=mailbox_size,
            throughput=throughput,
            placement=placement,
        )
        await self._start_new(child)
        incarnation = child.incarnation
        if not isinstance(incarnation, Incarnation):  # pragma: no cover - set by _start_new
            raise RuntimeError("actor child without an actor incarnation")
        ref: ActorRef[MessageT] = incarnation.ref
        return ref

    async def start_supervisor(
        self,
        *,
        name: str,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        intensity: RestartIntensity = DEFAULT_INTENSITY,
        backoff: Backoff = DEFAULT_BACKOFF,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
        restart: Restart = Restart.PERMANENT,
        checkpoints: CheckpointStore | None = None,
    ) -> Supervisor:
        """Start a nested supervisor as a child of this one and return it.

        The nested supervisor shares this one's dead letters, and its checkpoint store unless
        ``checkpoints`` is given. When it escalates, this supervisor sees the crash of a child
        and applies its own policy; restarting it starts its children again, in order, from
        their specs (temporary children excepted). When this supervisor stops it, it waits
        without a deadline, as OTP does for supervisors: the nested one bounds each of its own
        children's stops.

        Args:
            name: Unique among this supervisor's children.
            strategy, intensity, backoff, shutdown_timeout: As for `open_supervisor`.
            restart: When the nested supervisor comes back after it ends.
            checkpoints: Its checkpoint store; this supervisor's if ``None``.

        Returns:
            The nested `Supervisor`, running; it stays the same object across its restarts.

        Raises:
            ValueError: ``name`` is taken.
            ActorStopped: This supervisor is not running.
        """
        sup = Supervisor(
            name=name,
            strategy=strategy,
            intensity=intensity,
            backoff=backoff,
            shutdown_timeout=shutdown_timeout,
            checkpoints=checkpoints if checkpoints is not None else self._checkpoints,
            dead_letters=self._dead_letters,
        )
        child = Child(
            name=name,
            factory=None,
            args=(),
            supervisor=sup,
            restart=restart,
            mailbox_size=0,
            throughput=1,
            placement=None,
        )
        await self._start_new(child)
        return sup

    async def stop_child(self, name: str) -> None:
        """Stop child ``name`` gracefully and forget it, whatever its restart type.

        Waits up to ``shutdown_timeout`` for the stop (no limit for a nested supervisor), then
        cancels the child. Its name is free again afterwards.

        Raises:
            LookupError: There is no child named ``name``.
        """
        child = self._children.get(name)
        if child is None:
            raise LookupError(f"supervisor {self._name!r} has no child named {name!r}")
        del self._children[name]
        incarnation, child.incarnation = child.incarnation, None
        if incarnation is not None:
            await self._stop_gracefully(incarnation)

    async def relocate(self, name: str, placement: object) -> ActorRef[Any]:
        """Restart actor ``name`` on ``placement``, from its checkpoint.

        The current incarnation is stopped gracefully (as by `stop_child`); if it stopped
        cleanly its `Actor.snapshot` is saved to the checkpoint store. A new incarnation then
        starts with ``Actor.placement == placement`` and restores the latest checkpoint. A
        relocation is not a restart: it does not count against the restart intensity.

        Args:
            name: The child to move.
            placement: Opaque value the new incarnation sees as ``Actor.placement``.

        Returns:
            The reference to the new incarnation.

        Raises:
            LookupError: There is no actor child named ``name``.
            Exception: Whatever the new incarnation's ``restore`` or ``on_start`` raised; the
                supervisor then treats it as a crash of the child.
        """
        child = self._children.get(name)
        if child is None or child.supervisor is not None:
            raise LookupError(f"supervisor {self._name!r} has no actor child named {name!r}")
        incarnation, child.incarnation = child.incarnation, None
        child.restart_due = None
        child.placement = placement
        if incarnation is not None:
            await self._stop_gracefully(incarnation)
            if incarnation.cause is None and isinstance(incarnation, Incarnation):
                await incarnation.save_checkpoint()
        failure = await self._start_incarnation(child, why="relocate")
        if failure is not None:
            raise failure
        self._relocated += 1
        _log.info("actor.relocated", actor=name, supervisor=self._name, placement=repr(placement))
        ref = self.lookup(name)
        if ref is None:
            raise ActorStopped(f"actor {name!r} stopped right after relocation")
        return ref

    # -- running -----------------------------------------------------------------------------

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        """Open the nursery, (re)start the registered children in order, supervise, shut down."""
        self._closing = False
        self._window.clear()
        self._due.clear()
        self._supervise_scope = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                for child in list(self._children.values()):
                    child.attempts = 0
                    await self._start_incarnation(child, why="start")
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

    async def _start_incarnation(self, child: Child, *, why: str) -> BaseException | None:
        """Start the next incarnation of ``child``; return the exception if it failed to start.

        ``why`` is "start" (`start_child`), "restart" or "relocate". Unless it is "start", a
        failure is also queued as the end of the incarnation, so that `_supervise` handles it
        like any crash.
        """
        if child.incarnation is not None or self._nursery is None:
            return None
        child.number += 1
        options: dict[str, Any] = {
            "name": child.name,
            "number": child.number,
            "supervisor": self._name,
            "throughput": child.throughput,
            "placement": child.placement,
            "dead_letters": self._dead_letters,
            "checkpoints": self._checkpoints,
            "stop_timeout": DEFAULT_STOP_TIMEOUT,
            "on_exit": self._exits_send.send_nowait,
        }
        incarnation: IncarnationBase
        if child.supervisor is not None:
            incarnation = SupervisorIncarnation(child.supervisor, **options)
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
                failed = IncarnationBase(**options)
                failed.cause = exc
                failed.stopped.set()
                child.incarnation = failed
                self._exits_send.send_nowait(failed)
                return exc
            actor_incarnation = Incarnation(actor, mailbox_size=child.mailbox_size, **options)
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
        if not (child.restart is Restart.PERMANENT or (child.restart is Restart.TRANSIENT and crashed)):
            self._forget(child)
            return
        now = trio.current_time()
        if not self._window.admit(now):
            await self._escalate(ended.cause)
        if ended.started_at and now - ended.started_at >= self._backoff.reset_after:
            child.attempts = 0
        delay = self._backoff.delay(child.attempts)
        child.attempts += 1
        group = self._group(child)
        for other in reversed(group):
            incarnation, other.incarnation = other.incarnation, None
            if incarnation is not None:
                # Cancelled, not asked: its state is about to be thrown away, and a graceful
                # stop would hold the whole group's restart hostage to one slow handler.
                incarnation.cancel_scope.cancel()
                await incarnation.stopped.wait()
            if other is not child and other.restart is Restart.TEMPORARY:
                self._forget(other)
        due = now + delay
        for other in group:
            if self._children.get(other.name) is other:
                other.restart_due = due
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
        for child in list(self._children.values()):
            due = child.restart_due
            if due is None or due > now or self._children.get(child.name) is not child:
                continue
            child.restart_due = None
            await self._start_incarnation(child, why="restart")

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
        incarnation.cancel_scope.cancel()
        await incarnation.stopped.wait()


@asynccontextmanager
async def open_supervisor(
    *,
    name: str = "root",
    strategy: Strategy = Strategy.ONE_FOR_ONE,
    intensity: RestartIntensity = DEFAULT_INTENSITY,
    backoff: Backoff = DEFAULT_BACKOFF,
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
    checkpoints: CheckpointStore | None = None,
    dead_letters: DeadLetters | None = None,
) -> AsyncIterator[Supervisor]:
    """Open a root supervisor; leaving the block stops all of its children.

    Example::

        async with open_supervisor(name="root", strategy=Strategy.ONE_FOR_ONE) as sup:
            counter = await sup.start_child(Counter, 0, name="counter")
            await counter.tell(Inc())

    On the way out (normally, by an exception or by cancellation) the children are stopped in
    reverse start order, each asked to stop and given ``shutdown_timeout`` seconds before it is
    cancelled. This shutdown is shielded from cancellation, so that it always completes, within
    those deadlines. If the restart intensity is exceeded, the children are stopped the same way,
    the block is cancelled and `SupervisorEscalation` is raised out of it.

    Args:
        name: The supervisor's name, in logs and errors.
        strategy: Which children restart together.
        intensity: How many restarts within how long before giving up.
        backoff: Delay before each restart.
        shutdown_timeout: Seconds each child gets to stop gracefully.
        checkpoints: Where snapshots are kept; without one, restarts start from scratch.
        dead_letters: Sink for undelivered messages; a fresh `DeadLetters` if ``None``.

    Raises:
        ValueError: ``shutdown_timeout`` is negative.
        SupervisorEscalation: The restart intensity was exceeded.
    """
    sup = Supervisor(
        name=name,
        strategy=strategy,
        intensity=intensity,
        backoff=backoff,
        shutdown_timeout=shutdown_timeout,
        checkpoints=checkpoints,
        dead_letters=dead_letters,
    )
    try:
        async with sup._running():
            yield sup
    except BaseExceptionGroup as group:
        # The nursery is ours, not the caller's: let a single error out as itself.
        leaf = unwrap(group)
        if leaf is group:
            raise
        context = leaf.__context__
        try:
            raise leaf
        finally:
            leaf.__context__ = context
            del leaf, context
