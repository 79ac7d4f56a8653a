"""How times read (the seeds: "40 min to 1.3 h"), and time left from estimate then pace."""

from __future__ import annotations

import pytest

from alallo import JobStatus
from alallo._job import Progress
from alallo._lifecycle import Started, TrainerReported, apply
from alallo._timeleft import time_left
from alallo._timetext import TimeRange, format_duration
from alallo.trainers import Progress as TrainerProgress

from test_lifecycle import T0, new_job


def test_estimate_reads_like_the_seed() -> None:
    assert TimeRange(low_s=40 * 60, high_s=1.3 * 3600).text == "40 min to 1.3 h"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(10, "< 1 min"), (45, "1 min"), (89 * 60, "89 min"), (90 * 60, "1.5 h"), (5 * 3600, "5.0 h")],
)
def test_time_left_is_in_minutes_under_one_and_a_half_hours(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_time_left_starts_from_the_estimate_and_narrows_on_pace() -> None:
    job = apply(new_job(100), Started(now=T0)).job
    before = time_left(job, now=T0)
    assert before is not None and before.basis == "estimate"
    # 10 steps in 10 s after the first one: 1 s per step, 89 steps left.
    job = apply(job, TrainerReported(TrainerProgress(step=1, max_steps=100), now=T0 + 1)).job
    job = apply(job, TrainerReported(TrainerProgress(step=11, max_steps=100), now=T0 + 11)).job
    paced = time_left(job, now=T0 + 11)
    assert paced is not None and paced.basis == "pace"
    assert paced.low_s == pytest.approx(80.1) and paced.high_s == pytest.approx(102.35)
    assert paced.high_s / paced.low_s < before.high_s / before.low_s


def test_no_time_left_once_final() -> None:
    job = new_job().model_copy(update={"status": JobStatus.SUCCEEDED, "progress": Progress(step=30, max_steps=30)})
    assert time_left(job, now=T0) is None
