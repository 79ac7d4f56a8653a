"""What a follower of a job or of an account reads: the store's backlog, then live updates
from the bus, with no gap and no repeat (:meth:`alallo.Runtime.stream`,
:meth:`alallo.Runtime.stream_jobs`; the gateway's SSE and WebSocket serve these)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from .. import api
from .._status import JobStatus
from ..jobs import Event, Job, LogLine, MetricsPoint
from ..store import Store, read_item
from ._bus import EventBus, Item, Lagged
from ._views import event_view, job_view, log_line_view, metrics_view

__all__ = ["FEED_PAGE", "Streams"]

FEED_PAGE = 500
"""Jobs read from the account's feed at a time."""
BACKLOG_PAGE = 500
"""A job's stored items read at a time when a follower catches up: a follower that reads
slowly holds one page, not the job's whole history (a WebSocket following one job 200 times
held 200 copies of its log)."""

_FINAL = frozenset(status.value for status in JobStatus if status.is_final)


class Streams:
    """A job's items and an account's job feed, for one runtime.

    Args:
        store: where the backlog is read.
        bus: the runtime's event bus.
        get_job: the runtime's ``get_job(account_id, job_id)`` (it answers owned jobs from
            memory and raises :class:`alallo.NotFound` for another account's).
    """

    def __init__(self, store: Store, bus: EventBus,
                 get_job: Callable[[str, str], Awaitable[Job]]) -> None:
        self._store = store
        self._bus = bus
        self._get_job = get_job

    async def stream(self, account_id: str, job_id: str, *, after: int = 0,
                     ) -> AsyncIterator[Item]:
        """Every update of a job with ``seq > after``, in order, until it ends.

        Yields ``job`` items (the whole job object), ``event`` items, ``log``
        items and ``metrics`` items (the figures of one report of the trainer). What happened before the call comes from the store
        (only the latest job state, not every intermediate one); then live
        updates follow from the bus with no gap and no repeat. Ends after the
        job's final state.

        Raises:
            NotFound: no such job in the account.
        """
        async for batch in self.stream_batches(account_id, job_id, after=after):
            for item in batch:
                yield item

    async def stream_batches(self, account_id: str, job_id: str, *, after: int = 0,
                             ) -> AsyncIterator[list[Item]]:
        """:meth:`stream`, a list at a time: the items that were ready together.

        Each list is non-empty and in ``seq`` order; the backlog from the
        store comes in lists of up to :data:`BACKLOG_PAGE` items, then each list holds
        what the bus had buffered for this subscriber (the gateway sends a list as one
        chunk).

        Raises:
            NotFound: no such job in the account.
        """
        await self._get_job(account_id, job_id)
        cursor = after
        while True:
            with self._bus.subscribe(job_id=job_id) as subscription:
                job = await self._get_job(account_id, job_id)
                state = (Item(job_id, "job", job.state_seq, job_view(job, now=time.time()))
                         if job.state_seq > cursor else None)
                while True:  # the backlog, a page at a time, the job's state in its place
                    rows = await self._store.items_after(
                        job_id, cursor, kinds=("event", "log", "metrics"), limit=BACKLOG_PAGE)
                    page = [Item(job_id, kind, seq, public) for kind, seq, data in rows
                            if (public := _public_item(job_id, kind, data)) is not None]
                    more = len(rows) == BACKLOG_PAGE
                    if state is not None and (not more or state.seq <= rows[-1][1]):
                        page.append(state)
                        page.sort(key=lambda item: item.seq)
                        state = None
                    if page:
                        yield page
                    # past the page's last row, shown or not, and the job's state if sent
                    cursor = max(cursor, rows[-1][1] if rows else 0, page[-1].seq if page else 0)
                    if not more:
                        break
                if job.status.is_final and cursor >= job.state_seq:
                    return
                try:
                    while True:
                        batch = _live(await subscription.receive_batch(), cursor)
                        if batch:
                            yield batch
                            cursor = batch[-1].seq
                            last = batch[-1]
                            if last.kind == "job" and last.data["status"] in _FINAL:
                                return
                except Lagged:
                    continue

    async def stream_jobs(self, account_id: str, *, after: int = 0) -> AsyncIterator[Item]:
        """Every job of the account whose state changed past feed position ``after``; never ends.

        Yields ``job`` items whose ``seq`` is the job's position in the
        account's feed (not the job's own sequence number, which is
        ``data["seq"]``): resuming with the last position seen gives each job
        that changed since, once, in its latest state. ``after=0`` starts
        with every job of the account. The bus only wakes the reader; what it
        yields is always read from the store, so a reader that lagged loses
        nothing and never sees a state twice.
        """
        cursor = after
        with self._bus.subscribe(account_id=account_id) as subscription:
            while True:
                while True:
                    rows = await self._store.job_feed_after(account_id, cursor, limit=FEED_PAGE)
                    now = time.time()
                    for position, job in rows:
                        yield Item(job.id, "job", position, job_view(job, now=now))
                        cursor = position
                    if len(rows) < FEED_PAGE:
                        break
                try:
                    await subscription.receive_batch()
                except Lagged:
                    pass

    async def wait_for_final(self, account_id: str, job_id: str) -> Job:
        """Wait until the job reaches a final status and return it.

        Raises:
            NotFound: no such job in the account.
        """
        async for _ in self.stream(account_id, job_id, after=0):
            pass
        return await self._get_job(account_id, job_id)


def _live(items: list[Item], cursor: int) -> list[Item]:
    """The items (in ``seq`` order) past ``cursor``, up to and including a final job state;
    ``items`` itself when that is all of them (the common case: nothing is copied)."""
    start = 0
    while start < len(items) and items[start].seq <= cursor:
        start += 1
    end = start
    for item in items[start:] if start else items:
        end += 1
        if item.kind == "job" and item.data["status"] in _FINAL:
            break
    return items if start == 0 and end == len(items) else items[start:end]


def _public_item(job_id: str, kind: str, data: dict[str, Any],
                 ) -> api.JobEvent | api.TrainingLogLine | api.JobMetrics | None:
    if kind == "event":
        event = read_item(Event, data, job_id=job_id)
        return event_view(event, job_id) if event is not None else None
    if kind == "metrics":
        point = read_item(MetricsPoint, data, job_id=job_id)
        return metrics_view(point) if point is not None else None
    line = read_item(LogLine, data, job_id=job_id)
    return log_line_view(line) if line is not None else None
