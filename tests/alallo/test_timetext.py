"""How times read (the seeds: "40 min to 1.3 h"), and time left from estimate then pace."""

from __future__ import annotations

import pytest

from alallo import JobStatus
from alallo.jobs._job import Progress
from alallo.jobs._lifecycle import Started, TrainerReported, apply
from alallo.jobs._timeleft import time_left
from alallo.jobs._timetext import TimeRange, format_duration
from alallo.trainers import Progress as TrainerProgress

from test_lifecycle import T0, new_job

pytestmark = pytest.mark.unit


def test_estimate_reads_like_the_seed() -> None:
    assert TimeRange(low_s=40 * 60, high_s=1.3 * 3600).text == "40 min to 1.3 h"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(10, "< 1 min"), (45, "1 min"), (89 * 60, "89 min"), (90 * 60, "1.5 h"), (5 * 3600, "5.0 h")],
)
def test_time_left_is_in_minutes_under_one_and_a_half_hours(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("low_s", "high_s", "text"),
    [
        (0, 20, "< 1 min"),  # a queued job about to start: not "< 1 min to 1 min"
        (20, 59, "< 1 min"),
        (20, 60, "1 min"),
        (31, 67, "1 min to 2 min"),  # the range stays a range
        (50, 150, "1 min to 3 min"),  # the top end rounds up, never down
        (119, 121, "1 min to 3 min"),  # and the low end down
        (60, 120, "1 min to 2 min"),
        (600, 900, "10 min to 15 min"),
        (50 * 60, 3601, "50 min to 1.1 h"),
        (40 * 60, 1.3 * 3600, "40 min to 1.3 h"),  # exact tenths stay put
        (5 * 3600, 5 * 3600 + 1, "5.0 h to 5.1 h"),
    ],
)
def test_a_range_rounds_its_low_end_down_and_its_high_end_up(
    low_s: float, high_s: float, text: str
) -> None:
    assert TimeRange(low_s=low_s, high_s=high_s).text == text


def test_time_left_ranges_stay_in_minutes_under_one_and_a_half_hours() -> None:
    assert TimeRange(low_s=50 * 60, high_s=5340.5, minutes_below=5400).text == "50 min to 90 min"
    assert TimeRange(low_s=50 * 60, high_s=5400, minutes_below=5400).text == "50 min to 1.5 h"


def test_time_left_starts_from_the_estimate_and_narrows_on_pace() -> None:
    job = apply(new_job(100), Started(now=T0)).job
    before = time_left(job, now=T0)
    assert before is not None and before.basis == "estimate"
    # 10 steps in 10 s after the first one: 1 s per step, 89 steps left.
    job = apply(job, TrainerReported(TrainerProgress(step=1, max_steps=100), now=T0 + 1)).job
    job = apply(job, TrainerReported(TrainerProgress(step=11, max_steps=100), now=T0 + 11)).job
    paced = time_left(job, now=T0 + 11)
    assert paced is not None and paced.basis == "pace"
    # Steady steps: the least spread, 5% below and 8% above.
    assert paced.low_s == pytest.approx(89 * 0.95) and paced.high_s == pytest.approx(89 * 1.08)
    assert paced.high_s / paced.low_s < before.high_s / before.low_s


def test_the_pace_range_follows_the_spread_of_step_times_and_narrows() -> None:
    job = apply(new_job(1000), Started(now=T0)).job
    now = T0
    def step_s(step: int) -> float:  # every 10th step stalls: mean 1.09 s, cv ~2.7
        return 10.0 if step % 10 == 5 else 0.1

    for step in range(1, 101):
        now += step_s(step)
        job = apply(job, TrainerReported(TrainerProgress(step=step, max_steps=1000), now=now)).job
    early = time_left(job, now=now)
    for step in range(101, 901):
        now += step_s(step)
        job = apply(job, TrainerReported(TrainerProgress(step=step, max_steps=1000), now=now)).job
    late = time_left(job, now=now)
    assert early is not None and late is not None and early.basis == late.basis == "pace"
    assert early.high_s - early.low_s > late.high_s - late.low_s
    left = 900 * 1.09  # steps left times the mean step time, as the pace says
    assert early.low_s < left * 0.9 and early.high_s > left * 1.15, "wider than the floor"


def test_a_queued_job_counts_its_wait() -> None:
    job = new_job(30)
    job = job.model_copy(update={"estimate": job.estimate.model_copy(
        update={"low_s": 600.0, "high_s": 900.0})})
    left = time_left(job, now=job.created_at + 100)
    assert left is not None and (left.low_s, left.high_s) == (500.0, 800.0)


def test_no_time_left_once_final() -> None:
    job = new_job().model_copy(update={"status": JobStatus.SUCCEEDED, "progress": Progress(step=30, max_steps=30)})
    assert time_left(job, now=T0) is None
