"""The supervisor of job actors: where each job's actor and the scheduler run, restart and
are found (Erlang/OTP's supervision tree, as :mod:`actors` builds it)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Protocol

from actors import (
    ActorRef,
    Restart,
    Supervisor,
    SupervisorStatistics,
    open_supervisor,
)

from ..capacity import Pool, Scheduler, SchedulerMessage
from ..jobs import Job
from ..store import JobCheckpoints
from ._job_actor import JobActor
from ._job_context import JobContext
from ._job_messages import JobMessage
from ._starter import JOB_ACTOR_BACKOFF, JOB_ACTOR_INTENSITY, JOB_RESTART_INTENSITY

__all__ = ["FileRecall", "JobActors"]


class FileRecall(Protocol):
    """Reads a training file's row before a job's actor starts (:class:`TrainingFiles` does)."""

    async def recall(self, account_id: str, file_id: str) -> None: ...


class JobActors:
    """The runtime's supervisor of job actors, with the scheduler as its first child.

    Args:
        context: what each job's actor gets (the runtime's :class:`JobContext`).
        files: a job's training file is recalled before its actor starts.
        checkpoints: where a restarted actor's job is read from (primed by the starters).
        pool: the nodes the scheduler places jobs on.

    Use ``async with actors.open():`` for the runtime's lifetime; leaving it stops every
    actor (their trainers with them).
    """

    def __init__(self, context: JobContext, files: FileRecall,
                 checkpoints: JobCheckpoints, pool: Pool) -> None:
        self._context = context
        self._files = files
        self._checkpoints = checkpoints
        self._pool = pool
        self._supervisor: Supervisor | None = None
        self.scheduler: ActorRef[SchedulerMessage] | None = None
        """The scheduler actor, while open."""

    @asynccontextmanager
    async def open(self) -> AsyncIterator[JobActors]:
        """Open the supervisor and start the scheduler under it."""
        async with open_supervisor(name="jobs", intensity=JOB_RESTART_INTENSITY,
                                   checkpoints=self._checkpoints) as supervisor:
            self._supervisor = supervisor
            self.scheduler = await supervisor.start_child(
                Scheduler, self._pool, name="scheduler", restart=Restart.PERMANENT)
            yield self  # the closed supervisor stays, for its statistics

    async def start(self, job: Job, cause: str | None,
                    on_give_up: Callable[[str, BaseException | None], Awaitable[None]],
                    ) -> None:
        """Start the job's actor with its own restart limit (:data:`JOB_ACTOR_INTENSITY`);
        ``on_give_up(job_id, error)`` when it is given up. Only through the runtime's
        :class:`~alallo.runtime._starter.Starter`, which starts each job once.

        Raises:
            RuntimeError: the supervisor is not open.
        """
        if self._supervisor is None:
            raise RuntimeError("the runtime is not open: use 'async with Runtime(...)'")
        await self._files.recall(job.account_id, job.spec.training_file)
        if job.spec.validation_file:
            await self._files.recall(job.account_id, job.spec.validation_file)
        await self._supervisor.start_child(
            JobActor, self._context, job.id, cause, name=job.id, restart=Restart.TRANSIENT,
            intensity=JOB_ACTOR_INTENSITY, backoff=JOB_ACTOR_BACKOFF, on_give_up=on_give_up)

    def __contains__(self, job_id: object) -> bool:
        """Whether the supervisor has a child for the job (running, starting or waiting for a
        restart)."""
        return self._supervisor is not None and job_id in self._supervisor

    def lookup(self, job_id: str) -> ActorRef[JobMessage] | None:
        """The running actor of a job, or None."""
        return self._supervisor.lookup(job_id) if self._supervisor is not None else None

    def statistics(self) -> SupervisorStatistics | None:
        """Counters of the supervisor (starts, restarts, crashes); None when closed."""
        return self._supervisor.statistics() if self._supervisor is not None else None
