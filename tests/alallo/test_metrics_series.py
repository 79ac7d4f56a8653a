"""A job's metrics, pure: the points the state machine numbers, the events an evaluation
makes, an early stop's charge, the series by step and its CSV (issue 18)."""

from __future__ import annotations

import csv
import io

import pytest
from test_lifecycle import T0, new_job, run

from alallo import EventType, JobStatus
from alallo.jobs import MetricsPoint, metrics_csv, series
from alallo.jobs._billing import charge_through
from alallo.jobs._lifecycle import (
    Started,
    TrainerExited,
    TrainerReported,
    append_metrics,
    apply,
)
from alallo.trainers import Checkpoint, Done, Metrics
from alallo.trainers import Progress as TrainerProgress

pytestmark = pytest.mark.unit


def test_a_point_takes_the_next_sequence_number_and_leaves_the_state_alone() -> None:
    job = run(new_job(20), Started(now=T0))[0]
    after, point = append_metrics(job, Metrics(step=10, train_loss=2.5, learning_rate=1e-3),
                                  now=T0 + 1)
    assert point.n == job.seq + 1 == after.seq and after.state_seq == job.state_seq
    assert (point.step, point.attempt, point.figures()) == (
        10, 1, {"train_loss": 2.5, "learning_rate": 1e-3})


def test_an_evaluation_is_an_event_and_training_figures_are_not() -> None:
    job = run(new_job(20), Started(now=T0))[0]
    assert not apply(job, TrainerReported(Metrics(step=5, train_loss=3.0), now=T0)).changed
    assert not apply(job, TrainerReported(Metrics(step=20, full_valid_loss=2.0), now=T0)).changed
    told = apply(job, TrainerReported(Metrics(step=10, valid_loss=2.25,
                                              valid_mean_token_accuracy=0.5), now=T0))
    (event,) = told.events
    assert (event.type, event.step, event.data) == (
        EventType.EVAL_COMPLETE, 10, {"valid_loss": 2.25, "valid_mean_token_accuracy": 0.5})
    assert event.message == "Evaluation at step 10: validation loss 2.2500, mean token accuracy 0.5000"


def test_an_early_stop_succeeds_at_its_last_step_and_is_charged_through_it_only() -> None:
    steps = [TrainerReported(TrainerProgress(step=s, max_steps=30), now=T0 + s) for s in range(1, 13)]
    job, types = run(
        new_job(30), Started(now=T0), *steps,
        TrainerReported(Checkpoint(step=12, path="/c/checkpoint-12"), now=T0 + 13),
        TrainerReported(Done(model_path="/m", stopped_at=12, best_step=8), now=T0 + 14),
        TrainerExited(returncode=0, now=T0 + 15, result_file="file-1-metrics"))
    assert job.status is JobStatus.SUCCEEDED and job.stopped_early == (12, 8)
    assert (job.progress.step, job.progress.max_steps, job.progress.percent) == (12, 12, 100.0)
    assert job.charged_through == 12 and job.result_files == ("file-1-metrics",)
    full = run(new_job(30), Started(now=T0))[0]
    assert job.charged == pytest.approx(charge_through(full, 12)[1].amount)  # type: ignore[union-attr]
    assert job.charged < charge_through(full, 30)[1].amount  # type: ignore[union-attr]
    assert EventType.TRAINING_COMPLETE in types


def test_the_series_has_a_row_per_step_and_a_resumed_run_replaces_its_steps() -> None:
    points = [
        MetricsPoint(n=3, at=0, attempt=1, step=10, train_loss=3.0, epoch=0.5),
        MetricsPoint(n=4, at=0, attempt=1, step=10, valid_loss=3.5),
        MetricsPoint(n=5, at=0, attempt=1, step=20, train_loss=2.0),  # lost with the crash
        MetricsPoint(n=9, at=0, attempt=2, step=20, train_loss=1.9),
        MetricsPoint(n=10, at=0, attempt=2, step=20, valid_loss=2.4, full_valid_loss=2.4),
    ]
    rows = series(reversed(points))  # in sequence order, whatever order they come in
    assert [(r["step"], r["train_loss"], r["valid_loss"]) for r in rows] == [
        (10, 3.0, 3.5), (20, 1.9, 2.4)]
    assert rows[0]["epoch"] == 0.5 and rows[1]["full_valid_loss"] == 2.4
    assert rows[0]["grad_norm"] is None
    table = list(csv.DictReader(io.StringIO(metrics_csv(rows))))
    assert table[0] == {**table[0], "step": "10", "train_loss": "3.0", "train_accuracy": "",
                        "valid_loss": "3.5"}
    assert list(table[0])[:5] == ["step", "train_loss", "train_accuracy", "valid_loss",
                                  "valid_mean_token_accuracy"]


def test_a_reinforcement_series_carries_the_rewards_and_each_graders_score_to_the_csv() -> None:
    points = [
        MetricsPoint(n=1, at=0, step=10, train_loss=0.01, reward=0.25, reward_std=0.1,
                     scores={"exact": 0.0, "close": 0.5}),
        MetricsPoint(n=2, at=0, step=10, valid_reward=0.3, scores={"valid.exact": 0.1}),
        MetricsPoint(n=3, at=0, step=20, train_loss=0.02, reward=0.5, reward_std=0.2,
                     scores={"exact": 0.25, "close": 0.75}),
    ]
    rows = series(points)
    assert rows[0]["scores"] == {"exact": 0.0, "close": 0.5, "valid.exact": 0.1}
    assert (rows[0]["reward"], rows[0]["valid_reward"], rows[1]["reward_std"]) == (0.25, 0.3, 0.2)
    table = list(csv.DictReader(io.StringIO(metrics_csv(rows))))
    assert list(table[0])[-6:] == ["train_reward", "train_reward_std", "valid_reward",
                                   "score_close", "score_exact", "valid_score_exact"]
    assert (table[1]["train_reward"], table[1]["score_close"], table[1]["valid_reward"]) == (
        "0.5", "0.75", "")
    supervised = metrics_csv(series([MetricsPoint(n=1, at=0, step=10, train_loss=1.0)]))
    assert "reward" not in supervised  # other methods' results keep OpenAI's columns


def test_a_dpo_series_carries_its_reward_accuracy_and_margin_to_the_csv() -> None:
    # What `alallo jobs metrics --csv` wrote before it wrote the results file's columns.
    rows = series([MetricsPoint(n=1, at=0, step=10, train_loss=0.6, reward_accuracy=0.75,
                                reward_margin=0.5)])
    table = list(csv.DictReader(io.StringIO(metrics_csv(rows))))
    assert list(table[0])[-3:] == ["tokens_per_s", "reward_accuracy", "reward_margin"]
    assert (table[0]["reward_accuracy"], table[0]["reward_margin"]) == ("0.75", "0.5")


def test_the_estimate_counts_the_evaluations_time_and_not_their_price() -> None:
    from test_lifecycle import LOCAL

    from alallo import JobSpec
    from alallo.capacity._catalogue import Catalogue
    from alallo.capacity._plans import plan_options
    from alallo.jobs import estimate_price, estimate_time

    def plan(eval_steps: int | None, examples: int):  # type: ignore[no-untyped-def]
        spec = JobSpec(model="alallo/tiny-gpt2", training_file="file-1",
                       validation_file="file-2" if examples else None,
                       hyperparameters={"eval_steps": eval_steps, "batch_size": 4})
        return plan_options(Catalogue().resolve(spec.model), spec, LOCAL, max_steps=100,
                            tokens_per_example=50, eval_examples=examples).pick(spec.goal)

    bare, every_10, every_50 = plan(None, 0), plan(None, 40), plan(50, 40)
    assert bare.eval_s == 0
    # 10 evaluations of 10 batches against 2: five times the time, at the same price.
    assert every_10.eval_s == pytest.approx(5 * every_50.eval_s)
    assert 0 < every_10.eval_s < 100 * bare.step_time_s  # a forward pass: under a step each
    assert estimate_time(every_10).high_s > estimate_time(bare).high_s
    assert estimate_price(every_10) == estimate_price(bare)
