"""``alallo jobs metrics``: a job's metrics series as a table, or as CSV
(``GET /v1/fine_tuning/jobs/{id}/metrics``)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import typer
from rich.text import Text

from alallo.cli._common import (
    ApiKeyOption,
    JsonOption,
    UrlOption,
    console,
    open_client,
    print_json,
)
from alallo.cli._jobs import JobIdArgument, jobs_app
from alallo.cli._table import Column, fitted_table

__all__ = ["metrics"]

_COLUMNS = (("step", "Step", 0), ("train_loss", "Train loss", 0), ("reward", "Reward", 0),
            ("reward_std", "± Spread", 2), ("valid_reward", "Valid reward", 0),
            ("train_mean_token_accuracy", "Train acc.", 3), ("valid_loss", "Valid loss", 0),
            ("valid_mean_token_accuracy", "Valid acc.", 3), ("learning_rate", "LR", 2),
            ("grad_norm", "Grad norm", 4), ("tokens_per_s", "Tokens/s", 1),
            ("reward_accuracy", "Reward acc.", 2))
"""The table's columns: the series' key, the header, and when it is left out (0: never).
A column no row has a value for is left out, so a supervised job shows no reward."""
_KEPT = ("step", "train_loss", "reward", "valid_reward", "valid_loss")


@jobs_app.command("metrics")
def metrics(
    job_id: JobIdArgument,
    after: Annotated[int, typer.Option(help="Only the steps after this one.")] = 0,
    as_csv: Annotated[bool, typer.Option(
        "--csv", help="Print CSV, with the columns of the job's results file.")] = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a job's metrics, one row per logged or evaluated step: losses, accuracy, pace;
    a reinforcement job's reward, its spread and the validation reward."""
    with open_client(url, api_key) as client:
        rows = list(client.list_metrics(job_id, after=after)["data"])
    if as_json:
        print_json({"object": "list", "data": rows, "has_more": False})
        return
    if as_csv:
        _write_csv(rows)
        return
    shown = [c for c in _COLUMNS if c[0] == "step" or any(r.get(c[0]) is not None for r in rows)]
    columns = [Column(header, keep=key in _KEPT, drop=drop) for key, header, drop in shown]
    out = console()
    out.print(fitted_table(out, columns, [[Text(_cell(row.get(key))) for key, _, _ in shown]
                                          for row in rows]))


def _write_csv(rows: Sequence[Mapping[str, Any]]) -> None:
    """The job's results file's columns and names (OpenAI's), so that a CSV of the CLI and
    the job's own read alike; imported here, not at start, as ``--csv`` alone needs it."""
    from alallo.jobs import metrics_csv

    sys.stdout.write(metrics_csv(rows))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"  # tokens per second
        return f"{value:.4g}" if abs(value) < 1e-3 else f"{value:.4f}"
    return str(value)
