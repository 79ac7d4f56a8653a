"""How ``bench/bench_rft.py`` counts: the answer tokens of a run from TRL's log history, the
figures of a run, and the ratio with its spread."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

from bench_rft import ANSWERS, BATCH, Run, mean_length, ratios, timed  # noqa: E402

pytestmark = pytest.mark.unit  # no store: runs once, in the SQLite pass


def test_the_mean_answer_length_weighs_each_logging_step_by_the_steps_it_covers() -> None:
    history = [{"loss": 0.1, "completions/mean_length": 20.0, "step": 10},
               {"loss": 0.1, "completions/mean_length": 30.0, "step": 20},
               {"loss": 0.1, "completions/mean_length": 32.0, "step": 25},
               {"train_runtime": 9.0, "step": 25}]  # the run's summary has no lengths
    assert mean_length(history) == pytest.approx((20 * 10 + 30 * 10 + 32 * 5) / 25)


def test_a_history_without_lengths_is_refused() -> None:
    with pytest.raises(ValueError, match="completions/mean_length"):
        mean_length([{"train_runtime": 9.0, "step": 25}])


def test_a_run_is_timed_by_its_median_step_after_the_first() -> None:
    """Steps 3 and 4 read together (one update): each gets half of the time since step 2;
    the span runs from step 1's end to the last."""
    run = timed([(1, 100.0), (2, 101.0), (4, 103.5), (5, 104.0), (6, 104.5)],
                [{"completions/mean_length": 25.0, "step": 6}])
    assert run == Run(step_s=1.0, span_s=4.5, steps=5, mean_length=25.0)
    assert run.prompts_per_s == pytest.approx(BATCH / 1.0)
    assert run.tokens_per_s == pytest.approx(25.0 * BATCH * ANSWERS / 1.0)
    assert run.span_prompts_per_s == pytest.approx(5 * BATCH / 4.5)


def test_a_run_without_its_first_step_is_refused() -> None:
    with pytest.raises(ValueError, match="step 1"):
        timed([(2, 1.0), (3, 2.0)], [{"completions/mean_length": 1.0, "step": 3}])


def test_the_ratio_is_of_the_medians_and_the_spread_of_the_pairs() -> None:
    assert ratios([9.0, 10.0, 12.0], [10.0, 10.0, 10.0]) == pytest.approx((1.0, 0.9, 1.2))
