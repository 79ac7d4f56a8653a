"""The ``alallo`` command line, against a scripted fake server (``httpx.MockTransport``)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console
from typer.testing import CliRunner

import alallo.cli._common
from alallo.cli import app
from alallo.cli._watch import watch_job
from alallo.client import Client

pytestmark = pytest.mark.unit

JobFactory = Callable[..., dict[str, Any]]
SseBody = Callable[..., bytes]
Route = Callable[[httpx.Request], httpx.Response]
SSE_HEADERS = {"content-type": "text/event-stream"}
WANDB_FAILED = "WandB login or init failed: API key must be 40 characters long, yours was 17"


class FakeServer:
    """Answers ``(method, path)`` from a table; anything else is a 404 error body."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Route] = {}
        self.requests: list[httpx.Request] = []

    def on(self, method: str, path: str, answer: Route | dict[str, Any]) -> None:
        if isinstance(answer, dict):
            body = answer
            self.routes[method, path] = lambda request: httpx.Response(200, json=body)
        else:
            self.routes[method, path] = answer

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        route = self.routes.get((request.method, request.url.path))
        if route is None:
            return error(404, "not_found", f"no such thing: {request.url.path}")
        return route(request)

    def client(self, url: str | None, api_key: str | None) -> Client:
        return Client(
            url or "http://alallo.test",
            api_key=api_key or "k-test",
            transport=httpx.MockTransport(self),
        )


def error(status: int, code: str, message: str, param: str | None = None) -> httpx.Response:
    return httpx.Response(
        status, json={"error": {"code": code, "message": message, "param": param}}
    )


def listing(*items: dict[str, Any], has_more: bool = False) -> dict[str, Any]:
    return {"object": "list", "data": list(items), "has_more": has_more}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ALALLO_URL", "ALALLO_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALALLO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(time, "sleep", lambda seconds: None)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    fake = FakeServer()
    monkeypatch.setattr(alallo.cli._common, "make_client", fake.client)
    return fake


def run(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert "Traceback" not in result.output
    return result


def table_rows(output: str) -> list[list[str]]:
    """The cells of each row of a rich table, whitespace trimmed."""
    return [
        [cell.strip() for cell in line.strip().strip("│┃").split("│" if "│" in line else "┃")]
        for line in output.splitlines()
        if line.strip().startswith(("│", "┃"))
    ]


# -- errors -------------------------------------------------------------------------


def test_missing_key_is_one_red_line_and_exit_1() -> None:
    result = run("jobs", "list")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("Error: no API key: pass --api-key, set ALALLO_API_KEY")
    assert "`alallo serve`" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unreachable_server_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("Connection refused", request=request)

    monkeypatch.setattr(
        alallo.cli._common,
        "make_client",
        lambda url, key: Client(url, api_key="k", transport=httpx.MockTransport(refuse)),
    )
    result = run("jobs", "get", "ft-1", "--url", "http://127.0.0.1:9")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: cannot reach alallo at http://127.0.0.1:9: is the server running? "
        "start it with `alallo serve`; if it runs elsewhere, set ALALLO_URL (or --url) "
        "to the address `alallo serve` printed\n"
    )


def test_cancelling_a_finished_job_prints_the_servers_message(server: FakeServer) -> None:
    server.on(
        "POST",
        "/v1/fine_tuning/jobs/ft-1/cancel",
        lambda request: error(409, "invalid_transition", "cannot cancel ft-1: the job has already finished (succeeded)"),
    )
    result = run("jobs", "cancel", "ft-1")
    assert result.exit_code == 1
    assert result.stderr == "Error: cannot cancel ft-1: the job has already finished (succeeded)\n"


def test_cancel_prints_the_new_status(server: FakeServer, make_job: JobFactory) -> None:
    server.on("POST", "/v1/fine_tuning/jobs/ft-1/cancel", make_job(status="cancelling"))
    result = run("jobs", "cancel", "ft-1")
    assert (result.exit_code, result.stdout) == (0, "ft-1  cancelling\n")


def test_pause_and_resume_print_the_new_status_and_message(server: FakeServer,
                                                           make_job: JobFactory) -> None:
    server.on("POST", "/v1/fine_tuning/jobs/ft-1/pause", make_job(
        status="paused", message="Paused at step 7. Resume it to continue from step 7."))
    server.on("POST", "/v1/fine_tuning/jobs/ft-1/resume",
              make_job(status="queued", message="Starting"))
    result = run("jobs", "pause", "ft-1")
    assert (result.exit_code, result.stdout) == (
        0, "ft-1  paused · Paused at step 7. Resume it to continue from step 7.\n")
    result = run("jobs", "resume", "ft-1")
    assert (result.exit_code, result.stdout) == (0, "ft-1  queued · Starting\n")


def test_resuming_a_job_that_is_not_paused_prints_the_servers_message(server: FakeServer) -> None:
    server.on("POST", "/v1/fine_tuning/jobs/ft-1/resume", lambda request: error(
        409, "invalid_transition", "cannot resume ft-1: it is not paused (it is running)"))
    result = run("jobs", "resume", "ft-1")
    assert (result.exit_code, result.stderr) == (
        1, "Error: cannot resume ft-1: it is not paused (it is running)\n")


def test_a_bad_upload_names_the_line(server: FakeServer, tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text("{}\n")
    server.on(
        "POST",
        "/v1/files",
        lambda request: error(400, "invalid_file", "line 7: not a JSON object", "file"),
    )
    result = run("files", "upload", str(data))
    assert result.exit_code == 1
    assert result.stderr == "Error: line 7: not a JSON object (param: file)\n"


# -- files and models -----------------------------------------------------------------


def test_upload_prints_id_filename_lines_and_format(server: FakeServer, tmp_path: Path) -> None:
    data = tmp_path / "chat.jsonl"
    data.write_text('{"messages": []}\n')
    server.on(
        "POST",
        "/v1/files",
        {
            "id": "file-9",
            "filename": "chat.jsonl",
            "bytes": 17,
            "line_count": 1,
            "format": "messages",
            "status": "processed",
        },
    )
    result = run("files", "upload", str(data))
    assert result.exit_code == 0
    assert result.stdout == "file-9\nchat.jsonl: 1 lines, format messages, 17 bytes, processed\n"
    assert run("files", "upload", str(tmp_path / "missing.jsonl")).exit_code == 2


def test_models_table_with_and_without_list(server: FakeServer) -> None:
    server.on(
        "GET",
        "/v1/models",
        listing(
            {
                "id": "alallo/tiny-gpt2",
                "parameters": 2_500_000,
                "context_length": 256,
                "adapters": ["lora", "full"],
                "precisions": ["16-bit"],
                "runnable_here": True,
            },
            {
                "id": "meta/llama-70b",
                "parameters": 70_000_000_000,
                "context_length": 8192,
                "adapters": ["lora"],
                "precisions": ["16-bit", "4-bit"],
                "runnable_here": False,
            },
        ),
    )
    for args in (("models",), ("models", "list")):
        result = run(*args)
        assert result.exit_code == 0
        assert table_rows(result.stdout) == [
            ["ID", "Parameters", "Context", "Adapters", "Precisions", "Runs here"],
            ["alallo/tiny-gpt2", "2.5M", "256", "lora, full", "16-bit", "yes"],
            ["meta/llama-70b", "70B", "8192", "lora", "16-bit, 4-bit", "no"],
        ]
    assert json.loads(run("models", "--json").stdout)["data"][0]["id"] == "alallo/tiny-gpt2"


def test_estimate_that_cannot_run_says_why(server: FakeServer) -> None:
    reason = "Not available right now. Choose a lower precision."
    detail = "4-bit needs a GPU; this server has only CPU nodes"
    server.on("POST", "/v1/fine_tuning/estimates", {"available": False, "reason": reason})
    result = run("estimate", "--model", "meta/llama-70b", "--precision", "16-bit")
    assert (result.exit_code, result.stdout) == (0, reason + "\n")
    assert json.loads(server.requests[-1].content) == {
        "model": "meta/llama-70b",
        "precision": "16-bit",
    }
    server.on("POST", "/v1/fine_tuning/estimates",
              {"available": False, "reason": "Not available right now.", "detail": detail})
    result = run("estimate", "--model", "alallo/tiny-gpt2", "--precision", "4-bit")
    assert result.stdout == f"Not available right now.\n{detail}.\n"


# -- jobs ---------------------------------------------------------------------------------


def test_events_table_has_the_seed_columns_oldest_first_across_pages(server: FakeServer) -> None:
    events = [
        {
            "id": "ev-1",
            "seq": 1,
            "created_at": 1_700_000_000,
            "level": "info",
            "type": "message",
            "alallo_type": "JOB_PENDING",
            "message": "Fine tune request created",
            "hash": None,
        },
        {
            "id": "ev-2",
            "seq": 2,
            "created_at": 1_700_000_001,
            "level": "info",
            "type": "message",
            "alallo_type": "JOB_START",
            "message": "Job started",
            "hash": "8275378180435023547",
        },
        {
            "id": "ev-3",
            "seq": 3,
            "created_at": 1_700_000_002,
            "level": "error",
            "type": "message",
            "alallo_type": "WANDB_INIT",
            "message": WANDB_FAILED,
            "hash": "-748217494451531697",
        },
    ]

    def page(request: httpx.Request) -> httpx.Response:
        assert (request.url.params["order"], request.url.params["type"]) == ("asc", "message")
        if request.url.params.get("after") is None:
            return httpx.Response(200, json=listing(*events[:2], has_more=True))
        assert request.url.params["after"] == "2"
        return httpx.Response(200, json=listing(events[2]))

    server.on("GET", "/v1/fine_tuning/jobs/ft-1/events", page)
    result = run("jobs", "events", "ft-1")
    assert result.exit_code == 0
    rows = table_rows(result.stdout)
    assert rows[0] == ["Message", "Type", "Created at", "Hash"]
    assert [(row[0], row[1], row[3]) for row in rows[1:]] == [
        ("Fine tune request created", "JOB_PENDING", ""),
        ("Job started", "JOB_START", "8275378180435023547"),
        (
            WANDB_FAILED,
            "WANDB_INIT",
            "-748217494451531697",
        ),
    ]
    assert all(len(row[2]) == len("2023-11-14 22:13:20") for row in rows[1:])
    assert len(json.loads(run("jobs", "events", "ft-1", "--json").stdout)["data"]) == 3


def test_jobs_list_table(server: FakeServer, make_job: JobFactory) -> None:
    server.on(
        "GET",
        "/v1/fine_tuning/jobs",
        listing(
            make_job(),
            make_job(
                id="ft-0",
                name=None,
                status="succeeded",
                time_left=None,
                price={"estimate": {"low": 0.1, "high": 0.2}, "charged": 0.004, "currency": "USD"},
            ),
        ),
    )
    result = run("jobs", "list")
    assert result.exit_code == 0
    assert table_rows(result.stdout) == [
        ["ID", "Name", "Model", "Method", "Status", "Progress", "Time left", "Price"],
        [
            "ft-1",
            "demo",
            "alallo/tiny-gpt2",
            "supervised, lora, 16-bit",
            "running",
            "40%",
            "2 min to 5 min",
            "$0.10 to $0.25",
        ],
        [
            "ft-0",
            "",
            "alallo/tiny-gpt2",
            "supervised, lora, 16-bit",
            "succeeded",
            "40%",
            "-",
            "$0.0040",
        ],
    ]
    assert server.requests[-1].url.params["limit"] == "20"


def test_jobs_get_shows_the_detail_and_says_when_there_is_no_log(
    server: FakeServer, make_job: JobFactory
) -> None:
    server.on("GET", "/v1/fine_tuning/jobs/ft-1", make_job())
    server.on("GET", "/v1/fine_tuning/jobs/ft-1/log", listing())
    result = run("jobs", "get", "ft-1")
    assert result.exit_code == 0
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert "Status                running" in lines
    assert "Progress              40/100 (40%)" in lines
    assert "Time left (estimate)  2 min to 5 min" in lines
    assert "Price                 estimate $0.10 to $0.25, charged $0.00" in lines
    assert lines[-1] == "No log yet. It appears once training starts."


def test_jobs_get_shows_the_end_of_the_log(server: FakeServer, make_job: JobFactory) -> None:
    server.on(
        "GET",
        "/v1/fine_tuning/jobs/ft-1",
        make_job(
            status="succeeded",
            fine_tuned_model="alallo/tiny-gpt2:ft-1",
            progress={"step": 100, "max_steps": 100, "percent": 100.0},
            hyperparameters={"n_epochs": 9, "max_steps": 100, "batch_size": 8,
                             "learning_rate": 2e-4, "learning_rate_multiplier": 0.2},
            seed=42, trained_tokens=12_800,
        ),
    )
    log = [{"n": n, "at": 0, "text": f"step {n * 10} loss {3 - n / 10:.2f}"} for n in range(1, 26)]
    server.on("GET", "/v1/fine_tuning/jobs/ft-1/log", listing(*log))
    result = run("jobs", "get", "ft-1")
    lines = result.stdout.splitlines()
    assert "Fine-tuned model      alallo/tiny-gpt2:ft-1" in [line.rstrip() for line in lines]
    assert "Training              9 epochs, batch 8, learning rate 0.0002 (x0.2), seed 42" in [
        line.rstrip() for line in lines]
    assert "Trained tokens        12,800" in [line.rstrip() for line in lines]
    assert "Log (the last 20 of 25 lines; all of it: alallo jobs logs ft-1)" in lines
    assert lines[-20:] == [line["text"] for line in log[-20:]]


ESTIMATE = {"available": True, "reason": None,
            "time": {"low_s": 2400, "high_s": 4680, "text": "40 min to 1.3 h", "basis": "estimate"},
            "price": {"low": 1.0, "high": 2.0, "currency": "USD"}, "capacity_free": True,
            "note": None, "plan": {"devices": 1, "device_type": "cpu", "memory_gb": 0.2},
            "allowed_to_proceed": True}


def test_jobs_create_sends_the_options_given_and_prints_id_status_message(
    server: FakeServer, make_job: JobFactory
) -> None:
    server.on("POST", "/v1/fine_tuning/estimates", ESTIMATE)
    server.on("POST", "/v1/fine_tuning/jobs", make_job(status="queued", message="Starting"))
    result = run(
        "jobs",
        "create",
        "--model",
        "alallo/tiny-gpt2",
        "--training-file",
        "file-1",
        "--adapter",
        "lora",
        "--max-steps",
        "30",
        "--learning-rate",
        "0.001",
        "--trainer",
        "simulated",
    )
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0].startswith("Estimate: 40 min to 1.3 h, $1")
    assert result.stdout.splitlines()[-1] == "ft-1  queued · Starting"
    assert json.loads(server.requests[-1].content) == {
        "model": "alallo/tiny-gpt2",
        "training_file": "file-1",
        "adapter": "lora",
        "hyperparameters": {"max_steps": 30, "learning_rate": 0.001},
        "trainer": "simulated",
    }
    bad = run("jobs", "create", "--model", "m", "--training-file", "f", "--adapter", "half")
    assert bad.exit_code == 2


def test_jobs_create_refuses_a_job_that_cannot_run(server: FakeServer) -> None:
    server.on("POST", "/v1/fine_tuning/estimates", {
        **ESTIMATE, "available": False, "time": None, "price": None, "plan": None,
        "reason": "Not available right now. Choose a lower precision.",
        "detail": "At 16-bit the job needs about 182 GB of GPU memory; at 4-bit it fits"})
    result = run("jobs", "create", "--model", "meta-llama/Llama-3.1-70B",
                 "--training-file", "file-1")
    assert result.exit_code == 1
    assert ("Not available right now. Choose a lower precision. At 16-bit the job needs "
            "about 182 GB of GPU memory; at 4-bit it fits.") in " ".join(result.stderr.split())
    assert not any(r.url.path == "/v1/fine_tuning/jobs" for r in server.requests)


def test_jobs_create_watch_follows_to_the_end(
    server: FakeServer, make_job: JobFactory, sse_body: SseBody
) -> None:
    server.on("POST", "/v1/fine_tuning/estimates", ESTIMATE)
    server.on("POST", "/v1/fine_tuning/jobs", make_job(status="queued", message="Starting"))
    body = sse_body(
        ("job", 1, make_job(status="queued", message="Starting")),
        ("event", 2, {"type": "message", "alallo_type": "JOB_START", "message": "Job started"}),
        ("job", 3, make_job(status="running")),
        ("log", 4, {"n": 1, "at": 0, "text": "step 10/100 loss 2.31"}),
        (
            "job",
            5,
            make_job(
                status="succeeded",
                fine_tuned_model="alallo/tiny-gpt2:ft-1",
                finished_at=1,
                price={"estimate": {"low": 0.1, "high": 0.2}, "charged": 0.12, "currency": "USD"},
            ),
        ),
    )
    server.on(
        "GET",
        "/v1/fine_tuning/jobs/ft-1/stream",
        lambda request: httpx.Response(200, headers=SSE_HEADERS, content=body),
    )
    result = run("jobs", "create", "--model", "m", "--training-file", "f", "--watch")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1:] == [
        "ft-1  queued · Starting",
        "queued · Starting",
        "JOB_START: Job started",
        "running",
        "step 10/100 loss 2.31",
        "succeeded",
        "Fine-tuned model: alallo/tiny-gpt2:ft-1",
        "Download it: alallo models download alallo/tiny-gpt2:ft-1",
        "Charged: $0.12",
    ]


def test_jobs_watch_exits_1_when_the_job_failed(
    server: FakeServer, make_job: JobFactory, sse_body: SseBody
) -> None:
    body = sse_body(
        ("job", 9, make_job(status="failed", message="Training failed: KeyError: 'text'"))
    )
    server.on(
        "GET",
        "/v1/fine_tuning/jobs/ft-1/stream",
        lambda request: httpx.Response(200, headers=SSE_HEADERS, content=body),
    )
    result = run("jobs", "watch", "ft-1")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == "failed · Training failed: KeyError: 'text'"


def test_jobs_logs_follow_prints_each_line_once(
    server: FakeServer, make_job: JobFactory, sse_body: SseBody
) -> None:
    server.on("GET", "/v1/fine_tuning/jobs/ft-1/log", listing({"n": 1, "at": 0, "text": "first"}))
    body = sse_body(
        ("log", 3, {"n": 1, "at": 0, "text": "first"}),
        ("job", 4, make_job()),
        ("log", 5, {"n": 2, "at": 0, "text": "second"}),
        ("job", 6, make_job(status="succeeded")),
    )
    server.on(
        "GET",
        "/v1/fine_tuning/jobs/ft-1/stream",
        lambda request: httpx.Response(200, headers=SSE_HEADERS, content=body),
    )
    assert run("jobs", "logs", "ft-1").stdout == "first\n"
    assert run("jobs", "logs", "ft-1", "--follow").stdout == "first\nsecond\n"


def test_jobs_logs_of_a_job_not_started(server: FakeServer) -> None:
    server.on("GET", "/v1/fine_tuning/jobs/ft-1/log", listing())
    assert run("jobs", "logs", "ft-1").stdout == "No log yet. It appears once training starts.\n"


def test_unknown_job_is_a_404_line(server: FakeServer) -> None:
    result = run("jobs", "get", "ft-404")
    assert result.exit_code == 1
    assert result.stderr == "Error: no such thing: /v1/fine_tuning/jobs/ft-404\n"


# -- watch_job on a terminal ------------------------------------------------------------


def test_watch_job_on_a_terminal_draws_a_bar_and_keeps_the_log(
    server: FakeServer, make_job: JobFactory, sse_body: SseBody
) -> None:
    body = sse_body(
        ("job", 1, make_job(progress={"step": 10, "max_steps": 100, "percent": 10.0})),
        ("log", 2, {"n": 1, "at": 0, "text": "step 10 loss=2.31"}),
        (
            "job",
            3,
            make_job(
                status="succeeded", progress={"step": 100, "max_steps": 100, "percent": 100.0}
            ),
        ),
    )
    server.on(
        "GET",
        "/v1/fine_tuning/jobs/ft-1/stream",
        lambda request: httpx.Response(200, headers=SSE_HEADERS, content=body),
    )
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    job = watch_job(server.client(None, None), "ft-1", console=console)
    assert job["status"] == "succeeded"
    text = out.getvalue()
    assert "step 10 loss=2.31" in text
    assert "100/100" in text
    assert "loss 2.31" in text  # the latest loss, on the bar


def test_watch_shows_the_loss_sparkline_and_each_checkpoint_once(
    server: FakeServer, make_job: JobFactory, sse_body: SseBody
) -> None:
    body = sse_body(
        ("job", 1, make_job(progress={"step": 10, "max_steps": 30, "percent": 33.3})),
        *[item for step, loss in ((10, 3.0), (20, 2.0), (30, 1.5)) for item in (
            ("metrics", step, {"object": "fine_tuning.job.metrics", "step": step,
                               "train_loss": loss}),
            ("log", step + 1, {"n": step + 1, "at": 0, "text": f"Step {step}/30: loss {loss}"}),
            ("log", step + 2, {"n": step + 2, "at": 0, "text": f"Checkpoint saved at step {step}"}),
            ("event", step + 3, {"type": "message", "alallo_type": "CHECKPOINT_SAVE",
                                 "message": f"Checkpoint saved at step {step}"}),
            ("event", step + 4, {"type": "message", "alallo_type": "EPOCH_COMPLETE",
                                 "message": "Epoch 1 completed"}))],
        ("job", 40, make_job(status="succeeded",
                             progress={"step": 30, "max_steps": 30, "percent": 100.0})),
    )
    server.on("GET", "/v1/fine_tuning/jobs/ft-1/stream",
              lambda request: httpx.Response(200, headers=SSE_HEADERS, content=body))
    out = io.StringIO()
    watch_job(server.client(None, None), "ft-1",
              console=Console(file=out, force_terminal=True, width=160))
    text = out.getvalue()
    assert text.count("Checkpoint saved at step 20") == 1  # the log's line, not the event too
    assert "Epoch 1 completed" not in text
    assert "loss 1.5000 █▃▁" in text  # the newest loss, and the way it went


def test_sparkline_spans_the_blocks_from_lowest_to_highest() -> None:
    from alallo.cli._watch import sparkline

    assert sparkline([3.0, 2.0, 1.0]) == "█▅▁"
    assert sparkline([2.0, 2.0]) == "▄▄" and sparkline([]) == ""
