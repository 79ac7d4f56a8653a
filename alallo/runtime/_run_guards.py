"""What a job's run checks besides its trainer (:mod:`alallo.runtime._job_actor`): that the
account can afford it before the first run, and that it stays within its budget and the time
limit while it runs (the seeds' automatic cancellation and ``Stopped: ...`` messages)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, cast

import trio

from .._money import format_money
from ._job_messages import _LimitReached

if TYPE_CHECKING:
    from actors import ActorRef

    from ..jobs import Job
    from ..settings import Settings
    from ._job_context import JobContext
    from ._job_messages import JobMessage

__all__ = ["cannot_afford", "watch_limits"]


async def watch_limits(ref: ActorRef[JobMessage], settings: Settings, job: Job) -> None:
    """Tell the job's actor when the job has run too long (counting its runs before,
    ``job.ran_s``; never the time it waited or was paused): the budget, then the time limit."""
    budget_s = max(settings.budget_factor * job.estimate.high_s, settings.budget_min_s)
    limits = sorted([(budget_s - job.ran_s, "budget"),
                     (settings.time_limit_s - job.ran_s, "time_limit")])
    await trio.sleep(max(0.0, limits[0][0]))
    await ref.tell(_LimitReached(cast(Literal["budget", "time_limit"], limits[0][1])))


async def cannot_afford(ctx: JobContext, job: Job) -> str | None:
    """Why the account cannot pay for the job's lowest price, or None when it can."""
    balance, billing_limit = await ctx.balance(job.account_id)
    low = job.price_estimate[0]
    if balance + billing_limit >= low:
        return None
    return (f"the job costs at least {format_money(low)}; the balance is "
            f"{format_money(balance)} with a billing limit of {format_money(billing_limit)}")
