"""Jobs that move: those whose leases lapsed (recovered at start, adopted from a stopped
process, :mod:`alallo.cluster._cluster`), those on a node being drained, and the cancel, pause
and resume requests that reach a job's owner through the store (on PostgreSQL, a NOTIFY:
:mod:`alallo.runtime._notify`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import cast

import trio

from actors import ActorError, ActorRef, ActorStopped

from .._errors import InvalidTransition, NotFound
from ..capacity import Drain, Pool, SchedulerMessage
from ..cluster import ADOPTED_CAUSE, Claim, Cluster
from ..store import JobCheckpoints, Store, StoreUnavailable
from ._bus import EventBus
from ._job_messages import CancelJob, JobMessage, PauseJob, RescheduleJob, ResumeJob
from ._notify import listen
from ._planning import SCHEDULER_ASK_S
from ._starter import Starter
from ._training_files import TrainingFiles

__all__ = ["Relocation"]

PAUSE_ASK_S = 30.0
"""How long a pause or resume asked through another process waits for the job's actor."""


class Relocation:
    """Starts the actors of jobs this process took over, and hands them the cancels, pauses
    and resumes asked through other processes.

    Args:
        store: the jobs to start, read in bulk.
        cluster: leases, heartbeats and cancel requests.
        bus: the runtime's event bus (the LISTEN connection publishes other processes'
            changes there).
        starter: the one way a job's actor starts (:mod:`alallo.runtime._starter`).
        files: the training files' rows, read in bulk for the jobs started.
        checkpoints: primed with each job started, so its actor reads nothing back.
        actor: the running actor of a job, or None.
        pool: the nodes (a drained one must be one of them).
        scheduler: the scheduler actor, None while the runtime is closed.
    """

    def __init__(self, *, store: Store, cluster: Cluster, bus: EventBus,
                 starter: Starter, files: TrainingFiles, checkpoints: JobCheckpoints,
                 actor: Callable[[str], ActorRef[JobMessage] | None], pool: Pool,
                 scheduler: Callable[[], ActorRef[SchedulerMessage] | None]) -> None:
        self._pool = pool
        self._scheduler = scheduler
        self._store = store
        self._cluster = cluster
        self._bus = bus
        self._starter = starter
        self._files = files
        self._checkpoints = checkpoints
        self._actor = actor
        self._tasks: trio.Nursery | None = None
        """Where requests taken from the store are handed on (open while :meth:`services` runs)."""

    async def drain_node(self, name: str, *, on: bool = True) -> list[str]:
        """Stop placing jobs on a node and move the jobs running there, each from its
        checkpoint (``on=False`` opens it again). Returns the ids of the jobs moved.

        Raises:
            NotFound: no such node (``param="node"``).
        """
        scheduler = self._scheduler()
        if scheduler is None or name not in self._pool.nodes:
            raise NotFound(f"no node {name!r}", param="node")
        moved = cast(list[str], await scheduler.ask(Drain(name, on=on), timeout=SCHEDULER_ASK_S))
        if not on:
            return []
        for job_id in moved:
            if (ref := self._actor(job_id)) is not None:
                with contextlib.suppress(ActorStopped):
                    await ref.tell(RescheduleJob(f"node {name} is draining"))
        return moved

    async def recover(self) -> None:
        """Claim the jobs whose leases lapsed (this process's, at start) and start them in
        the background; the runtime serves meanwhile."""
        await self.queue_starts([claim.job_id for claim in await self._cluster.claim_expired()])

    @contextlib.asynccontextmanager
    async def services(self) -> AsyncIterator[None]:
        """Heartbeat and adoption, and on PostgreSQL the LISTEN of other processes' changes,
        while the block runs."""
        async with trio.open_nursery() as nursery:
            self._tasks = nursery
            if self._store.is_postgres:
                await nursery.start(partial(
                    listen, self._store.url, self._cluster.node_id, self._bus,
                    on_cancel=partial(self._on_cancel_notice, nursery),
                    on_pause=self._on_pause_notice,
                    on_connected=partial(nursery.start_soon, self._cancel_requested_jobs)))
            else:  # no notices: the requests recorded before this process started
                nursery.start_soon(self.take_pause_requests)
            nursery.start_soon(self._cluster.run, self.adopt)
            try:
                yield
            finally:
                self._tasks = None
                nursery.cancel_scope.cancel()

    async def adopt(self, claims: list[Claim]) -> None:
        """Run the jobs whose leases this process took from a stopped one."""
        fresh = []
        for claim in claims:
            if self._starter.idle(claim.job_id):
                fresh.append(claim.job_id)
            elif self._cluster.take_cancel_request(claim.job_id):
                # Its actor runs here still (this process's heartbeat was late): it
                # writes with the new epoch now, and takes the cancel asked meanwhile.
                await self.tell_cancel(claim.job_id)
        await self.queue_starts(fresh, cause=ADOPTED_CAUSE)
        if claims and self._tasks is not None:  # a pause or resume asked of the stopped owner
            self._tasks.start_soon(self.take_pause_requests, [c.job_id for c in claims])

    async def queue_starts(self, job_ids: list[str], cause: str | None = None) -> None:
        """Start the actors of these jobs in the background, oldest first (recovery, adoption).

        The jobs and their files are read in two queries and the checkpoint
        store is primed with them, so no store read happens per job. Requests
        for a job whose actor has not started yet read the store as usual; a
        cancel waits for its actor (:meth:`Starter.wait_started`). A job whose
        actor is running or on its way already is left alone (:class:`Starter`).
        """
        job_ids = [job_id for job_id in job_ids if self._starter.idle(job_id)]
        if not job_ids:
            return
        jobs = await self._store.jobs_by_id(job_ids)
        await self._files.recall_many(file for job in jobs for file in (
            job.spec.training_file, job.spec.validation_file) if file)
        for job in jobs:
            if self._starter.request(job, cause):  # primed only for a start that will read it
                self._checkpoints.prime([job])

    async def tell_cancel(self, job_id: str) -> None:
        """Hand a cancel request to the job's actor, once it has started."""
        await self._starter.wait_started(job_id)
        ref = self._actor(job_id)
        if ref is not None:
            with contextlib.suppress(ActorStopped):
                await ref.tell(CancelJob())

    async def take_pause_requests(self, job_ids: list[str] | None = None) -> None:
        """Hand the pauses and resumes asked through other processes of this process's jobs
        (of ``job_ids``, or all) to their actors, once started, and forget each one taken.

        A request the actor refuses (a resume of a job that is not paused, a pause of one
        being cancelled) is forgotten too: the process that recorded it has answered already.
        A job with a cancel asked is not paused (the cancel wins; it comes its own way).
        """
        with contextlib.suppress(StoreUnavailable):
            for job_id, request, cancelled in await self._cluster.owned_pause_requests(job_ids):
                if not cancelled:
                    await self._starter.wait_started(job_id)
                    ref = self._actor(job_id)
                    if ref is None:
                        continue  # not running here (any more): its next owner takes it
                    message = PauseJob() if request == "pause" else ResumeJob()
                    with contextlib.suppress(ActorError, InvalidTransition):
                        await ref.ask(message, timeout=PAUSE_ASK_S)
                await self._cluster.clear_pause_request(job_id, request)

    def _on_pause_notice(self, job_id: str) -> None:
        if self._cluster.owns(job_id) and self._tasks is not None:
            self._tasks.start_soon(self.take_pause_requests, [job_id])

    def _on_cancel_notice(self, nursery: trio.Nursery, job_id: str) -> None:
        if self._cluster.owns(job_id):
            nursery.start_soon(self.tell_cancel, job_id)

    async def _cancel_requested_jobs(self) -> None:
        # A notice sent while this process was not listening: its request is in the store.
        with contextlib.suppress(StoreUnavailable):
            for job_id in await self._cluster.owned_cancel_requests():
                await self.tell_cancel(job_id)
        await self.take_pause_requests()
