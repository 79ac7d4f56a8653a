"""`Supervisor` and `open_supervisor`: start children, watch them, restart them by policy.

This module is the public face; the restart engine it drives is `_supervision.Supervision`.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar, TypeVarTuple

import structlog

from ._actor import Actor
from ._checkpoint import CheckpointStore
from ._child import Child, GiveUp
from ._dead_letters import DeadLetters
from ._exceptions import ActorStopped
from ._incarnation import DEFAULT_THROUGHPUT, Incarnation, unwrap
from ._mailbox import DEFAULT_MAILBOX_SIZE
from ._ref import ActorRef
from ._restart import (
    DEFAULT_BACKOFF,
    DEFAULT_INTENSITY,
    Backoff,
    Restart,
    RestartIntensity,
    Strategy,
)
from ._statistics import SupervisorStatistics
from ._supervision import DEFAULT_SHUTDOWN_TIMEOUT, Supervision

__all__ = ["DEFAULT_SHUTDOWN_TIMEOUT", "Supervisor", "open_supervisor"]

MessageT = TypeVar("MessageT")
ArgsT = TypeVarTuple("ArgsT")

_log = structlog.get_logger("actors")


class Supervisor(Supervision):
    """Starts actors and nested supervisors, restarts them by policy, stops them in order.

    Get one from `open_supervisor` or `Supervisor.start_supervisor`; do not build one yourself.
    Children start in the order `start_child` is called, and stop in reverse order, each with a
    graceful stop (``shutdown_timeout`` seconds) and then cancellation. When a child's
    incarnation ends, its `Restart` type decides whether it comes back; the `Strategy` decides
    which siblings are stopped and restarted with it; the `Backoff` how long to wait; the
    `RestartIntensity` when to give up and raise `SupervisorEscalation`. A child started with an
    intensity of its own is given up alone instead, and the supervisor goes on
    (`start_child`). `docs/actors.md` states the rules in full.
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
        super().__init__(
            name=name,
            strategy=strategy,
            intensity=intensity,
            backoff=backoff,
            shutdown_timeout=shutdown_timeout,
            checkpoints=checkpoints,
            dead_letters=dead_letters,
        )
        self._auto_names = itertools.count(1)

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

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is a child now: running, starting, or waiting to be restarted.

        Unlike `lookup`, true during a restart's backoff too: use it to keep from starting a
        second child of the same name (which `start_child` refuses with ``ValueError``).
        """
        return name in self._children

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
            given_up=self._given_up,
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
        intensity: RestartIntensity | None = None,
        backoff: Backoff | None = None,
        on_give_up: GiveUp | None = None,
    ) -> ActorRef[MessageT]:
        """Start an actor built by ``factory(*args)`` and supervise it.

        The factory is called again for every restart, so each incarnation starts from a fresh
        instance (and from the latest checkpoint, if the supervisor has a store).

        With ``intensity``, the child's restarts are counted against its own limit, not the
        supervisor's: more than ``intensity.max_restarts`` within ``intensity.within`` seconds
        and the supervisor *gives it up*: removes it (its name is free again), counts it in
        `SupervisorStatistics.given_up`, logs ``actor.given_up``, runs ``await
        on_give_up(name, last_crash)`` as a task of its own, and goes on supervising the
        others. This is Akka's per-child ``OneForOneStrategy(maxNrOfRetries,
        withinTimeRange)``, which stops the child, rather than OTP's per-supervisor
        intensity, which takes the supervisor down with it: one child's crash loop is then
        that child's fault, not its siblings'. The supervisor's own intensity still counts
        the children started without one.

        Args:
            factory: Builds the actor, usually its class.
            *args: Positional arguments for ``factory``.
            name: Unique among this supervisor's children; ``<factory name>-<n>`` if ``None``.
            restart: When the child comes back after its incarnation ends.
            mailbox_size: Capacity of the user lane of its mailbox (0: rendezvous).
            throughput: Messages it may handle in a row before yielding to other tasks.
            placement: Opaque value the actor sees as ``Actor.placement``.
            intensity: Its own restart limit; ``None``: it counts against the supervisor's.
            backoff: Its own delays before restarts, e.g. ``Backoff(initial=0.1, cap=1.6)``
                doubles from 0.1 s to 1.6 s as Akka's ``BackoffSupervisor`` does from
                ``minBackoff`` to ``maxBackoff``; ``None``: the supervisor's.
            on_give_up: Awaited as ``on_give_up(name, last_crash)`` when the child is given
                up (``last_crash`` is None if its last incarnation stopped normally). An
                exception out of it ends the supervisor: handle your own.

        Returns:
            The reference to the first incarnation, once its ``on_start`` has returned.

        Raises:
            ValueError: ``name`` is taken, ``mailbox_size`` < 0 or ``throughput`` < 1;
                ``intensity`` under a strategy other than `Strategy.ONE_FOR_ONE` (a group
                restarts together, so it cannot lose one member); ``on_give_up`` without
                ``intensity`` (it would never run).
            ActorStopped: The supervisor is not running (shut down or escalated).
            Exception: Whatever ``factory``, ``Actor.restore`` or ``on_start`` raised; the
                child is then not registered.
        """
        if throughput < 1:
            raise ValueError(f"throughput must be >= 1, got {throughput}")
        if mailbox_size < 0:
            raise ValueError(f"mailbox_size must be >= 0, got {mailbox_size}")
        if intensity is not None and self._strategy is not Strategy.ONE_FOR_ONE:
            raise ValueError(
                f"a child's own intensity needs Strategy.ONE_FOR_ONE, not {self._strategy.name}"
            )
        if on_give_up is not None and intensity is None:
            raise ValueError("on_give_up needs an intensity of the child's own")
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
            intensity=intensity,
            backoff=backoff,
            on_give_up=on_give_up,
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
        self._forget(child)
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
