"""The event bus: per-job ordered updates to live subscribers, in memory.

The job actor publishes each change after the store has it (persist, then
publish). A subscriber gets items in ``seq`` order. Slow subscribers never
slow the publisher or anyone else: each has a bounded buffer, and one that
falls behind by more than that is marked *lagged*; it then reads what it
missed from the store and subscribes again (see :func:`Runtime.stream`).

With several processes, a change made by another process is not published
here: its notice (:mod:`alallo.runtime._notify`) *nudges* the job's and the
account's subscribers, which then read it from the store, as a lagged one does.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

__all__ = ["DEFAULT_BUFFER", "EventBus", "Item", "Lagged", "Subscription"]

DEFAULT_BUFFER = 1024
"""Items a subscriber may fall behind before it must catch up from the store."""


@dataclass(frozen=True, slots=True)
class Item:
    """One update of a job: ``kind`` is ``job``, ``event`` or ``log``; ``seq`` orders it;
    ``data`` is the API's JSON of it (:mod:`alallo.runtime._views`)."""

    job_id: str
    kind: str
    seq: int
    data: Mapping[str, Any]
    _json: str | None = field(default=None, init=False, repr=False, compare=False)
    _encodings: dict[str, bytes] = field(default_factory=dict, init=False, repr=False,
                                         compare=False)

    def json(self) -> str:
        """``data`` as compact JSON, encoded once and shared by every subscriber."""
        encoded = self._json
        if encoded is None:
            encoded = json.dumps(self.data, separators=(",", ":"))
            object.__setattr__(self, "_json", encoded)  # a cache, not a change of the item
        return encoded

    def encoded(self, name: str, encode: Callable[[Item], bytes]) -> bytes:
        """The item as a wire format ``name`` knows (e.g. the gateway's SSE frame), encoded
        by ``encode`` once and shared by every subscriber; the bus knows no wire format."""
        frame = self._encodings.get(name)
        if frame is None:
            frame = self._encodings[name] = encode(self)
        return frame


class Lagged(Exception):
    """The subscriber fell more than its buffer behind; it must catch up from the store."""


@dataclass(eq=False)
class Subscription:
    """A live feed of one job's items (or of one account's job changes).

    One task reads it at a time. A push wakes that task directly
    (:func:`trio.lowlevel.reschedule`, as trio's memory channels do) rather than
    through a :class:`trio.Event` made afresh for every wait: with thousands of
    subscribers per job, that bookkeeping was paid once per subscriber per item.
    """

    buffer_size: int
    _items: deque[Item] = field(default_factory=deque)
    _reader: trio.lowlevel.Task | None = None
    _lagged: bool = False

    def _wake(self) -> None:
        reader = self._reader
        if reader is not None:
            self._reader = None
            trio.lowlevel.reschedule(reader)

    def _nudge(self) -> None:
        self._lagged = True
        self._items.clear()
        self._wake()

    def _push(self, item: Item) -> None:
        if self._lagged:
            return
        if len(self._items) >= self.buffer_size:
            self._lagged = True
            self._items.clear()
        else:
            self._items.append(item)
        self._wake()

    def _abort(self, _: object) -> trio.lowlevel.Abort:
        self._reader = None
        return trio.lowlevel.Abort.SUCCEEDED

    async def receive_batch(self) -> list[Item]:
        """Wait for items and take all that are buffered, oldest first.

        Raises:
            Lagged: the buffer overflowed; nothing is lost in the store.
            trio.BusyResourceError: another task is waiting on this subscription.
        """
        while not self._items and not self._lagged:
            if self._reader is not None:
                raise trio.BusyResourceError("another task is already reading this subscription")
            self._reader = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort)
        if self._lagged:
            self._lagged = False
            raise Lagged()
        batch = list(self._items)
        self._items.clear()
        return batch


class EventBus:
    """Fan-out of job items to subscribers, by job and by account."""

    def __init__(self, *, buffer_size: int = DEFAULT_BUFFER) -> None:
        self.buffer_size = buffer_size
        """Items a new subscriber may fall behind before it must catch up from the store."""
        self._by_job: dict[str, set[Subscription]] = {}
        self._by_account: dict[str, set[Subscription]] = {}
        self._watchers: list[Callable[[str | None], None]] = []

    def watch(self, changed: Callable[[str | None], None]) -> None:
        """Call ``changed(job_id)`` whenever items of a job are published (its stored
        state changed: a new state, event or log line) or the job is nudged;
        ``changed(None)``: any job may have changed. It must not block."""
        self._watchers.append(changed)

    def publish(self, account_id: str, items: list[Item]) -> None:
        """Hand items (already persisted) to every subscriber; never blocks."""
        for item in items:
            for sub in self._by_job.get(item.job_id, ()):
                sub._push(item)
            if item.kind == "job":
                for sub in self._by_account.get(account_id, ()):
                    sub._push(item)
        if self._watchers:
            for job_id in {item.job_id for item in items}:
                for changed in self._watchers:
                    changed(job_id)

    def nudge(self, job_id: str, account_id: str) -> None:
        """Tell the job's and the account's subscribers to read the store: another
        process changed the job (they get :class:`Lagged` and catch up)."""
        for changed in self._watchers:
            changed(job_id)
        for sub in self._by_job.get(job_id, ()):
            sub._nudge()
        for sub in self._by_account.get(account_id, ()):
            sub._nudge()

    def nudge_all(self) -> None:
        """Nudge every subscriber (notices of other processes may have been missed)."""
        for changed in self._watchers:
            changed(None)
        for table in (self._by_job, self._by_account):
            for subs in table.values():
                for sub in subs:
                    sub._nudge()

    @contextmanager
    def subscribe(self, *, job_id: str | None = None,
                  account_id: str | None = None) -> Iterator[Subscription]:
        """Subscribe to one job's items, or to every job change of an account."""
        if (job_id is None) == (account_id is None):
            raise ValueError("subscribe to exactly one of job_id or account_id")
        table, key = (
            (self._by_job, job_id) if job_id is not None else (self._by_account, str(account_id))
        )
        sub = Subscription(self.buffer_size)
        table.setdefault(key, set()).add(sub)
        try:
            yield sub
        finally:
            subs = table.get(key)
            if subs is not None:
                subs.discard(sub)
                if not subs:
                    del table[key]

    def subscriber_count(self) -> int:
        """Subscriptions open right now (for metrics)."""
        return sum(len(s) for s in self._by_job.values()) + sum(
            len(s) for s in self._by_account.values())
