"""`JobWriter`: a job's changes committed under its lease, then published (DESIGN.md rules 1, 3).

The job's actor writes through one for as long as it runs. When the actor is gone for good
(its supervisor gave it up), the runtime writes the job's failure through a fresh one: the
actor's last committed state is the one it starts from, so the one-writer rule holds.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import structlog

from ..cluster import Cluster
from ..jobs import Event, Job, LogLine, MetricsPoint
from ..store import LeaseLost, Store
from ._bus import EventBus, Item
from ._job_cache import LiveJobs
from ._views import event_view, job_view, log_line_view, metrics_view

if TYPE_CHECKING:
    from ..jobs import LedgerEntry

__all__ = ["JobWriter"]

log = structlog.get_logger("alallo.job")


class JobWriter:
    """Commits one job's states, events, log lines and ledger entries, then publishes them.

    Args:
        store: where the changes are committed.
        cluster: the leases; a change is written with the job's lease epoch (its fencing token).
        live_jobs: the jobs answered from memory, told a write is under way.
        bus: the event bus the changes are published on.
        published_state_seq: The job state already published (its ``state_seq``); a state is
            published again only when it is newer.
    """

    def __init__(self, store: Store, cluster: Cluster, live_jobs: LiveJobs,
                 bus: EventBus, published_state_seq: int = 0) -> None:
        self._store = store
        self._cluster = cluster
        self._live_jobs = live_jobs
        self._bus = bus
        self.published_state_seq = published_state_seq

    async def write(self, job: Job, events: tuple[Event, ...] = (),
                    lines: tuple[LogLine | MetricsPoint, ...] = (),
                    entries: tuple[LedgerEntry, ...] = ()) -> tuple[float, float]:
        """Commit under the job's lease, then publish on the bus; the account's money after.

        Returns:
            ``(balance, billing_limit)`` of the job's account after the commit, in USD.

        Raises:
            LeaseLost: this process does not hold the job's lease (nothing written).
            StoreUnavailable: the store failed (nothing published).
        """
        epoch = self._cluster.epoch_of(job.id)
        if epoch is None:
            raise LeaseLost(job.id, 0)
        live = self._live_jobs
        live.begin_write(job.id)  # from before the commit until the bus has it
        try:
            balance = await self._store.save_job(job, events, lines, entries, epoch=epoch)
            items = [Item(job.id, "event", e.seq, event_view(e, job.id)) for e in events]
            items += [Item(job.id, "log", line.n, log_line_view(line)) if isinstance(line, LogLine)
                      else Item(job.id, "metrics", line.n, metrics_view(line)) for line in lines]
            if job.state_seq > self.published_state_seq:
                items.append(Item(job.id, "job", job.state_seq, job_view(job, now=time.time())))
                self.published_state_seq = job.state_seq
            items.sort(key=lambda item: item.seq)
            self._bus.publish(job.account_id, items)
        finally:
            live.end_write(job.id)
        for e in events:
            log.info("job.event", job_id=job.id, type=e.type.value, seq=e.seq)
        return balance
