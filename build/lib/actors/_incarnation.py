"""One incarnation of an actor, from ``on_start`` to ``on_stop``: its mailbox loop and its end.

A supervisor builds an `Incarnation` for each start and restart of a child and runs
`Incarnation.run` as a task in its nursery. Everything that happens per message happens in
`Incarnation._loop`; it allocates nothing and logs nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar, final

import structlog
import trio
from outcome import Error, Value

from ._dead_letters import DeadLetter, DeadLetterReason, DeadLetters
from ._exceptions import ActorStopped
from ._mailbox import Mailbox
from ._ref import ActorRef, Ask

if TYPE_CHECKING:
    from ._actor import Actor
    from ._checkpoint import CheckpointStore

__all__ = [
    "DEFAULT_STOP_TIMEOUT",
    "DEFAULT_THROUGHPUT",
    "Environment",
    "Incarnation",
    "IncarnationBase",
]

DEFAULT_THROUGHPUT = 10
"""Messages an actor may handle in a row before it yields to other tasks (Akka's default is 5;
its benchmarks peak at 20 and up)."""

DEFAULT_STOP_TIMEOUT = 5.0
"""Seconds ``Actor.on_stop`` may run, shielded from cancellation, before it is cut off."""

MessageT = TypeVar("MessageT")

_log = structlog.get_logger("actors")


@final
class _Signal(enum.Enum):
    STOP = "stop"


def split_crash(exc: BaseException) -> tuple[BaseException | None, BaseException | None]:
    """Split ``exc`` into (crash, rest): the Exception part and whatever is not an Exception.

    Groups with a single member are unwrapped, so that a crash in one task reads as itself.
    """
    if isinstance(exc, BaseExceptionGroup):
        crash, rest = exc.split(Exception)
        return (unwrap(crash) if crash is not None else None), rest
    if isinstance(exc, Exception):
        return exc, None
    return None, exc


def unwrap(exc: BaseException) -> BaseException:
    """Return the only leaf of nested single-member groups, or ``exc`` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@dataclass(frozen=True, slots=True)
class Environment:
    """What every incarnation of one supervisor shares (one object per supervisor)."""

    supervisor: str
    dead_letters: DeadLetters
    checkpoints: CheckpointStore | None
    on_exit: Callable[[IncarnationBase], None]
    stop_timeout: float = DEFAULT_STOP_TIMEOUT


class IncarnationBase:
    """What a supervisor needs to know about an incarnation, whatever its message type."""

    __slots__ = (
        "cancel_requested",
        "cause",
        "entered_start",
        "env",
        "in_flight",
        "name",
        "number",
        "placement",
        "started_at",
        "stop_requested",
        "stopped",
        "throughput",
    )

    def __init__(
        self, env: Environment, *, name: str, number: int, throughput: int, placement: object
    ) -> None:
        self.env = env
        self.name = name
        self.number = number
        self.throughput = throughput
        self.placement = placement
        self.cancel_requested = False
        self.stopped = trio.Event()
        self.cause: BaseException | None = None
        self.stop_requested = False
        self.entered_start = False
        self.in_flight: Ask[object] | None = None
        self.started_at = 0.0

    def request_stop(self) -> None:
        """Ask the incarnation to stop normally (nothing to do for one that never started)."""

    def cancel(self) -> None:
        """Cancel the incarnation: it stops at its next await (``on_stop`` still runs)."""
        self.cancel_requested = True

    def snapshot(self) -> object | None:
        return None

    def stopped_error(self) -> ActorStopped:
        how = "crashed" if self.cause is not None else "stopped"
        exc = ActorStopped(f"actor {self.name!r} (incarnation {self.number}) has {how}")
        exc.__cause__ = self.cause
        return exc


class Incarnation(IncarnationBase, Generic[MessageT]):
    """Runtime state of one incarnation of ``actor``; see the module docstring."""

    __slots__ = ("actor", "mailbox", "nursery", "ref", "control_types")

    def __init__(
        self,
        actor: Actor[MessageT],
        env: Environment,
        *,
        name: str,
        number: int,
        throughput: int,
        placement: object,
        mailbox_size: int,
    ) -> None:
        super().__init__(env, name=name, number=number, throughput=throughput, placement=placement)
        self.actor = actor
        self.mailbox: Mailbox[MessageT | Ask[MessageT] | _Signal] = Mailbox(
            mailbox_size, closed_error=self.stopped_error
        )
        self.control_types = type(actor).control_messages
        self.nursery: trio.Nursery | None = None
        self.ref: ActorRef[MessageT] = ActorRef(self)
        actor._incarnation = self

    def cancel(self) -> None:
        # The incarnation's own nursery doubles as its cancel scope: one scope less per actor.
        self.cancel_requested = True
        if self.nursery is not None:
            self.nursery.cancel_scope.cancel()

    def request_stop(self) -> None:
        if self.stop_requested or self.mailbox.closed:
            return
        self.stop_requested = True
        self.mailbox.send_control(_Signal.STOP)

    def snapshot(self) -> object | None:
        return self.actor.snapshot()

    async def save_checkpoint(self) -> bool:
        checkpoints = self.env.checkpoints
        if checkpoints is None:
            return False
        snapshot = self.actor.snapshot()
        if snapshot is None:
            return False
        await checkpoints.save(self.name, snapshot)
        return True

    async def run(
        self, *, task_status: trio.TaskStatus[BaseException | None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the incarnation to its end.

        Reports ``None`` through ``task_status`` once ``on_start`` returned, or the exception
        that ended the incarnation before that. Exceptions from the actor never leave this
        method; they are kept in ``cause`` and passed to ``on_exit``. Cancellation from outside
        does leave it, after the incarnation has been wound up.
        """
        started = False
        rest: BaseException | None = None
        try:
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                if self.cancel_requested:
                    nursery.cancel_scope.cancel()
                if self.env.checkpoints is not None:
                    snapshot = await self.env.checkpoints.load(self.name)
                    if snapshot is not None:
                        self.actor.restore(snapshot)
                self.entered_start = True
                await self.actor.on_start()
                self.started_at = trio.current_time()
                started = True
                task_status.started(None)
                _log.info(
                    "actor.started",
                    actor=self.name,
                    incarnation=self.number,
                    supervisor=self.env.supervisor,
                )
                await self._loop()
                nursery.cancel_scope.cancel()
            cause = None
        except BaseException as exc:
            cause, rest = split_crash(exc)
        await self._finish(cause)
        if not started:
            if rest is not None:
                raise rest
            task_status.started(self.cause)
            return
        if rest is not None:
            raise rest
        self.env.on_exit(self)

    async def _loop(self) -> None:
        mailbox = self.mailbox
        receive_nowait = mailbox.receive_nowait
        handle = self.actor.handle
        throughput = self.throughput
        batch = 0
        while not self.stop_requested:
            if batch >= throughput:
                batch = 0
                await trio.lowlevel.checkpoint()
                continue
            try:
                item = receive_nowait()
                batch += 1
                idle = False
            except trio.WouldBlock:
                idle = True  # wait outside the except clause: it would pin the exception
            if idle:
                item = await mailbox.receive()
                batch = 1
                if self.stop_requested:
                    # Handed over just before the stop: it was never handled, so no handler runs.
                    self.mailbox.put_back(item)
                    return
            if item is _Signal.STOP:
                return
            if type(item) is Ask:
                await self._answer(item)
            else:
                await handle(item)  # type: ignore[arg-type]

    async def _answer(self, ask: Ask[MessageT]) -> None:
        self.in_flight = ask  # type: ignore[assignment]
        try:
            reply = await self.actor.handle(ask.message)
        except Exception as exc:
            if ask.abandoned:
                raise  # nobody is waiting for it: crash rather than lose it
            ask.settle(Error(exc))
        else:
            ask.settle(Value(reply))
        self.in_flight = None

    async def _finish(self, cause: BaseException | None) -> None:
        """Close the mailbox, fail what waits, record dead letters, run ``on_stop``."""
        self.cause = cause
        leftover = self.mailbox.close()
        reason = DeadLetterReason.STOPPED if cause is None else DeadLetterReason.CRASHED
        record = self.env.dead_letters.record
        for item in leftover:
            if item is _Signal.STOP:
                continue
            if type(item) is Ask:
                item.settle(Error(self.stopped_error()))
                record(DeadLetter(self.name, item.message, reason))
            else:
                record(DeadLetter(self.name, item, reason))
        if self.in_flight is not None:
            self.in_flight.settle(Error(self.stopped_error()))
            self.in_flight = None
        if self.entered_start:
            with trio.move_on_after(self.env.stop_timeout, shield=True):
                try:
                    await self.actor.on_stop()
                except Exception as exc:
                    if self.cause is None:
                        self.cause = exc
                    else:
                        _log.error(
                            "actor.on_stop_failed",
                            actor=self.name,
                            incarnation=self.number,
                            error=repr(exc),
                        )
        if self.cause is None:
            _log.info(
                "actor.stopped",
                actor=self.name,
                incarnation=self.number,
                supervisor=self.env.supervisor,
            )
        else:
            _log.warning(
                "actor.crashed",
                actor=self.name,
                incarnation=self.number,
                supervisor=self.env.supervisor,
                error=repr(self.cause),
            )
        self.stopped.set()
