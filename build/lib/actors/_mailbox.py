"""An actor's mailbox: a bounded user lane, an unbounded control lane, and their statistics.

Why two lanes: a stop or cancel request that queued behind a full backlog of work would arrive
only after that work is done, which is exactly when it no longer matters. Control items
therefore overtake user messages and are never refused. They are few by construction (stop
requests and the message types an actor lists in ``Actor.control_messages``), so the control
lane is not bounded.

Why the user lane pushes back instead of dropping: a dropped message is an error the sender
cannot see, while a sender that waits is a sender that slows down (trio's memory channels and
triotp make the same choice; Akka's bounded mailboxes drop to dead letters instead). Senders
that would rather not wait use `Mailbox.send_nowait` and get `MailboxFull`.

The implementation follows trio's ``_channel.py``: a waiting sender parks with its item, and the
receiver moves that item into the buffer when it makes room, so waiting senders are served in
order and nobody polls. There is exactly one receiver, the actor's own loop.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import trio
from outcome import Error, Value

from ._exceptions import MailboxFull

__all__ = ["DEFAULT_MAILBOX_SIZE", "Mailbox", "MailboxStatistics"]

DEFAULT_MAILBOX_SIZE = 64
"""Default capacity of an actor's user lane, in messages."""

ItemT = TypeVar("ItemT")


@dataclass(frozen=True, slots=True)
class MailboxStatistics:
    """A snapshot of one mailbox, as returned by `ActorRef.statistics`."""

    capacity: int
    """How many user messages the user lane holds before senders wait."""
    user_queued: int
    """User messages waiting to be handled."""
    control_queued: int
    """Control items (stop requests, control messages) waiting to be handled."""
    peak_user_queued: int
    """The most user messages ever queued at once."""
    senders_waiting: int
    """Tasks blocked in ``tell`` or ``ask`` waiting for room in the user lane."""
    receiver_waiting: bool
    """Whether the actor is idle, waiting for its next item."""
    closed: bool
    """Whether the mailbox accepts no more items because its incarnation ended."""


class Mailbox(Generic[ItemT]):
    """Two lanes of items for one actor incarnation: bounded user lane, unbounded control lane.

    `receive` returns control items first, in the order they came, then user items in order.
    `close` ends the mailbox: waiting and later senders get the error ``closed_error()`` builds,
    and the items still queued are handed back so that they can be recorded as dead letters.

    Args:
        capacity: Size of the user lane; 0 makes every send a rendezvous with the receiver.
        closed_error: Builds the exception raised to senders once the mailbox is closed. A new
            one is built for each raise, so that every sender gets its own traceback.

    Raises:
        ValueError: ``capacity`` is negative.
    """

    __slots__ = (
        "_capacity",
        "_closed",
        "_closed_error",
        "_control",
        "_peak",
        "_receiver",
        "_send_tasks",
        "_user",
    )

    def __init__(self, capacity: int, *, closed_error: Callable[[], BaseException]) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self._capacity = capacity
        self._closed_error = closed_error
        # Lanes and the waiting room are created on first use: an actor that keeps up receives
        # every item directly, and idle actors are what there are many of.
        self._user: deque[ItemT] | None = None
        self._control: deque[ItemT] | None = None
        self._send_tasks: OrderedDict[trio.lowlevel.Task, ItemT] | None = None
        self._receiver: trio.lowlevel.Task | None = None
        self._closed = False
        self._peak = 0

    @property
    def closed(self) -> bool:
        """Whether `close` has been called."""
        return self._closed

    def send_nowait(self, item: ItemT) -> None:
        """Put ``item`` in the user lane without waiting.

        Raises:
            MailboxFull: The user lane is full.
            BaseException: Whatever ``closed_error()`` builds, if the mailbox is closed.
        """
        if self._closed:
            raise self._closed_error()
        receiver = self._receiver
        if receiver is not None:
            self._receiver = None
            trio.lowlevel.reschedule(receiver, Value(item))
            return
        user = self._user
        if user is None:
            user = self._user = deque()
        if len(user) < self._capacity:
            user.append(item)
            if len(user) > self._peak:
                self._peak = len(user)
            return
        raise MailboxFull(f"mailbox full ({self._capacity} messages queued)")

    async def send(self, item: ItemT) -> None:
        """Put ``item`` in the user lane, waiting for room while it is full.

        Waiting senders are served first come, first served. This is a trio checkpoint.

        Raises:
            BaseException: Whatever ``closed_error()`` builds, if the mailbox is or becomes
                closed before the item is accepted.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self.send_nowait(item)
        except MailboxFull:
            pass
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        task = trio.lowlevel.current_task()
        send_tasks = self._send_tasks
        if send_tasks is None:
            send_tasks = self._send_tasks = OrderedDict()
        send_tasks[task] = item

        def abort(_: object) -> trio.lowlevel.Abort:
            del send_tasks[task]
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def send_control(self, item: ItemT) -> None:
        """Put ``item`` in the control lane; it overtakes every queued user item.

        Raises:
            BaseException: Whatever ``closed_error()`` builds, if the mailbox is closed.
        """
        if self._closed:
            raise self._closed_error()
        receiver = self._receiver
        if receiver is not None:
            self._receiver = None
            trio.lowlevel.reschedule(receiver, Value(item))
            return
        if self._control is None:
            self._control = deque()
        self._control.append(item)

    def receive_nowait(self) -> ItemT:
        """Take the next item, control lane first, without waiting.

        Raises:
            trio.WouldBlock: Both lanes are empty.
        """
        control = self._control
        if control:
            return control.popleft()
        user = self._user
        if user:
            item = user.popleft()
            if self._send_tasks:
                task, waiting = self._send_tasks.popitem(last=False)
                trio.lowlevel.reschedule(task)
                user.append(waiting)
            return item
        if self._send_tasks:  # capacity 0: take straight from the first waiting sender
            task, waiting = self._send_tasks.popitem(last=False)
            trio.lowlevel.reschedule(task)
            return waiting
        raise trio.WouldBlock

    async def receive(self) -> ItemT:
        """Take the next item, control lane first, waiting while both lanes are empty.

        This is a trio checkpoint. Only one task may wait in `receive` at a time.

        Raises:
            trio.ClosedResourceError: The mailbox was closed while empty.
            RuntimeError: Another task is already waiting in `receive`.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            item = self.receive_nowait()
        except trio.WouldBlock:
            pass
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return item
        if self._closed:
            raise trio.ClosedResourceError("mailbox is closed")
        if self._receiver is not None:
            raise RuntimeError("another task is already receiving from this mailbox")
        self._receiver = trio.lowlevel.current_task()
        received: ItemT = await trio.lowlevel.wait_task_rescheduled(self._abort_receive)
        return received

    def _abort_receive(self, _: object) -> trio.lowlevel.Abort:
        self._receiver = None
        return trio.lowlevel.Abort.SUCCEEDED

    def put_back(self, item: ItemT) -> None:
        """Return a received ``item`` to the front of the user lane, as if never received."""
        if self._closed:
            raise self._closed_error()
        if self._user is None:
            self._user = deque()
        self._user.appendleft(item)

    def close(self) -> list[ItemT]:
        """Refuse all further items and return those still queued, control lane first.

        Senders waiting for room get ``closed_error()``; their items were never accepted and are
        not returned. A task waiting in `receive` gets `trio.ClosedResourceError`. Closing
        twice returns an empty list the second time.

        Returns:
            The items that were queued and will now never be received, in receive order.
        """
        if self._closed:
            return []
        self._closed = True
        leftover: list[ItemT] = []
        if self._control:
            leftover.extend(self._control)
            self._control.clear()
        if self._user:
            leftover.extend(self._user)
            self._user.clear()
        while self._send_tasks:
            task, _ = self._send_tasks.popitem(last=False)
            trio.lowlevel.reschedule(task, Error(self._closed_error()))
        if self._receiver is not None:
            task, self._receiver = self._receiver, None
            trio.lowlevel.reschedule(task, Error(trio.ClosedResourceError("mailbox is closed")))
        return leftover

    def statistics(self) -> MailboxStatistics:
        """Return a `MailboxStatistics` snapshot of this mailbox."""
        return MailboxStatistics(
            capacity=self._capacity,
            user_queued=len(self._user) if self._user else 0,
            control_queued=len(self._control) if self._control else 0,
            peak_user_queued=self._peak,
            senders_waiting=len(self._send_tasks) if self._send_tasks else 0,
            receiver_waiting=self._receiver is not None,
            closed=self._closed,
        )
