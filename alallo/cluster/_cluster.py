"""Many processes as one service: the node registry, job leases, and adoption.

Every runtime (an ``alallo serve`` process or an embedded one) registers a
*node* in the store and heartbeats it every ``heartbeat_interval_s``. Each
live job is owned by one node through a *lease*: ``jobs.owner`` and
``jobs.epoch``. The epoch is a fencing token (Martin Kleppmann, "How to do
distributed locking", 2016): acquiring a lease increments it, the owner
writes the job only with the epoch it acquired, and the store refuses a
write whose epoch is stale (:class:`alallo.store.LeaseLost`). A lease lives
as long as its owner's heartbeat: renewing every lease of a process is one
statement per heartbeat, however many jobs it runs.

A lease has expired when its owner's last heartbeat is older than
``lease_ttl_s`` (by the database's clock, so the machines' clocks do not
matter), when it has no owner (a process that stopped cleanly gives its
jobs up), or when its owner is a process of this host that no longer runs
(a server restarted after ``kill -9`` takes its jobs back at once). Every
node claims expired leases at start and then every heartbeat, in one
compare-and-set statement per scan, and relocates the jobs from their latest
checkpoint: the same path as crash recovery (:class:`alallo.runtime._job_actor.JobActor`).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import sqlalchemy as sa
import structlog
import trio

from ..store import LIVE_STATUSES, Store, schema

jobs, nodes = schema.jobs, schema.nodes  # the store's tables this module's SQL reads and writes
__all__ = ["ADOPTED_CAUSE", "Claim", "Cluster"]

ADOPTED_CAUSE = "the process that ran it stopped"
"""The cause JOB_RESTARTED names when another process adopted the job."""

log = structlog.get_logger("alallo.cluster")

_HERE: set[str] = set()
"""Nodes registered by this process and not yet left (embedded runtimes may be several)."""


@dataclass(frozen=True)
class Claim:
    """A lease this node acquired: the job, its new epoch, whose it was."""

    job_id: str
    epoch: int
    previous_owner: str | None
    cancel_requested: bool


def _db_now(connection: sa.Connection) -> sa.ColumnElement[float]:
    """The database's clock in seconds since the Unix epoch (one clock for every machine)."""
    if connection.dialect.name == "postgresql":
        return sa.cast(sa.extract("epoch", sa.func.clock_timestamp()), sa.Float)
    return sa.literal_column("((julianday('now') - 2440587.5) * 86400.0)", sa.Float)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


class Cluster:
    """This process's node: its registration, heartbeat, leases, and adoption scans.

    Args:
        store: the shared store (its schema has ``nodes`` and the lease columns).
        heartbeat_interval_s: seconds between heartbeats (and adoption scans).
        lease_ttl_s: a lease expires when its owner has not heartbeat for this long.
        address: the gateway's address, for operators (``None`` when embedded).
    """

    def __init__(self, store: Store, *, heartbeat_interval_s: float, lease_ttl_s: float,
                 address: str | None = None) -> None:
        self.store = store
        self.node_id = "node-" + uuid.uuid4().hex[:16]
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.address = address
        self.heartbeat_interval_s = heartbeat_interval_s
        self.lease_ttl_s = lease_ttl_s
        self._epochs: dict[str, int] = {}
        self._cancels: set[str] = set()

    # -- this node's leases ----------------------------------------------------

    def epoch_of(self, job_id: str) -> int | None:
        """The epoch this node holds the job's lease with, or None (not ours)."""
        return self._epochs.get(job_id)

    def hold(self, job_id: str, epoch: int) -> None:
        """Record a lease acquired (a job created here gets epoch 1)."""
        self._epochs[job_id] = epoch

    def drop(self, job_id: str) -> None:
        """Forget a lease: the job ended, or another node took it."""
        self._epochs.pop(job_id, None)
        self._cancels.discard(job_id)

    def owns(self, job_id: str) -> bool:
        """Whether this node holds the job's lease (as far as it knows)."""
        return job_id in self._epochs

    def take_cancel_request(self, job_id: str) -> bool:
        """Whether a cancel was asked through another node before this one adopted the job."""
        if job_id in self._cancels:
            self._cancels.discard(job_id)
            return True
        return False

    # -- the registry --------------------------------------------------------

    async def register(self) -> None:
        """Insert this node, and expire the nodes of this host whose process is gone.

        Raises:
            StoreUnavailable: the database failed.
        """
        def run(c: sa.Connection) -> list[str]:
            now = c.execute(sa.select(_db_now(c))).scalar_one()
            c.execute(nodes.insert().values(id=self.node_id, host=self.host, pid=self.pid,
                                            address=self.address, started_at=now,
                                            heartbeat_at=now))
            rows = c.execute(sa.select(nodes.c.id, nodes.c.pid).where(
                nodes.c.host == self.host, nodes.c.id != self.node_id,
                nodes.c.heartbeat_at > 0)).all()
            # A node of this host whose pid is gone (or is ours but not of this
            # process: a container restarted with the same pid) died; its leases expire now.
            dead = [node for node, pid in rows
                    if (node not in _HERE if pid == self.pid else not _pid_alive(pid))]
            if dead:
                c.execute(nodes.update().where(nodes.c.id.in_(dead)).values(heartbeat_at=0.0))
            return dead
        dead = await self.store.transaction(run)
        _HERE.add(self.node_id)
        log.info("cluster.registered", node=self.node_id, host=self.host, pid=self.pid,
                 expired=dead)

    async def set_address(self, address: str) -> None:
        """Record where this node's gateway answers (known once it has bound its port)."""
        self.address = address

        def run(c: sa.Connection) -> None:
            c.execute(nodes.update().where(nodes.c.id == self.node_id).values(address=address))
        await self.store.transaction(run)

    async def heartbeat(self) -> None:
        """Renew this node's heartbeat, and so every lease it holds (one statement)."""
        def run(c: sa.Connection) -> None:
            c.execute(nodes.update().where(nodes.c.id == self.node_id)
                      .values(heartbeat_at=_db_now(c)))
        await self.store.transaction(run, queue=False)

    async def leave(self) -> None:
        """Give up every lease and the node (a clean stop): others adopt the jobs at once."""
        def run(c: sa.Connection) -> None:
            c.execute(jobs.update().where(jobs.c.owner == self.node_id).values(owner=None))
            c.execute(nodes.delete().where(nodes.c.id == self.node_id))
        await self.store.transaction(run)
        self._epochs.clear()
        _HERE.discard(self.node_id)

    async def claim_expired(self) -> list[Claim]:
        """Acquire the lease of every live job whose lease expired, oldest job first.

        One ``UPDATE ... RETURNING`` whose condition is re-checked on each row
        as it is written (a compare-and-set: of two nodes scanning at once,
        one gets each job; the other finds its owner alive).

        Raises:
            StoreUnavailable: the database failed.
        """
        def run(c: sa.Connection) -> list[Claim]:
            cutoff = _db_now(c) - self.lease_ttl_s
            alive = sa.select(nodes.c.id).where(nodes.c.heartbeat_at >= cutoff)
            candidates = c.execute(
                sa.select(jobs.c.id, jobs.c.owner).where(
                    jobs.c.status.in_(LIVE_STATUSES),
                    sa.or_(jobs.c.owner.is_(None), jobs.c.owner.not_in(alive)))
            ).all()
            if not candidates:
                return []
            previous = dict(candidates)
            claimed = c.execute(
                jobs.update().where(
                    jobs.c.id.in_(list(previous)), jobs.c.status.in_(LIVE_STATUSES),
                    sa.or_(jobs.c.owner.is_(None), jobs.c.owner.not_in(alive)))
                .values(owner=self.node_id, epoch=jobs.c.epoch + 1)
                .returning(jobs.c.id, jobs.c.epoch, jobs.c.number, jobs.c.cancel_requested)
            ).all()
            return [Claim(job_id, int(epoch), previous.get(job_id), bool(cancel))
                    for job_id, epoch, _, cancel in sorted(claimed, key=lambda r: r[2])]
        claims = await self.store.transaction(run)
        for claim in claims:
            self._epochs[claim.job_id] = claim.epoch
            if claim.cancel_requested:
                self._cancels.add(claim.job_id)
        return claims

    async def owned_cancel_requests(self) -> list[str]:
        """Live jobs of this node with a cancel asked through another node (after a lost notice)."""
        def run(c: sa.Connection) -> list[str]:
            return list(c.execute(sa.select(jobs.c.id).where(
                jobs.c.owner == self.node_id, jobs.c.cancel_requested,
                jobs.c.status.in_(LIVE_STATUSES))).scalars())
        return await self.store.transaction(run)

    async def request_cancel(self, job_id: str) -> None:
        """Record a cancel for the job's owner, and tell it (``pg_notify`` on commit)."""
        def run(c: sa.Connection) -> None:
            c.execute(jobs.update().where(jobs.c.id == job_id).values(cancel_requested=True))
            if c.dialect.name == "postgresql":
                c.execute(sa.select(sa.func.pg_notify(
                    "alallo", f"c {self.node_id} {job_id} -")))
        await self.store.transaction(run)

    async def request_pause(self, job_id: str, request: Literal["pause", "resume"]) -> bool:
        """Record a pause or a resume for the job's owner (the latest asked wins), and tell
        it (``pg_notify`` on commit, a ``p`` notice).

        Returns:
            False, recording nothing, when the job has ended or a cancel of it was asked
            through another node (a cancel wins over a pause).
        """
        def run(c: sa.Connection) -> bool:
            done = c.execute(jobs.update().where(
                jobs.c.id == job_id, jobs.c.status.in_(LIVE_STATUSES),
                sa.not_(jobs.c.cancel_requested)).values(pause_request=request)).rowcount
            if done and c.dialect.name == "postgresql":
                c.execute(sa.select(sa.func.pg_notify(
                    "alallo", f"p {self.node_id} {job_id} -")))
            return bool(done)
        return await self.store.transaction(run)

    async def owned_pause_requests(self, job_ids: list[str] | None = None,
                                   ) -> list[tuple[str, str, bool]]:
        """This node's live jobs (of ``job_ids``, or all) with a pause or resume asked through
        another node: ``(job id, "pause" or "resume", whether a cancel was asked too)``."""
        def run(c: sa.Connection) -> list[tuple[str, str, bool]]:
            query = sa.select(jobs.c.id, jobs.c.pause_request, jobs.c.cancel_requested).where(
                jobs.c.owner == self.node_id, jobs.c.pause_request.is_not(None),
                jobs.c.status.in_(LIVE_STATUSES))
            if job_ids is not None:
                query = query.where(jobs.c.id.in_(job_ids))
            return [(job_id, str(request), bool(cancel))
                    for job_id, request, cancel in c.execute(query.order_by(jobs.c.number))]
        return await self.store.transaction(run)

    async def clear_pause_request(self, job_id: str, request: str) -> None:
        """Forget a pause or resume request the owner has taken (not one asked since)."""
        def run(c: sa.Connection) -> None:
            c.execute(jobs.update().where(jobs.c.id == job_id,
                                          jobs.c.pause_request == request)
                      .values(pause_request=None))
        await self.store.transaction(run)

    async def run(self, adopt: Callable[[list[Claim]], Awaitable[None]]) -> None:
        """Heartbeat, and adopt expired leases, forever (a background task).

        The heartbeat has a task of its own, so that adopting many jobs
        (which takes a while) never delays it past this node's own lease.
        A failed heartbeat or scan (the database is away) is logged and tried
        again at the next beat; the leases then expire elsewhere, and the
        fencing tokens stop this node's actors at their next write.
        """
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._beat)
            while True:
                await trio.sleep(self.heartbeat_interval_s)
                started = time.monotonic()
                try:
                    claims = await self.claim_expired()
                except Exception as exc:  # noqa: BLE001 - the next scan tries again
                    log.warning("cluster.scan_failed", node=self.node_id, error=str(exc))
                    continue
                if claims:
                    log.info("cluster.adopted", node=self.node_id, jobs=len(claims),
                             from_nodes=sorted({c.previous_owner or "-" for c in claims}),
                             scan_s=round(time.monotonic() - started, 3))
                    await adopt(claims)

    async def _beat(self) -> None:
        while True:
            await trio.sleep(self.heartbeat_interval_s)
            try:
                await self.heartbeat()
            except Exception as exc:  # noqa: BLE001 - the next beat tries again
                log.warning("cluster.heartbeat_failed", node=self.node_id, error=str(exc))
