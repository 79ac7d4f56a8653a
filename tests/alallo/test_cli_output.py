"""What the ``alallo`` tables and details show on an 80-column terminal: nothing to copy is cut."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from alallo.cli import app
from alallo.cli._table import Column, fitted_table
from test_cli import FakeServer, JobFactory, _clean_env, listing, server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.unit

JOB_ID = "ft-4a5b6c7d8e9f0a1b2c3d4e5f"
FILE_ID = "file-3bcd4e5f6a7b8c9d0e1f2a3b"
MODEL_ID = "meta-llama/Llama-3.1-70B-Instruct"
BUDGET = "Stopped: the budget was reached"


def run80(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "80"})
    assert "Traceback" not in result.output
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    return result


def test_jobs_list_at_80_columns_keeps_ids_statuses_and_prices_whole(
    server: FakeServer, make_job: JobFactory
) -> None:
    server.on("GET", "/v1/fine_tuning/jobs", listing(
        make_job(id=JOB_ID, model=MODEL_ID, name="my first fine-tune"),
        make_job(id=JOB_ID.replace("4a5", "9z9"), status="succeeded", time_left=None,
                 price={"estimate": {"low": 0.1, "high": 0.2}, "charged": 0.000018,
                        "currency": "USD"}),
    ))
    out = run80("jobs", "list").stdout
    for whole in (JOB_ID, JOB_ID.replace("4a5", "9z9"), "running", "succeeded",
                  "$0.10 to $0.25", "$0.000018"):
        assert whole in out
    assert "…" not in out
    name = [line.split("│")[2].strip() for line in out.splitlines() if line.count("│") > 3]
    assert " ".join(part for part in name if part).startswith("my first fine-tune demo")
    assert "Progres" not in out, "the name, then the time left, outrank the percent"


def test_models_and_files_at_80_columns_keep_their_ids_whole(server: FakeServer) -> None:
    server.on("GET", "/v1/models", listing({
        "id": MODEL_ID, "parameters": 70_000_000_000, "context_length": 131072,
        "adapters": ["lora", "full"], "precisions": ["16-bit", "4-bit"], "runnable_here": False,
    }))
    server.on("GET", "/v1/files", listing({
        "id": FILE_ID, "filename": "customer-support-conversations-2026.jsonl", "bytes": 123456,
        "line_count": 5000, "format": "messages", "status": "processed",
        "created_at": 1_700_000_000,
    }))
    models = run80("models").stdout
    files = run80("files", "list").stdout
    assert MODEL_ID in models and "…" not in models
    assert FILE_ID in files and "processed" in files and "…" not in files
    assert "Filename" in files, "a long filename folds rather than push its column out"


def test_jobs_get_at_80_columns_shows_the_model_path_whole_and_an_error_once(
    server: FakeServer, make_job: JobFactory
) -> None:
    path = "/home/someone/projects/alallo/.alallo/models/" + JOB_ID + "/final"
    server.on("GET", f"/v1/fine_tuning/jobs/{JOB_ID}", make_job(
        id=JOB_ID, status="failed", message=BUDGET, fine_tuned_model=path,
        error={"code": "stopped", "message": BUDGET, "param": None}))
    server.on("GET", f"/v1/fine_tuning/jobs/{JOB_ID}/log", listing())
    out = run80("jobs", "get", JOB_ID).stdout
    assert "".join(line.strip() for line in out.splitlines()).count(path) == 1
    assert out.count(BUDGET) == 1, "not 'stopped: Stopped: the budget was reached'"
    assert "stopped:" not in out


def test_jobs_get_shows_an_error_that_adds_to_the_message(
    server: FakeServer, make_job: JobFactory
) -> None:
    server.on("GET", "/v1/fine_tuning/jobs/ft-1", make_job(
        status="failed", message="Failed. We've been notified and are looking into it.",
        error={"code": "platform_error", "message": "the trainer exited with code 1"}))
    server.on("GET", "/v1/fine_tuning/jobs/ft-1/log", listing())
    out = run80("jobs", "get", "ft-1").stdout
    assert "Error                 the trainer exited with code 1" in out


def test_create_and_estimate_with_the_simulated_trainer_ask_for_the_same_plan(
    server: FakeServer, make_job: JobFactory
) -> None:
    quote = {"available": True, "time": {"low_s": 5, "high_s": 20, "text": "< 1 min"},
             "price": {"low": 0.000012, "high": 0.000031, "currency": "USD"}}
    server.on("POST", "/v1/fine_tuning/estimates", quote)
    server.on("POST", "/v1/fine_tuning/jobs", make_job(status="queued", message="Starting"))
    common = ("--model", "alallo/tiny-gpt2", "--training-file", "file-1", "--trainer", "simulated")
    created = run80("jobs", "create", *common, "--yes").stdout
    estimated = run80("estimate", *common).stdout
    sent = [json.loads(r.content) for r in server.requests if r.url.path.endswith("/estimates")]
    assert sent[0] == sent[1] and sent[0]["trainer"] == "simulated"
    assert "Estimate: < 1 min, $0.000012 to $0.000031" in created
    assert "$0.000012 to $0.000031" in estimated
    assert "simulated: its steps take far less time" in created
    assert "simulated: its steps take far less time" in estimated


@pytest.mark.parametrize("width", range(60, 201))
def test_a_table_keeps_its_kept_values_and_its_right_edge_on_every_width(width: int) -> None:
    """Where the unwrapped table is a little wider than the terminal, rich shrank every
    column, kept ones too: ``$0.0000`` for ``$0.000026`` and the right border gone at some
    widths (found at 120-127 columns by a new user)."""
    columns = [Column("ID", keep=True), Column("Name", drop=4), Column("Model", drop=3),
               Column("Method", drop=5), Column("Status", keep=True),
               Column("Progress", drop=2), Column("Time left", drop=1),
               Column("Price", keep=True)]
    row = [JOB_ID, "my first fine-tuning run of the sample", "alallo/tiny-gpt2",
           "supervised lora 16-bit", "succeeded", "36/36 (100%)", "-", "$0.000026"]
    out = io.StringIO()
    console = Console(file=out, width=width)
    console.print(fitted_table(console, columns, [row] * 3))
    lines = out.getvalue().splitlines()
    assert all(len(line) <= width for line in lines)
    assert all(line.rstrip()[-1] in "┓┃┡│└┘┩┤┐" for line in lines if line.strip()), lines
    body = [line for line in lines if JOB_ID in line]
    assert len(body) == 3 and all("$0.000026" in line and "succeeded" in line for line in body)


def test_events_at_80_columns_give_the_message_room_before_the_time_and_hash(
        server: FakeServer) -> None:
    """A new user read messages 20 columns wide, 3 to 5 lines each, beside a 33-column Type:
    the message has 40 columns before the time and the hash are shown."""
    message = "Training data downloaded for alallo/tiny-gpt2 at Sun Dec 06 16:24:06 UTC 2026"
    server.on("GET", f"/v1/fine_tuning/jobs/{JOB_ID}/events", listing({
        "id": "ev-1", "object": "fine_tuning.job.event", "created_at": 1_700_000_000,
        "level": "info", "message": message, "type": "message",
        "alallo_type": "TRAINING_DATA_DOWNLOAD_COMPLETE", "hash": "1731272555435848274"}))
    out = run80("jobs", "events", JOB_ID).stdout
    assert "TRAINING_DATA_DOWNLOAD_COMPLETE" in out and "Created at" not in out
    [head] = [line for line in out.splitlines() if "Training data downloaded" in line]
    cell = head.split("│")[1]  # the message's first line, a space either side
    assert len(cell) >= 42 and cell.strip().startswith("Training data downloaded for"), out


def test_files_list_at_120_columns_shows_a_long_filename_whole(server: FakeServer) -> None:
    """It broke inside the name (``ft-01a2…│…-metr│ics.csv``) while the size and the date
    stayed: they go first."""
    name = "ft-01a24c2eb04ac44c29adf469-metrics.csv"
    server.on("GET", "/v1/files", listing({
        "id": FILE_ID, "filename": name, "bytes": 123456, "line_count": 5000,
        "format": "results", "status": "processed", "created_at": 1_700_000_000}))
    result = CliRunner().invoke(app, ["files", "list"], env={"COLUMNS": "120"})
    assert name in result.stdout and FILE_ID in result.stdout, result.stdout


def test_no_help_shows_the_docstrings_markup() -> None:
    """`jobs create --help` read "(``--yes`` skips the question…)": the reST quotes of the
    code's docstrings are not for the terminal. Every command's help, walked from the app."""
    import typer

    def commands(group: Any, path: list[str]) -> list[list[str]]:
        found = [path]
        for name, command in getattr(group, "commands", {}).items():  # a group's commands
            found += commands(command, [*path, name])
        return found

    every = commands(typer.main.get_command(app), [])
    assert ["jobs", "create"] in every and len(every) > 40
    for path in every:
        result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
        assert result.exit_code == 0, path
        assert "``" not in result.stdout, (path, result.stdout)
