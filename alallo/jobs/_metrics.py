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
from collections.abc import Iterable, Mapping
from typing import Any

from ..trainers import Metrics

__all__ = ["CSV_COLUMNS", "FIGURES", "REWARD_COLUMNS", "MetricsPoint", "metrics_csv", "series"]

FIGURES = tuple(name for name in Metrics.model_fields
                if name not in ("type", "step", "epoch", "scores"))
"""Every figure a point may carry, in the order the API lists them (the protocol's)."""

CSV_COLUMNS = ("step", "train_loss", "train_accuracy", "valid_loss",
               "valid_mean_token_accuracy", "full_valid_loss",
               "full_valid_mean_token_accuracy", "learning_rate", "grad_norm", "tokens_per_s")
"""The metrics CSV's header: OpenAI's results file (``train_accuracy`` is the mean token
accuracy), then alallo's own figures."""
REWARD_COLUMNS = ("train_reward", "train_reward_std", "valid_reward")
"""A reinforcement job's columns after :data:`CSV_COLUMNS`: the grader's mean score of the
step's answers and their spread, and of the validation prompts' answers."""
_PREFERENCE_COLUMNS = ("reward_accuracy", "reward_margin")
"""A DPO job's columns after :data:`CSV_COLUMNS`: how often, and by how much, the preferred
answer out-scores the other."""


class MetricsPoint(Metrics):
    """What the trainer reported at one step (its protocol line,
    :class:`alallo.trainers.Metrics`: the training figures of a logging step, or the
    validation figures of an evaluation, each None when not reported), as the job keeps it.

    ``n`` is its sequence number among the job's items (the stream's ``Last-Event-ID``),
    ``at`` Unix seconds, ``attempt`` the run that reported it.
    """

    n: int
    at: float
    attempt: int = 1

    def figures(self) -> dict[str, float]:
        """The figures this point reported, by name (those that are None left out)."""
        return {name: value for name in FIGURES if (value := getattr(self, name)) is not None}


def series(points: Iterable[MetricsPoint]) -> list[dict[str, float | int | None]]:
    """One row per step, in step order: every figure reported at that step, the latest
    run's winning (a run resumed from a checkpoint reports its steps again).

    Each row has ``step``, ``epoch``, every name of :data:`FIGURES` (None when no run
    reported it at that step) and ``scores`` (reinforcement: each grader's mean score by
    name, ``valid.<name>`` on validation; else None).
    """
    rows: dict[int, dict[str, float | int | None]] = {}
    attempts: dict[int, int] = {}
    for point in sorted(points, key=lambda p: p.n):
        if attempts.get(point.step, 0) < point.attempt:  # a newer run: its row starts anew
            rows[point.step] = dict.fromkeys(("epoch", *FIGURES, "scores"))
            attempts[point.step] = point.attempt
        row = rows[point.step]
        row.update(point.figures())
        if point.scores:
            row["scores"] = {**(row["scores"] or {}), **point.scores}  # type: ignore[dict-item]
        if point.epoch is not None:
            row["epoch"] = point.epoch
    return [{"step": step, **rows[step]} for step in sorted(rows)]


def metrics_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    """The rows of :func:`series` (or of ``GET /v1/fine_tuning/jobs/{id}/metrics``, as
    ``alallo jobs metrics --csv`` writes them) as the results CSV (:data:`CSV_COLUMNS`,
    empty cells for figures not reported at a step); a DPO job's adds its reward accuracy
    and margin, a reinforcement job's :data:`REWARD_COLUMNS` and a ``score_<name>`` column
    per grader (``valid_score_<name>`` on the validation prompts). The step's ``epoch`` is not a column (OpenAI's results file has none)."""
    rows = list(rows)
    columns: tuple[str, ...] = CSV_COLUMNS
    if any(row.get(name) is not None for row in rows for name in _PREFERENCE_COLUMNS):
        columns += _PREFERENCE_COLUMNS
    if any(row.get("reward") is not None or row.get("valid_reward") is not None
           for row in rows):
        names = sorted({name for row in rows for name in (row.get("scores") or {})})
        columns += REWARD_COLUMNS + tuple(_score_column(name) for name in names)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        values = {**row, "train_accuracy": row.get("train_mean_token_accuracy"),
                  "train_reward": row.get("reward"), "train_reward_std": row.get("reward_std"),
                  **{_score_column(name): score
                     for name, score in (row.get("scores") or {}).items()}}
        writer.writerow(["" if values.get(name) is None else values[name] for name in columns])
    return out.getvalue()


def _score_column(name: str) -> str:
    """A grader's column: ``score_<name>``, or ``valid_score_<name>`` for its score on the
    validation prompts (``valid.<name>`` in the series)."""
    if name.startswith("valid."):
        return f"valid_score_{name.removeprefix('valid.')}"
    return f"score_{name}"
