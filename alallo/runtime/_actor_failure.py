"""`fail_job`: a job whose actor is gone for good fails; the server and the other jobs go on.

A job's actor is gone for good when its supervisor gave it up (it crashed more often than
`alallo.runtime._starter.JOB_ACTOR_INTENSITY` allows) or when it could not start at all. Nothing then
writes the job, so the runtime does it once, in the actor's place (DESIGN.md rule 3 holds: the
actor is gone): the job's last committed state goes through the lifecycle
(`alallo._lifecycle.ActorFailed`), is committed under the job's lease and published
(`alallo.runtime._job_writer.JobWriter`), and the operator is told as for any platform failure. The
user sees what the seeds say of a platform failure: ``Failed. We've been notified and are
looking into it.``, charged nothing.
"""

from __future__ import annotations

import time

import structlog

from .._status import EventType
from ..jobs import lifecycle
from ..store import LeaseLost, StoreUnavailable
from ._job_context import JobContext

__all__ = ["fail_job"]

log = structlog.get_logger("alallo.job")


async def fail_job(context: JobContext, job_id: str, reason: str) -> None:
    """Fail the job whose actor is gone for good, and tell the operator why.

    Args:
        context: The job context of the runtime that held the job's actor (and holds its
            lease).
        job_id: The job.
        reason: Why its actor is gone, in words: the end of its JOB_ERROR event.

    Never raises for a fault of the world: a lease another process took (that process runs
    the job now), a store that failed (the job stays live, and the next recovery or adoption
    starts it again) or a row that cannot be read are logged and told to the operator.
    """
    try:
        job = await context.load(job_id)
        if job is None:
            log.error("job.actor_failed", job_id=job_id, reason=reason, row="unreadable")
            context.notify_operator(job_id, f"{reason}; its stored row cannot be read")
            return
        transition = lifecycle.apply(job, lifecycle.ActorFailed(now=time.time(), reason=reason))
        if transition.changed:
            await context.writer(job.state_seq).write(
                transition.job, transition.events, (), transition.ledger)
        log.error("job.actor_failed", job_id=job_id, reason=reason,
                  status=transition.job.status.value)
        for event in transition.events:
            if event.type is EventType.JOB_ERROR:
                context.notify_operator(job_id, event.message)
        if transition.job.status.is_final:
            context.release(job_id)
    except LeaseLost:
        log.warning("job.actor_failed", job_id=job_id, reason=reason, lease="lost")
    except StoreUnavailable as exc:
        log.error("job.actor_failed", job_id=job_id, reason=reason, store=exc.message)
        context.notify_operator(job_id, f"{reason}; the failure could not be stored: "
                                f"{exc.message}")
