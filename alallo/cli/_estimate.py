"""``alallo estimate``, and what ``alallo jobs create`` shares with it: the options that
describe a job, the estimate shown before creating one, and its confirmation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import typer
from rich.table import Table
from rich.text import Text

from alallo._status import Message
from alallo.cli._common import (
    ApiKeyOption,
    JsonOption,
    UrlOption,
    console,
    fail,
    open_client,
    price_range,
    print_json,
)
from alallo.cli._method import (
    BetaOption,
    ComputeMultiplierOption,
    EvalIntervalOption,
    EvalSamplesOption,
    GraderOption,
    MaxCompletionTokensOption,
    MethodOption,
    method_fields,
)
from alallo.client import HyperparameterFields

__all__ = ["AdapterOption", "BatchSizeOption", "EpochsOption", "GoalOption",
           "LearningRateOption", "LoraRankOption", "MaxStepsOption", "ModelOption",
           "PrecisionOption", "SIMULATED", "TrainerOption", "TrainingFileOption", "confirm",
           "estimate", "estimate_text", "hyperparameter_fields"]

ModelOption = Annotated[str, typer.Option("--model", help="A model id from `alallo models`.")]
TrainingFileOption = Annotated[
    str, typer.Option("--training-file", help="An uploaded file id, file-…")
]
AdapterOption = Annotated[
    Literal["lora", "full"] | None, typer.Option(help="Train a LoRA adapter or all weights.")
]
PrecisionOption = Annotated[
    Literal["16-bit", "4-bit"] | None, typer.Option(help="Precision of the weights.")
]
GoalOption = Annotated[
    Literal["lowest_cost", "fastest_finish"] | None, typer.Option(help="What to optimise for.")
]
EpochsOption = Annotated[int | None, typer.Option("--epochs", min=1, help="Passes over the data.")]
MaxStepsOption = Annotated[
    int | None, typer.Option(min=1, help="Steps to train (wins over --epochs).")
]
BatchSizeOption = Annotated[int | None, typer.Option(min=1, help="Examples per step.")]
LearningRateOption = Annotated[float | None, typer.Option(min=0.0, help="Learning rate.")]
LoraRankOption = Annotated[int | None, typer.Option(min=1, help="Rank of the LoRA matrices.")]
TrainerOption = Annotated[
    str | None,
    typer.Option(help="The trainer, by name: trl (real training, the default), simulated "
                      "(whose steps take far less time), or one the operator registered "
                      "(`alallo trainers`).", show_default=False),
]


def estimate(
    model: ModelOption,
    training_file: Annotated[
        str | None, typer.Option("--training-file", help="An uploaded file id, file-…")
    ] = None,
    adapter: AdapterOption = None,
    precision: PrecisionOption = None,
    goal: GoalOption = None,
    epochs: EpochsOption = None,
    max_steps: MaxStepsOption = None,
    batch_size: BatchSizeOption = None,
    learning_rate: LearningRateOption = None,
    lora_rank: LoraRankOption = None,
    validation_file: Annotated[str | None, typer.Option(help="A file id to evaluate on.")] = None,
    method: MethodOption = None,
    beta: BetaOption = None,
    grader: GraderOption = None,
    compute_multiplier: ComputeMultiplierOption = None,
    eval_interval: EvalIntervalOption = None,
    eval_samples: EvalSamplesOption = None,
    max_completion_tokens: MaxCompletionTokensOption = None,
    trainer: TrainerOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Estimate time and price of a job without creating it.

    --trainer simulated gives the estimate that jobs create --trainer
    simulated shows: the simulator's steps take far less time than real
    training, so its time and price are lower. A reinforcement job's estimate
    counts the answers it samples (--compute-multiplier,
    --max-completion-tokens), so give them as you would to jobs create.
    """
    grader_body, method_hyperparameters = method_fields(
        method, grader, beta=beta, compute_multiplier=compute_multiplier,
        eval_interval=eval_interval, eval_samples=eval_samples,
        max_completion_tokens=max_completion_tokens)
    hyperparameters = hyperparameter_fields(epochs, max_steps, batch_size, learning_rate, lora_rank)
    hyperparameters.update(method_hyperparameters)
    with open_client(url, api_key) as client:
        answer = client.estimate(
            model=model,
            training_file=training_file,
            validation_file=validation_file,
            method=method,
            grader=grader_body,
            adapter=adapter,
            precision=precision,
            goal=goal,
            hyperparameters=hyperparameters,
            trainer=trainer,
        )
    if as_json:
        print_json(answer)
        return
    out = console()
    if not answer.get("available", True):
        out.print(Text(str(answer.get("reason") or Message.NOT_AVAILABLE.value), style="yellow"))
        if answer.get("detail"):
            out.print(Text(f"{answer['detail']}."))
        return
    grid = Table.grid(padding=(0, 2))
    time_range = answer.get("time")
    grid.add_row("Time", time_range["text"] if time_range else "-")
    grid.add_row("Price", price_range(answer.get("price") or {}))
    plan = answer.get("plan")
    if plan:
        grid.add_row(
            "Plan",
            f"{plan.get('devices', '?')} × {plan.get('device_type', '?')}, "
            f"{plan.get('memory_gb', '?')} GB",
        )
    if trainer == "simulated":
        grid.add_row("Trainer", SIMULATED)
    if answer.get("note"):
        grid.add_row("Capacity", str(answer["note"]))
    if answer.get("allowed_to_proceed") is False:
        grid.add_row(
            "Balance",
            Text("The upper price exceeds your balance plus billing limit.", style="red"),
        )
    out.print(grid)


def hyperparameter_fields(
    epochs: int | None,
    max_steps: int | None,
    batch_size: int | None,
    learning_rate: float | None,
    lora_rank: int | None,
) -> HyperparameterFields:
    """The request's ``hyperparameters`` from the command's options (None: the server's default)."""
    return HyperparameterFields(
        n_epochs=epochs,
        max_steps=max_steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        lora_rank=lora_rank,
    )


SIMULATED = "simulated: its steps take far less time and cost than real training"


def confirm(quote: Mapping[str, Any], *, ask: bool, trainer: str | None) -> None:
    """Show an estimate; stop if the job cannot run, or if the user says no."""
    out = console()
    if not quote.get("available", True):
        reason = str(quote.get("reason") or Message.NOT_AVAILABLE.value)
        fail(f"{reason} {quote['detail']}." if quote.get("detail") else reason)
    out.print(f"Estimate: {estimate_text(quote)}", markup=False)
    if trainer == "simulated":
        out.print(f"Trainer: {SIMULATED}", markup=False)
    if quote.get("note"):
        out.print(quote["note"], markup=False)
    if quote.get("allowed_to_proceed") is False:
        out.print("Your balance and billing limit do not cover the upper price.", style="yellow")
    if ask and not typer.confirm("Create the job?", default=True):
        raise typer.Exit(1)


def estimate_text(estimate: Mapping[str, Any]) -> str:
    """An estimate on one line: ``<time text>, <price range>``."""
    parts = [str((estimate.get("time") or {}).get("text") or "")]
    if estimate.get("price"):
        parts.append(price_range(estimate["price"]))
    return ", ".join(part for part in parts if part)
