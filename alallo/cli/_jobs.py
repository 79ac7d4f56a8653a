"""``alallo jobs`` and ``alallo estimate``: create, follow, inspect and cancel jobs."""

from __future__ import annotations

import collections
import sys
from collections.abc import Mapping
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from alallo._status import JobStatus
from alallo.api import TrainingLogLine
from alallo.cli._common import (
    ApiKeyOption,
    JsonOption,
    UrlOption,
    console,
    error_text,
    fail,
    money,
    open_client,
    percent_text,
    price_range,
    price_text,
    print_json,
    progress_text,
    show_job,
    status_text,
    time_left_text,
    timestamp,
)
from alallo.cli._estimate import (
    AdapterOption,
    BatchSizeOption,
    EpochsOption,
    GoalOption,
    LearningRateOption,
    LoraRankOption,
    MaxStepsOption,
    ModelOption,
    PrecisionOption,
    TrainerOption,
    TrainingFileOption,
    confirm,
    hyperparameter_fields,
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
from alallo.cli._table import Column, fitted_table
from alallo.cli._watch import watch_job
from alallo.client import Client

__all__ = ["jobs_app"]

jobs_app = typer.Typer(rich_markup_mode=None, 
    no_args_is_help=True, help="Create, follow, inspect and cancel fine-tuning jobs."
)

LOG_TAIL_LINES = 20
"""Lines of the training log that ``jobs get`` shows; ``jobs logs`` shows all."""
NO_LOG_YET = "No log yet. It appears once training starts."

JobIdArgument = Annotated[str, typer.Argument(help="A job id, ft-…", show_default=False)]


@jobs_app.command("create")
def create(
    model: ModelOption,
    training_file: TrainingFileOption,
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
    name: Annotated[str | None, typer.Option(help="A name for the Jobs tab.")] = None,
    suffix: Annotated[
        str | None, typer.Option(help="Added to the fine-tuned model's name.")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed.")] = None,
    trainer: TrainerOption = None,
    watch: Annotated[bool, typer.Option("--watch", help="Follow the job until it ends.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Create without asking.")] = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a fine-tuning job; it starts queued, with the message Starting.

    The estimate of time and price comes first, and on a terminal you are
    asked to confirm it (--yes skips the question; scripts are not asked).
    --method reinforcement trains on prompts, scoring the model's answers
    with the grader of --grader FILE (OpenAI's JSON).
    """
    grader_body, method_hyperparameters = method_fields(
        method, grader, beta=beta, compute_multiplier=compute_multiplier,
        eval_interval=eval_interval, eval_samples=eval_samples,
        max_completion_tokens=max_completion_tokens)
    hyperparameters = hyperparameter_fields(epochs, max_steps, batch_size, learning_rate, lora_rank)
    hyperparameters.update(method_hyperparameters)
    with open_client(url, api_key) as client:
        if not as_json:
            quote = client.estimate(
                model=model, training_file=training_file, validation_file=validation_file,
                method=method, grader=grader_body, adapter=adapter, precision=precision,
                goal=goal, hyperparameters=hyperparameters, trainer=trainer)
            confirm(quote, ask=not yes and sys.stdin.isatty(), trainer=trainer)
        job = client.create_job(
            model=model,
            training_file=training_file,
            validation_file=validation_file,
            method=method,
            grader=grader_body,
            name=name,
            suffix=suffix,
            adapter=adapter,
            precision=precision,
            goal=goal,
            hyperparameters=hyperparameters,
            seed=seed,
            trainer=trainer,
        )
        if as_json:
            print_json(job)
        else:
            out = console()
            out.print(Text.assemble((job["id"], "bold"), "  ", status_text(job)))
        if watch:
            _watch(client, job["id"])


@jobs_app.command("list")
def list_jobs(
    limit: Annotated[int, typer.Option(min=1, help="How many jobs, newest first.")] = 20,
    metadata: Annotated[list[str] | None, typer.Option(
        "--metadata", metavar="KEY=VALUE", show_default=False,
        help="Only jobs whose metadata holds this pair (repeat for more).")] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """List your jobs, newest first."""
    pairs = [item.partition("=") for item in metadata or ()]
    if any(not sep for _, sep, _ in pairs):
        fail("give --metadata as KEY=VALUE")
    with open_client(url, api_key) as client:
        page = client.list_jobs(limit=limit,
                                metadata={key: value for key, _, value in pairs} or None)
    if as_json:
        print_json(page)
        return
    if not page["data"]:
        console().print("No jobs yet. Create one with `alallo jobs create`.", markup=False)
        return
    out = console()
    # The name stays on any width (it wraps): the model, the method, then the progress
    # and the time left go first.
    columns = [Column("ID", keep=True), Column("Name", room=24), Column("Model", drop=4),
               Column("Method", drop=5, room=24), Column("Status", keep=True),
               Column("Progress", drop=2), Column("Time left", drop=1), Column("Price", keep=True)]
    rows: list[list[str | Text]] = [
        [
            job["id"],
            str(job.get("name") or ""),
            str(job.get("model", "")),
            _method_text(job),
            status_text({"status": job.get("status")}),
            percent_text(job),
            time_left_text(job),
            price_text(job),
        ]
        for job in page["data"]
    ]
    out.print(fitted_table(out, columns, rows))


@jobs_app.command("get")
def get(
    job_id: JobIdArgument,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a job: status, progress, time left, price, checkpoint and the end of its log."""
    with open_client(url, api_key) as client:
        job = client.get_job(job_id)
        if as_json:
            print_json(job)
            return
        log: collections.deque[TrainingLogLine] = collections.deque(maxlen=LOG_TAIL_LINES)
        total = 0
        for line in client.iter_log(job_id):
            log.append(line)
            total += 1
    out = console()
    out.print(Text.assemble((job["id"], "bold"), "  ", str(job.get("name") or "")))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")  # a path or an id folds, and is never cut
    grid.add_row("Status", status_text(job))
    grid.add_row("Progress", progress_text(job))
    grid.add_row("Time left (estimate)", time_left_text(job))
    grid.add_row("Price", _price_detail(job))
    checkpoint = job.get("checkpoint")
    if checkpoint:
        grid.add_row(
            "Checkpoint",
            f"step {checkpoint.get('step')}, {timestamp(checkpoint.get('created_at'))}",
        )
    if job.get("fine_tuned_model"):
        grid.add_row("Fine-tuned model", Text(str(job["fine_tuned_model"]), style="bold"))
    if job.get("fine_tuned_model_path"):
        grid.add_row("Files", str(job["fine_tuned_model_path"]))
    error = error_text(job)
    if error:
        grid.add_row("Error", Text(error, style="red"))
    grid.add_row("Model", f"{job.get('model', '')} ({_method_text(job)})")
    if _training_text(job):
        grid.add_row("Training", _training_text(job))
    if job.get("trained_tokens") is not None:
        grid.add_row("Trained tokens", f"{job['trained_tokens']:,}")
    if job.get("validation_file"):
        grid.add_row("Validation file", str(job["validation_file"]))
    if job.get("result_files"):  # the metrics CSV: alallo files download ID
        grid.add_row("Result files", ", ".join(job["result_files"]))
    grid.add_row("Created at", timestamp(job.get("created_at")))
    out.print(grid)
    out.print()
    if not log:
        out.print(NO_LOG_YET, markup=False)
        return
    heading = "Log"
    if total > len(log):
        heading += f" (the last {len(log)} of {total} lines; all of it: alallo jobs logs {job_id})"
    out.print(Text(heading, style="bold"))
    for line in log:
        out.print(str(line.get("text", "")), markup=False, soft_wrap=True)


@jobs_app.command("cancel")
def cancel(
    job_id: JobIdArgument,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cancel a job. A queued job costs nothing; a running one pays the steps done."""
    with open_client(url, api_key) as client:
        show_job(client.cancel_job(job_id), as_json)


@jobs_app.command("events")
def events(
    job_id: JobIdArgument,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """List a job's events, oldest first: why it started, stopped or was cancelled."""
    with open_client(url, api_key) as client:
        items = list(client.iter_events(job_id))
    if as_json:
        print_json({"object": "list", "data": items, "has_more": False})
        return
    out = console()
    # The message is what a user reads: 40 columns of it before the time and the hash.
    columns = [Column("Message", room=40), Column("Type", keep=True),
               Column("Created at", keep=True, drop=1), Column("Hash", keep=True, drop=2)]
    rows = []
    for event in items:
        style = {"warn": "yellow", "error": "red"}.get(str(event.get("level")), "")
        rows.append([
            Text(str(event.get("message", "")), style=style),
            Text(str(event.get("alallo_type") or event.get("type", "")), style=style),
            Text(timestamp(event.get("created_at")), style=style),
            Text(str(event.get("hash") or ""), style=style),
        ])
    out.print(fitted_table(out, columns, rows))


@jobs_app.command("logs")
def logs(
    job_id: JobIdArgument,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new lines until the job ends.")
    ] = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Print a job's training log."""
    with open_client(url, api_key) as client:
        last = 0
        for line in client.iter_log(job_id):
            typer.echo(line.get("text", ""))
            last = max(last, int(line.get("n", 0)))
        if not follow:
            if last == 0:
                typer.echo(NO_LOG_YET)
            return
        try:
            for item in client.watch(job_id):
                # The stream may replay lines printed above; `n` tells them apart.
                if item.kind == "log" and int(item.data.get("n", 0)) > last:
                    typer.echo(item.data.get("text", ""))
                    last = int(item.data.get("n", 0))
        except KeyboardInterrupt:
            raise typer.Exit(130) from None


@jobs_app.command("watch")
def watch(
    job_id: JobIdArgument,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Follow a job live until it ends: status, progress bar, loss (and reward), time left, log.

    Exits with 1 if the job failed.
    """
    with open_client(url, api_key) as client:
        _watch(client, job_id)


def _watch(client: Client, job_id: str) -> None:
    try:
        job = watch_job(client, job_id, console=console())
    except KeyboardInterrupt:
        console().print(
            f"Stopped watching; the job goes on. Resume with `alallo jobs watch {job_id}`.",
            markup=False,
        )
        raise typer.Exit(130) from None
    if job.get("status") == JobStatus.FAILED:
        raise typer.Exit(1)


def _method_text(job: Mapping[str, Any]) -> str:
    method = job.get("method")  # OpenAI's object {"type": ...}; a string from older servers
    kind = method.get("type") if isinstance(method, dict) else method
    parts = [kind if isinstance(kind, str) else None, job.get("adapter"), job.get("precision")]
    return ", ".join(str(part) for part in parts if part)


def _training_text(job: Mapping[str, Any]) -> str:
    """``3 epochs, batch 4, learning rate 0.001 (x1), seed 42``: what the job trains with,
    from its ``hyperparameters`` and ``seed``; the parts it lacks are left out."""
    hp = job.get("hyperparameters") or {}
    parts = [f"{hp['n_epochs']} epoch{'' if hp['n_epochs'] == 1 else 's'}"
             if hp.get("n_epochs") is not None else None,
             f"batch {hp['batch_size']}" if hp.get("batch_size") is not None else None,
             f"learning rate {hp['learning_rate']:g}"
             + (f" (x{hp['learning_rate_multiplier']:g})"
                if hp.get("learning_rate_multiplier") is not None else "")
             if hp.get("learning_rate") is not None else None,
             f"seed {job['seed']}" if job.get("seed") is not None else None]
    return ", ".join(part for part in parts if part)


def _price_detail(job: Mapping[str, Any]) -> str:
    price = job.get("price") or {}
    currency = price.get("currency")
    text = f"estimate {price_range({**(price.get('estimate') or {}), 'currency': currency})}"
    if price.get("charged") is not None:
        text += f", charged {money(price['charged'], currency)}"
    if price.get("refunded"):
        text += f", refunded {money(price['refunded'], currency)}"
    return text


