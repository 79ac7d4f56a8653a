"""A job as the API asks for it: created, read (from memory while this process owns it),
listed, its events and training log, paused and resumed, and cancelled, here or in the
process that owns it
(:meth:`alallo.Runtime.create_job`, :meth:`~alallo.Runtime.get_job` and their siblings)."""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Literal, cast

import trio

from actors import ActorRef, ActorStopped

from .._errors import InvalidTransition, NotFound, shown
from .._ids import new_id
from .._status import JobStatus
from ..cluster import Cluster
from ..jobs import (
    Event,
    Job,
    JobSpec,
    LogLine,
    Progress,
    estimate_price,
    estimate_time,
    lifecycle,
)
from ..store import JobCheckpoints, Store, read_item
from ._bus import EventBus, Lagged
from ._job_cache import LiveJobs
from ._job_messages import CancelJob, JobMessage, PauseJob, ResumeJob
from ._planning import NO_PLAN, Planning
from ._results import metrics_series
from ._starter import Starter
from ._wandb_keys import with_wandb_key

__all__ = ["CANCEL_TIMEOUT_S", "SEED_LIMIT", "Jobs"]

CANCEL_TIMEOUT_S = 30.0
"""How long a cancel request waits for the job's actor to take it."""
PAUSE_WAIT_S = 30.0
"""How long a pause request waits for a running job's trainer to save its checkpoint and stop
(it answers the job ``running``, ``Pausing: ...``, when that takes longer)."""
SEED_LIMIT = 2**31
"""A job created without a ``seed`` gets one drawn below this (OpenAI's range: a signed
32-bit integer, as ``JobSpec.seed`` takes)."""


class Jobs:
    """Every account's jobs, each seen only by its own account.

    Args:
        store: the jobs, their events and log.
        cluster: which jobs this process owns; cancel, pause and resume requests for the
            others.
        live_jobs: the owned jobs answered from memory.
        starter: starts a new job's actor; a cancel waits until the job's actor has started.
        bus: the runtime's event bus (a cancel elsewhere waits for the owner's change).
        actor: the running actor of a job, or None.
        planning: a new job's plan, steps and estimate.
        checkpoints: primed with a new job, so its actor starts without reading it back.
    """

    def __init__(self, *, store: Store, cluster: Cluster, live_jobs: LiveJobs, starter: Starter,
                 bus: EventBus, actor: Callable[[str], ActorRef[JobMessage] | None],
                 planning: Planning, checkpoints: JobCheckpoints) -> None:
        self._planning = planning
        self._checkpoints = checkpoints
        self._store = store
        self._cluster = cluster
        self._live_jobs = live_jobs
        self._starter = starter
        self._bus = bus
        self._actor = actor

    async def create(self, account_id: str, spec: JobSpec) -> Job:
        """Store a new job ``queued`` (``Starting``) and queue its actor's start.

        A job no node could ever run is stored too, and fails at once with ``Not available
        right now.`` (:data:`~alallo.runtime._planning.NO_PLAN`). Everything that can refuse
        the job runs before it is stored, and once stored it is answered (a runtime closing
        meanwhile leaves its start to the next process): a refused request stored nothing
        (docs/api.md, "Errors").

        Raises:
            InvalidRequest: an unknown model, training or validation file; too many steps;
                a W&B integration without a key, from an account that stored none.
        """
        spec = await with_wandb_key(self._store, account_id, spec)  # OpenAI's W&B form
        planned = await self._planning.plan(account_id, spec)
        spec, options, max_steps, start = (planned.spec, planned.options, planned.max_steps,
                                           planned.start)
        if spec.seed is None:  # drawn once, stored with the spec: every run trains with it
            spec = spec.model_copy(update={"seed": secrets.randbelow(SEED_LIMIT)})
        plan = options.pick(spec.goal) if options.options else NO_PLAN
        wait_s = await self._planning.wait_s(plan) if options.options else 0.0
        now = time.time()
        job = Job(
            id=new_id("ft-"), account_id=account_id, spec=spec,
            max_steps=max_steps, progress=Progress(max_steps=max_steps), plan=plan,
            options=options.options, verdict=options.verdict,
            estimate=estimate_time(plan, wait_s=wait_s), price_estimate=estimate_price(plan),
            created_at=int(now), init_from=start, steps_per_epoch=planned.steps_per_epoch,
            model_revision=(start.base_revision if start
                            else self._planning.model(spec.model).revision),
        )
        transition = lifecycle.apply(job, lifecycle.Created(now=now, warnings=planned.notes))
        job = transition.job
        await self._store.save_job(job, transition.events, insert=True,
                                   owner=self._cluster.node_id)
        self._cluster.hold(job.id, 1)
        self._checkpoints.prime([job])  # its actor starts from it without reading it back
        try:
            await self._starter.start(job)  # queued behind recovered jobs: not to overtake them
        except ActorStopped:
            # The runtime is closing. The job is stored, so it was accepted: the process that
            # opens the store next adopts it (its lease lapses). An error here would make a
            # client that retries create it twice.
            pass
        return job

    async def get_job(self, account_id: str, job_id: str) -> Job:
        """One of the account's jobs. Raises :class:`NotFound`.

        A job this process owns (its actor runs here under the job's lease)
        is answered from memory while the bus reports no change of it
        (:mod:`alallo.runtime._job_cache`); any other job is read from the store.
        """
        owned = self._cluster.owns(job_id)
        job = self._live_jobs.get(job_id) if owned else None
        if job is None:
            token = self._live_jobs.begin_read(job_id)
            job = None
            try:
                job = await self._store.get_job(job_id)
            finally:
                keep = job is not None and owned and self._cluster.owns(job_id)
                self._live_jobs.finish_read(job_id, token, job if keep else None)
        if job is None or job.account_id != account_id:
            raise NotFound(f"no job {shown(job_id)}", param="job_id")
        return job

    async def list_jobs(self, account_id: str, *, limit: int = 20, after: str | None = None,
                        metadata: Mapping[str, str] | None = None) -> tuple[list[Job], bool]:
        """The account's jobs, newest first, and whether more follow; with ``metadata``, only
        those whose metadata holds each of its pairs (:data:`alallo.store.NULL_METADATA`:
        those without metadata; :meth:`Store.list_jobs`)."""
        return await self._store.list_jobs(account_id, limit=limit, after=after,
                                           metadata=metadata)

    async def cancel_job(self, account_id: str, job_id: str) -> Job:
        """Ask a job to stop; returns it ``cancelling`` (or already ``cancelled``).

        Idempotent while the job is live.

        Raises:
            NotFound: no such job in the account.
            InvalidTransition: the job has already finished (409).
        """
        job = await self.get_job(account_id, job_id)
        if not job.status.is_final:
            await self._starter.wait_started(job_id)
            ref = self._actor(job_id)
            if ref is not None:
                try:
                    return cast(Job, await ref.ask(CancelJob(), timeout=CANCEL_TIMEOUT_S))
                except ActorStopped:
                    pass  # the job ended meanwhile: answer from what the store says
            elif not self._cluster.owns(job_id):
                return await self._cancel_elsewhere(account_id, job_id)
            job = await self.get_job(account_id, job_id)
        lifecycle.apply(job, lifecycle.CancelRequested(now=time.time()))  # refuses a final job
        return job

    async def pause_job(self, account_id: str, job_id: str) -> Job:
        """Pause a job: a queued one at once, a running one once its trainer has saved a
        checkpoint at its current step and stopped (waited for up to :data:`PAUSE_WAIT_S`);
        it frees its capacity and costs nothing until resumed. Idempotent.

        Returns:
            The job ``paused`` (message ``Paused at step N. Resume it ...``), or ``running``
            with ``Pausing: saving a checkpoint`` when the trainer takes longer; or the state
            a race ended it in (``succeeded`` when it finished first).

        Raises:
            NotFound: no such job in the account.
            InvalidTransition: the job has finished or is being cancelled (409).
        """
        with self._bus.subscribe(job_id=job_id) as subscription:
            job = await self._ask(account_id, job_id, PauseJob(), lifecycle.PauseRequested)
            with trio.move_on_after(PAUSE_WAIT_S):
                while job.pause_requested:
                    with contextlib.suppress(Lagged):
                        await subscription.receive_batch()
                    job = await self.get_job(account_id, job_id)
        return job

    async def resume_job(self, account_id: str, job_id: str) -> Job:
        """Queue a paused job again; it continues from the checkpoint it was paused at.

        Raises:
            NotFound: no such job in the account.
            InvalidTransition: the job is not paused (409): live, pausing still, or finished.
        """
        return await self._ask(account_id, job_id, ResumeJob(), lifecycle.ResumeRequested)

    async def _ask(self, account_id: str, job_id: str, message: PauseJob | ResumeJob,
                   refusal: type[lifecycle.PauseRequested | lifecycle.ResumeRequested]) -> Job:
        """Ask the job's actor to pause or resume it; the job after the request."""
        job = await self.get_job(account_id, job_id)
        if not job.status.is_final:
            await self._starter.wait_started(job_id)
            ref = self._actor(job_id)
            if ref is not None:
                try:
                    return cast(Job, await ref.ask(message, timeout=CANCEL_TIMEOUT_S))
                except ActorStopped:
                    pass  # the job ended meanwhile: answer from what the store says
            elif not self._cluster.owns(job_id):
                return await self._pause_elsewhere(account_id, job, message)
            job = await self.get_job(account_id, job_id)
        lifecycle.apply(job, refusal(now=time.time()))  # refuses a final job
        return job

    async def _pause_elsewhere(self, account_id: str, job: Job,
                               message: PauseJob | ResumeJob) -> Job:
        """Pause or resume a job another process owns: record the request (it survives that
        process) and, on PostgreSQL, wait (bounded) until the owner has taken it; the job as
        it then is (``paused`` or pausing, ``queued`` or on; or how a race ended it).

        Raises:
            InvalidTransition: the job has finished, is being cancelled (a cancel asked through
                any process wins), or (resume) is not paused (409).
        """
        pause = isinstance(message, PauseJob)
        request: Literal["pause", "resume"] = "pause" if pause else "resume"
        asked = (lifecycle.PauseRequested if pause else lifecycle.ResumeRequested)(
            now=time.time())
        if not lifecycle.apply(job, asked).changed:  # refuses as the owner would
            return job  # paused or pausing already

        def taken(job: Job) -> bool:
            if pause:
                return job.pause_requested or job.status.is_final or job.status in (
                    JobStatus.PAUSED, JobStatus.CANCELLING)
            return job.status is not JobStatus.PAUSED

        with self._bus.subscribe(job_id=job.id) as subscription:
            recorded = await self._cluster.request_pause(job.id, request)
            job = await self.get_job(account_id, job.id)
            if not recorded:
                lifecycle.apply(job, asked)  # refuses a job that ended meanwhile
                raise InvalidTransition(f"cannot {request} {shown(job.id)}: "
                                        "it is being cancelled")
            if self._store.is_postgres:
                with trio.move_on_after(CANCEL_TIMEOUT_S):
                    while not taken(job):
                        with contextlib.suppress(Lagged):
                            await subscription.receive_batch()
                        job = await self.get_job(account_id, job.id)
        return job

    async def _cancel_elsewhere(self, account_id: str, job_id: str) -> Job:
        """Cancel a job another process owns: record the request (it survives that process)
        and, on PostgreSQL, wait (bounded) until the owner has taken it."""
        with self._bus.subscribe(job_id=job_id) as subscription:
            await self._cluster.request_cancel(job_id)
            job = await self.get_job(account_id, job_id)
            if self._store.is_postgres:
                with trio.move_on_after(CANCEL_TIMEOUT_S):
                    while not (job.status is JobStatus.CANCELLING or job.status.is_final):
                        with contextlib.suppress(Lagged):
                            await subscription.receive_batch()
                        job = await self.get_job(account_id, job_id)
        if job.status is JobStatus.CANCELLED:
            return job  # the owner took the request and is done: a queued job stops at once
        lifecycle.apply(job, lifecycle.CancelRequested(now=time.time()))  # refuses a final job
        return job

    async def list_events(self, account_id: str, job_id: str, *, after: int = 0,
                          limit: int = 100) -> tuple[list[Event], bool]:
        """A job's events, oldest first, with ``seq > after``; and whether more follow."""
        await self.get_job(account_id, job_id)
        rows = await self._store.items_after(job_id, after, kinds=("event",), limit=limit + 1)
        events = [event for _, _, data in rows[:limit]
                  if (event := read_item(Event, data, job_id=job_id)) is not None]
        return events, len(rows) > limit

    async def read_log(self, account_id: str, job_id: str, *, after: int = 0,
                       limit: int = 1000, attempt: int | None = None,
                       ) -> tuple[list[LogLine], bool]:
        """The training log of the current (or the given) attempt, oldest line first."""
        job = await self.get_job(account_id, job_id)
        rows = await self._store.items_after(job_id, after, kinds=("log",),
                                            attempt=attempt or max(job.attempt, 1),
                                            limit=limit + 1)
        lines = [line for _, _, data in rows[:limit]
                 if (line := read_item(LogLine, data, job_id=job_id)) is not None]
        return lines, len(rows) > limit

    async def list_metrics(self, account_id: str, job_id: str, *, after: int = 0,
                           ) -> list[dict[str, float | int | None]]:
        """The job's metrics series, one row per step with ``step > after``, in step order
        (:func:`alallo.runtime._results.metrics_series`). Raises :class:`NotFound`."""
        await self.get_job(account_id, job_id)
        return await metrics_series(self._store, job_id, after=after)
