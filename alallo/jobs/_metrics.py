"""A job's training metrics: one :class:`MetricsPoint` per report of the trainer, the series
they make (one row per step), and that series as the metrics CSV of a succeeded job.

The figures and their names are OpenAI's (the ``metrics`` of a
``fine_tuning.job.checkpoint``, the columns of its results file), with those users of
TRL look at besides: learning rate, gradient norm, tokens per second, and DPO's reward
accuracy and margin. Data only: the job actor gives each point its sequence number
(``lifecycle.append_metrics``), the store keeps them as job items of kind ``metrics``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

__all__ = ["CSV_COLUMNS", "FIGURES", "MetricsPoint", "metrics_csv", "series"]

FIGURES = ("train_loss", "train_mean_token_accuracy", "learning_rate", "grad_norm",
           "tokens_per_s", "valid_loss", "valid_mean_token_accuracy", "full_valid_loss",
           "full_valid_mean_token_accuracy", "reward_accuracy", "reward_margin")
"""Every figure a point may carry, in the order the API lists them."""

CSV_COLUMNS = ("step", "train_loss", "train_accuracy", "valid_loss",
               "valid_mean_token_accuracy", "full_valid_loss",
               "full_valid_mean_token_accuracy", "learning_rate", "grad_norm", "tokens_per_s")
"""The metrics CSV's header: OpenAI's results file (``train_accuracy`` is the mean token
accuracy), then alallo's own figures."""


class MetricsPoint(BaseModel):
    """What the trainer reported at one step: the training figures of a logging step, or
    the validation figures of an evaluation (each figure None when not reported).

    ``n`` is its sequence number among the job's items (the stream's ``Last-Event-ID``),
    ``at`` Unix seconds, ``attempt`` the run that reported it.
    """

    model_config = ConfigDict(frozen=True)

    n: int
    at: float
    attempt: int = 1
    step: int
    epoch: float | None = None
    train_loss: float | None = None
    train_mean_token_accuracy: float | None = None
    learning_rate: float | None = None
    grad_norm: float | None = None
    tokens_per_s: float | None = None
    """Training tokens per second since the previous logging step (all devices)."""
    valid_loss: float | None = None
    """Loss on the validation file, evaluated at this step."""
    valid_mean_token_accuracy: float | None = None
    full_valid_loss: float | None = None
    """The validation loss at the end of training (the whole validation file, as every
    evaluation of alallo's is)."""
    full_valid_mean_token_accuracy: float | None = None
    reward_accuracy: float | None = None
    """DPO: how often the preferred answer out-scores the other (training batch)."""
    reward_margin: float | None = None
    """DPO: the mean difference of the two answers' implicit rewards."""

    def figures(self) -> dict[str, float]:
        """The figures this point reported, by name (those that are None left out)."""
        return {name: value for name in FIGURES if (value := getattr(self, name)) is not None}


def series(points: Iterable[MetricsPoint]) -> list[dict[str, float | int | None]]:
    """One row per step, in step order: every figure reported at that step, the latest
    run's winning (a run resumed from a checkpoint reports its steps again).

    Each row has ``step``, ``epoch`` and every name of :data:`FIGURES` (None when no run
    reported it at that step).
    """
    rows: dict[int, dict[str, float | int | None]] = {}
    attempts: dict[int, int] = {}
    for point in sorted(points, key=lambda p: p.n):
        if attempts.get(point.step, 0) < point.attempt:  # a newer run: its row starts anew
            rows[point.step] = dict.fromkeys(("epoch", *FIGURES))
            attempts[point.step] = point.attempt
        row = rows[point.step]
        row.update(point.figures())
        if point.epoch is not None:
            row["epoch"] = point.epoch
    return [{"step": step, **rows[step]} for step in sorted(rows)]


def metrics_csv(rows: Iterable[dict[str, float | int | None]]) -> str:
    """The rows of :func:`series` as the results CSV (:data:`CSV_COLUMNS`, empty cells for
    figures not reported at a step)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        values = {**row, "train_accuracy": row.get("train_mean_token_accuracy")}
        writer.writerow(["" if values.get(name) is None else values[name]
                         for name in CSV_COLUMNS])
    return out.getvalue()
