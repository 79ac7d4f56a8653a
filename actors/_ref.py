"""`ActorRef`, the handle through which everything outside an actor talks to it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Generic, TypeVar

import trio
from outcome import Outcome

from ._exceptions import AskTimeout

if TYPE_CHECKING:
    from ._mailbox import MailboxStatistics
    from ._protocols import RefCell

__all__ = ["DEFAULT_ASK_TIMEOUT", "ActorRef"]

DEFAULT_ASK_TIMEOUT = 5.0
"""Seconds `ActorRef.ask` waits for a reply by default (OTP's ``gen_server:call`` default)."""

MessageT = TypeVar("MessageT")


class Ask(Generic[MessageT]):
    """The envelope of a question: the message plus a slot for its one reply.

    Plain ``tell`` messages travel without an envelope, so this is the only per-message
    allocation of the runtime, and only for asks.
    """

    __slots__ = ("abandoned", "message", "_result", "_task")

    def __init__(self, message: MessageT) -> None:
        self.message = message
        self.abandoned = False
        self._result: Outcome[object] | None = None
        self._task: trio.lowlevel.Task | None = None

    @property
    def settled(self) -> bool:
        return self._result is not None

    def settle(self, result: Outcome[object]) -> None:
        """Deliver the reply (a value or an exception); later calls are ignored."""
        if self._result is not None:
            return
        self._result = result
        task = self._task
        if task is not None:
            self._task = None
            trio.lowlevel.reschedule(task, result)

    async def wait(self) -> object:
        result = self._result
        if result is not None:
            return result.unwrap()
        self._task = trio.lowlevel.current_task()

        def abort(_: object) -> trio.lowlevel.Abort:
            self._task = None
            self.abandoned = True
            return trio.lowlevel.Abort.SUCCEEDED

        return await trio.lowlevel.wait_task_rescheduled(abort)


class ActorRef(Generic[MessageT]):
    """The address of one incarnation of an actor: tell it, ask it, stop it, wait for it.

    A reference belongs to one incarnation. When that incarnation stops, the reference is dead
    for good: `tell`, `try_tell` and `ask` raise `ActorStopped`, even if the supervisor has
    started a new incarnation under the same name. Get the current one with
    `Supervisor.lookup`. This is deliberate: a message meant for a crashed incarnation may mean
    something else to a fresh one, and only the sender can judge.

    References are cheap, hashable by identity, and safe to share between tasks. They are made
    by `Supervisor.start_child`; do not build them yourself.
    """

    __slots__ = ("_incarnation",)

    def __init__(self, incarnation: RefCell) -> None:
        self._incarnation = incarnation

    def __repr__(self) -> str:
        cell = self._incarnation
        state = "stopped" if cell.mailbox.closed else "running"
        return f"<ActorRef {cell.name!r} incarnation={cell.number} {state}>"

    @property
    def name(self) -> str:
        """The actor's name, unique among its supervisor's children."""
        return self._incarnation.name

    @property
    def incarnation(self) -> int:
        """Which incarnation this reference addresses: 1 for the first, +1 per restart."""
        return self._incarnation.number

    @property
    def stopped(self) -> bool:
        """Whether the incarnation no longer accepts messages (it is stopping or stopped)."""
        return self._incarnation.mailbox.closed

    async def tell(self, message: MessageT) -> None:
        """Send ``message`` without waiting for it to be handled.

        A message whose type is listed in the actor's ``control_messages`` goes to the control
        lane: it overtakes queued user messages and never waits. Any other message waits while
        the user mailbox is full; that wait is the backpressure. There is no ``timeout``: wrap
        the call in `trio.move_on_after` to bound the wait.

        Args:
            message: The message for the actor's ``handle``.

        Raises:
            ActorStopped: The incarnation has stopped, or stopped while we waited for room.
        """
        cell = self._incarnation
        control = cell.control_types
        if control and isinstance(message, control):
            cell.mailbox.send_control(message)
            await trio.lowlevel.checkpoint()
        else:
            await cell.mailbox.send(message)

    def try_tell(self, message: MessageT) -> None:
        """Send ``message`` like `tell`, but raise `MailboxFull` rather than wait for room.

        Args:
            message: The message for the actor's ``handle``.

        Raises:
            MailboxFull: The user mailbox is full (never for control messages).
            ActorStopped: The incarnation has stopped.
        """
        cell = self._incarnation
        control = cell.control_types
        if control and isinstance(message, control):
            cell.mailbox.send_control(message)
        else:
            cell.mailbox.send_nowait(message)

    async def ask(
        self, message: MessageT, *, timeout: float | None = DEFAULT_ASK_TIMEOUT
    ) -> object:
        """Send ``message`` and wait for the value the actor's ``handle`` returns for it.

        The message takes the same lane as with `tell`. The timeout covers both the wait for
        room in the mailbox and the wait for the reply. When it runs out the question stays
        queued and may still be handled; its reply is then dropped (as OTP does). If ``handle``
        raises while answering, that exception is raised here and the actor carries on; only
        when nobody waits for the answer any more does the exception crash the actor, so that
        it is never lost.

        Args:
            message: The question for the actor's ``handle``.
            timeout: Seconds to wait in all, or ``None`` to wait until the reply comes or the
                incarnation stops.

        Returns:
            Whatever ``handle`` returned for ``message``.

        Raises:
            AskTimeout: No reply within ``timeout`` seconds.
            ActorStopped: The incarnation stopped before replying (its crash as ``__cause__``).
            Exception: Whatever ``handle`` raised for this message.
        """
        cell = self._incarnation
        envelope = Ask(message)
        deadline = math.inf if timeout is None else trio.current_time() + timeout
        with trio.move_on_at(deadline):
            control = cell.control_types
            if control and isinstance(message, control):
                cell.mailbox.send_control(envelope)
            else:
                await cell.mailbox.send(envelope)
            return await envelope.wait()
        envelope.abandoned = True
        raise AskTimeout(
            f"actor {cell.name!r} did not answer {type(message).__name__} within {timeout} s"
        )

    def stop(self) -> None:
        """Ask the incarnation to stop normally; return at once.

        The request travels in the control lane, so it overtakes queued user messages: the
        handler now running finishes, then no other handler runs. Queued messages become dead
        letters and queued asks fail with `ActorStopped`. Calling it again, or on a stopped
        incarnation, does nothing. A `Restart.PERMANENT` child is restarted after a normal stop;
        use `Supervisor.stop_child` to stop one for good.
        """
        self._incarnation.request_stop()

    async def wait_stopped(self) -> None:
        """Wait until this incarnation has stopped and its ``on_stop`` has run.

        Returns at once if it already has. It does not wait for later incarnations.
        """
        await self._incarnation.stopped.wait()

    def statistics(self) -> MailboxStatistics:
        """Return a `MailboxStatistics` snapshot of this incarnation's mailbox."""
        return self._incarnation.mailbox.statistics()
