"""What a supervisor keeps per child: its spec (`Child`) and, for a nested supervisor, the
incarnation wrapper that runs it (`SupervisorIncarnation`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import structlog
import trio

from ._incarnation import Environment, IncarnationBase, split_crash
from ._restart import Backoff, Restart, RestartIntensity, _RestartWindow

if TYPE_CHECKING:
    from ._protocols import NestedSupervisor

__all__ = ["Child", "GiveUp", "SupervisorIncarnation"]

GiveUp = Callable[[str, BaseException | None], Awaitable[None]]
"""What a supervisor awaits when it gives a child up: ``await on_give_up(name, last_crash)``."""

_log = structlog.get_logger("actors")


class Child:
    """A child spec plus its current state: enough to start it again."""

    __slots__ = (
        "args",
        "attempts",
        "backoff",
        "factory",
        "incarnation",
        "intensity",
        "mailbox_size",
        "name",
        "number",
        "on_give_up",
        "placement",
        "restart",
        "restart_due",
        "seq",
        "supervisor",
        "throughput",
        "window",
    )

    def __init__(
        self,
        *,
        name: str,
        factory: Callable[..., object] | None,
        args: tuple[object, ...],
        supervisor: NestedSupervisor | None,
        restart: Restart,
        mailbox_size: int,
        throughput: int,
        placement: object,
        intensity: RestartIntensity | None = None,
        backoff: Backoff | None = None,
        on_give_up: GiveUp | None = None,
    ) -> None:
        self.name = name
        self.factory = factory
        self.args = args
        self.supervisor = supervisor
        self.restart = restart
        self.mailbox_size = mailbox_size
        self.throughput = throughput
        self.placement = placement
        self.intensity = intensity  # its own restart limit; None: the supervisor's counts it
        self.window = _RestartWindow(intensity) if intensity is not None else None
        self.backoff = backoff  # its own delays before restarts; None: the supervisor's
        self.on_give_up = on_give_up
        self.incarnation: IncarnationBase | None = None
        self.number = 0
        self.attempts = 0
        self.restart_due: float | None = None
        self.seq = 0  # registration order, set by the supervisor


class SupervisorIncarnation(IncarnationBase):
    """One run of a nested supervisor, shaped like an actor incarnation for its parent."""

    __slots__ = ("_scope", "_stop_event", "sup")

    def __init__(self, sup: NestedSupervisor, env: Environment, *, number: int) -> None:
        super().__init__(env, name=sup.name, number=number, throughput=1, placement=None)
        self.sup = sup
        self._stop_event = trio.Event()
        self._scope = trio.CancelScope()

    def request_stop(self) -> None:
        if self.stop_requested or self.stopped.is_set():
            return
        self.stop_requested = True
        self._stop_event.set()

    def cancel(self) -> None:
        self.cancel_requested = True
        self._scope.cancel()

    def snapshot(self) -> object | None:
        return None

    async def run(
        self, *, task_status: trio.TaskStatus[BaseException | None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        started = False
        rest: BaseException | None = None
        try:
            with self._scope:
                async with self.sup._running():
                    self.started_at = trio.current_time()
                    started = True
                    task_status.started(None)
                    await self._stop_event.wait()
            cause = None
        except BaseException as exc:
            cause, rest = split_crash(exc)
        self.cause = cause
        if cause is None:
            _log.info("supervisor.stopped", supervisor=self.name, incarnation=self.number)
        self.stopped.set()
        if rest is not None:
            raise rest
        if not started:
            task_status.started(cause)
        else:
            self.env.on_exit(self)
