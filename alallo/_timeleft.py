"""Time left of a live job: from the estimate first, then from the measured pace.

The seeds: "At the start it is based on the estimate. Once about 5% of
training is done, alallo calculates the time left from the job's actual
pace, and the range becomes narrower."
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._estimate import ESTIMATE_HIGH, ESTIMATE_LOW
from ._status import JobStatus
from ._timetext import TIME_LEFT_MINUTES_BELOW_S, TimeRange

if TYPE_CHECKING:
    from ._job import Job

__all__ = ["PACE_AFTER_FRACTION", "time_left"]

PACE_AFTER_FRACTION = 0.05
"""Share of steps after which the measured pace replaces the estimate."""
_PACE_LOW, _PACE_HIGH = 0.9, 1.15
"""The pace-based range: narrower, and still a little wider on the upper side."""


def time_left(job: Job, *, now: float) -> TimeRange | None:
    """The job's time left as a range, or None for a job that has ended.

    Args:
        job: the job.
        now: Unix seconds.
    """
    if job.status.is_final or job.status is JobStatus.CANCELLING:
        return None
    progress = job.progress
    remaining_steps = max(0, progress.max_steps - progress.step)
    done_since_start = progress.step - job.first_step
    if (
        job.status is JobStatus.RUNNING
        and job.first_step_at is not None
        and done_since_start > 0
        and progress.step >= PACE_AFTER_FRACTION * progress.max_steps
    ):
        pace = max(0.0, now - job.first_step_at) / done_since_start
        left = remaining_steps * pace
        return TimeRange(
            low_s=left * _PACE_LOW,
            high_s=left * _PACE_HIGH,
            basis="pace",
            minutes_below=TIME_LEFT_MINUTES_BELOW_S,
        )
    planned = job.plan.startup_s + remaining_steps * job.plan.step_time_s
    elapsed = now - job.run_started_at if job.run_started_at is not None else 0.0
    base = max(planned - elapsed, remaining_steps * job.plan.step_time_s, 1.0)
    return TimeRange(
        low_s=base * ESTIMATE_LOW,
        high_s=base * ESTIMATE_HIGH,
        basis="estimate",
        minutes_below=TIME_LEFT_MINUTES_BELOW_S,
    )
