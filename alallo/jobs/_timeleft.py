"""Time left of a live job: from the estimate first, then from the measured pace.

The seeds: "At the start it is based on the estimate. Once about 5% of
training is done, alallo calculates the time left from the job's actual
pace, and the range becomes narrower."
"""

from __future__ import annotations

import math
from typing import Protocol

from .._status import JobStatus
from ._estimate import ESTIMATE_HIGH, ESTIMATE_LOW
from ._plan import Plan
from ._timetext import TIME_LEFT_MINUTES_BELOW_S, TimeRange

__all__ = ["PACE_AFTER_FRACTION", "TimedJob", "time_left"]

PACE_AFTER_FRACTION = 0.05
"""Share of steps after which the measured pace replaces the estimate."""
_PACE_LOW, _PACE_HIGH = 0.05, 0.08
"""The least spread of a pace-based range, below and above (steps are rarely steadier)."""


class _Steps(Protocol):
    @property
    def step(self) -> int: ...

    @property
    def max_steps(self) -> int: ...


class TimedJob(Protocol):
    """What of a job its time left depends on (:class:`alallo._job.Job` has it; a protocol,
    so that this module needs nothing of the job's)."""

    @property
    def status(self) -> JobStatus: ...

    @property
    def progress(self) -> _Steps: ...

    @property
    def plan(self) -> Plan: ...

    @property
    def estimate(self) -> TimeRange: ...

    @property
    def created_at(self) -> int: ...

    @property
    def paused_s(self) -> float: ...

    @property
    def run_started_at(self) -> float | None: ...

    @property
    def first_step_at(self) -> float | None: ...

    @property
    def first_step(self) -> int: ...

    @property
    def step_s_mean(self) -> float | None: ...

    @property
    def step_s_var(self) -> float: ...


def time_left(job: TimedJob, *, now: float) -> TimeRange | None:
    """The job's time left as a range, or None for a job that has ended.

    - Queued: the estimate made at submission (it counts the queue wait),
      less the time already waited, never below the training time itself.
      A job queued again by a resume, or ``paused``: the plan's time for the steps left
      (the time it was paused counts for nothing).
    - Running, before 5% of the steps: the plan's time for the steps left.
    - Running, after: the measured pace. The range comes from the spread of
      recent step times: for ``R`` steps left, ``D`` done, pace ``m`` and
      coefficient of variation ``cv``, with ``e = cv·√(1/D + 1/R)`` (the
      pace's own error plus the spread of the steps left),
      ``R·m·(1 − max(5%, 2.5·e))`` to ``R·m·(1 + max(8%, 3·e))`` (wider on
      the upper side, where delays are; calibrated by ``bench/bench_estimates.py``).

    Args:
        job: the job.
        now: Unix seconds.
    """
    if job.status.is_final or job.status is JobStatus.CANCELLING:
        return None
    progress = job.progress
    remaining_steps = max(0, progress.max_steps - progress.step)
    done_since_start = progress.step - job.first_step
    planned = job.plan.startup_s + remaining_steps * job.plan.step_time_s
    if job.status is JobStatus.QUEUED and not job.paused_s:
        waited = max(0.0, now - job.created_at)
        return TimeRange(
            low_s=max(planned * ESTIMATE_LOW, job.estimate.low_s - waited),
            high_s=max(planned * ESTIMATE_HIGH, job.estimate.high_s - waited),
            basis="estimate", minutes_below=TIME_LEFT_MINUTES_BELOW_S)
    if (
        job.status is JobStatus.RUNNING
        and job.first_step_at is not None
        and done_since_start > 0
        and progress.step >= PACE_AFTER_FRACTION * progress.max_steps
    ):
        pace = max(0.0, now - job.first_step_at) / done_since_start
        left = remaining_steps * pace
        cv = 0.0
        if job.step_s_mean:
            cv = math.sqrt(job.step_s_var) / job.step_s_mean
        # Two errors add up: the pace is a mean of the steps done so far
        # (error ~ cv/√done), and the steps left vary around it (~ cv/√left).
        spread = cv * math.sqrt(1 / done_since_start + 1 / max(remaining_steps, 1))
        return TimeRange(
            low_s=left * (1 - min(0.9, max(_PACE_LOW, 2.5 * spread))),
            high_s=left * (1 + max(_PACE_HIGH, 3.0 * spread)),
            basis="pace",
            minutes_below=TIME_LEFT_MINUTES_BELOW_S,
        )
    elapsed = now - job.run_started_at if job.run_started_at is not None else 0.0
    base = max(planned - elapsed, remaining_steps * job.plan.step_time_s, 1.0)
    return TimeRange(
        low_s=base * ESTIMATE_LOW,
        high_s=base * ESTIMATE_HIGH,
        basis="estimate",
        minutes_below=TIME_LEFT_MINUTES_BELOW_S,
    )
