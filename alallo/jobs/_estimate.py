"""Estimates: time and price ranges of a plan (the plans: :mod:`alallo._plans`).

A plan's training time is ``startup + max_steps × step time`` (the time
model of ``docs/capacity.md``), and the job's time adds its evaluations on the
validation file (``Plan.eval_s``). The price counts the steps only, as the
charge does: start-up, waiting and evaluation are not charged. The range is wider on the upper side, as the
seeds ask: a job may wait for capacity, and steps run slower than planned
more often than faster.
"""

from __future__ import annotations

from ._plan import Plan
from ._timetext import TimeRange

__all__ = ["ESTIMATE_HIGH", "ESTIMATE_LOW", "PRICE_DIGITS", "WAIT_HIGH", "WAIT_LOW",
           "estimate_price", "estimate_time"]

PRICE_DIGITS = 9
"""Prices are rounded to nano-dollars, as the ledger's amounts are (tiny CPU steps add up)."""
ESTIMATE_LOW = 0.7
"""Low end of an estimate as a share of the expected time (calibrated: bench_estimates.py)."""
ESTIMATE_HIGH = 1.5
"""High end of an estimate as a share of the expected time (wider: queue wait)."""
WAIT_LOW = 0.5
"""The lower end counts the expected queue wait this many times (jobs ahead end early)."""
WAIT_HIGH = 1.5
"""The upper end counts the expected queue wait this many times."""


def estimate_time(plan: Plan, *, wait_s: float = 0.0) -> TimeRange:
    """The time range from submission to the end of training on ``plan``.

    The training part spans ``ESTIMATE_LOW`` to ``ESTIMATE_HIGH`` times the
    expected time; the queue wait adds to both ends, more to the upper one.
    """
    expected = plan.training_s + plan.eval_s
    return TimeRange(low_s=expected * ESTIMATE_LOW + wait_s * WAIT_LOW,
                     high_s=expected * ESTIMATE_HIGH + wait_s * WAIT_HIGH)


def estimate_price(plan: Plan) -> tuple[float, float]:
    """(low, high) USD for training on ``plan``, by the rule the charge follows
    (:func:`alallo.jobs._billing.charge_through`): the steps, each at the plan's step price.
    Start-up, waiting and evaluating cost nothing. The job's charge on this plan is the
    expected price, inside the range; the high end is what the job can cost at most,
    moved to other capacity or not (the charge is capped there)."""
    expected = plan.max_steps * plan.step_time_s * plan.price_per_hour / 3600
    return (round(expected * ESTIMATE_LOW, PRICE_DIGITS),
            round(expected * ESTIMATE_HIGH, PRICE_DIGITS))
