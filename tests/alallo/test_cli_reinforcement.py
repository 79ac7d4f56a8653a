"""Reinforcement fine-tuning from the command line: ``jobs create --method reinforcement
--grader FILE`` and ``estimate`` with the grader and its hyperparameters, the refusals of a
grader that cannot be sent, the reward in ``jobs metrics`` and on the watch's bar; against
a scripted fake server, and a tiny real job on a live one."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console
from support import LiveServer
from typer.testing import CliRunner

import alallo.cli._common
from alallo.cli import app
from alallo.cli._watch import watch_job
from alallo.client import Client

JobFactory = Callable[..., dict[str, Any]]
SseBody = Callable[..., bytes]

EXACT = {"type": "string_check", "name": "exact", "input": "{{ sample.output_text }}",
         "reference": "{{ item.answer }}", "operation": "eq"}
ESTIMATE = {"available": True, "reason": None, "detail": None,
            "time": {"low_s": 60, "high_s": 120, "text": "1 min to 2 min", "basis": "estimate"},
            "price": {"low": 0.01, "high": 0.02, "currency": "USD"}, "capacity_free": True,
            "note": None, "plan": None, "allowed_to_proceed": True}
RL_OPTIONS = ("--method", "reinforcement", "--max-steps", "2", "--batch-size", "2",
              "--compute-multiplier", "0.5", "--max-completion-tokens", "8")


def prompts(count: int) -> str:
    """OpenAI's RFT rows: a conversation ending before the answer, and the grader's field."""
    return "".join(json.dumps({"messages": [{"role": "user", "content": f"Say {i}."}],
                               "answer": str(i)}) + "\n" for i in range(count))


class _Recorder:
    """A fake server: answers each ``(method, path)`` from a table, keeps every request."""

    def __init__(self, answers: dict[tuple[str, str], httpx.Response]) -> None:
        self.answers = answers
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answers.get((request.method, request.url.path)) or httpx.Response(
            404, json={"error": {"code": "not_found", "message": "no such thing", "param": None}})

    def bodies(self, path: str) -> list[Any]:
        return [json.loads(r.content) for r in self.requests if r.url.path == path]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> _Recorder:
    for name in ("ALALLO_URL", "ALALLO_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALALLO_DATA_DIR", str(tmp_path / "data"))
    recorder = _Recorder({})
    monkeypatch.setattr(alallo.cli._common, "make_client", lambda url, key: Client(
        "http://alallo.test", api_key="k-test", transport=httpx.MockTransport(recorder)))
    return recorder


def run(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert "Traceback" not in result.output
    return result


def typed(server: LiveServer, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``alallo ARGS`` in a process of its own, as a user types it, on ``server``."""
    env = {"ALALLO_URL": server.url, "ALALLO_API_KEY": server.api_key, "COLUMNS": "200",
           "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "alallo", *args], capture_output=True,
                            text=True, env=env, timeout=300)
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


# -- against a fake server -------------------------------------------------------------


@pytest.mark.unit
def test_create_and_estimate_send_the_grader_and_its_hyperparameters(
        fake: _Recorder, make_job: JobFactory, tmp_path: Path) -> None:
    fake.answers[("POST", "/v1/fine_tuning/estimates")] = httpx.Response(200, json=ESTIMATE)
    fake.answers[("POST", "/v1/fine_tuning/jobs")] = httpx.Response(
        200, json=make_job(status="queued", message="Starting"))
    grader = tmp_path / "grader.json"
    grader.write_text(json.dumps(EXACT))
    options = ("--model", "alallo/tiny-gpt2", "--training-file", "file-1",
               "--validation-file", "file-2", *RL_OPTIONS, "--grader", str(grader),
               "--eval-interval", "1", "--eval-samples", "3")
    created = run("jobs", "create", *options, "--yes")
    assert created.exit_code == 0, created.output
    estimated = run("estimate", *options)
    assert estimated.exit_code == 0, estimated.output
    assert "1 min to 2 min" in estimated.stdout
    expected = {"model": "alallo/tiny-gpt2", "training_file": "file-1",
                "validation_file": "file-2", "method": "reinforcement", "grader": EXACT,
                "hyperparameters": {"max_steps": 2, "batch_size": 2, "compute_multiplier": 0.5,
                                    "eval_interval": 1, "eval_samples": 3,
                                    "max_completion_tokens": 8}}
    assert fake.bodies("/v1/fine_tuning/jobs") == [expected]
    assert fake.bodies("/v1/fine_tuning/estimates") == [expected, expected]


@pytest.mark.unit
@pytest.mark.parametrize(("grader", "method", "said"), [
    ("missing.json", "reinforcement", "cannot read {path}: No such file or directory"),
    ("not json", "reinforcement", "{path} is no JSON grader: Expecting value"),
    ('["a list"]', "reinforcement", "{path} holds no grader: a JSON object"),
    (json.dumps(EXACT), "supervised", "--grader goes with --method reinforcement, not supervised"),
    (json.dumps(EXACT), None, "--grader goes with --method reinforcement, not supervised "
                              "(the default)"),
    (None, "reinforcement", "--method reinforcement needs --grader FILE"),
], ids=["missing", "not-json", "not-an-object", "supervised", "no-method", "no-grader"])
def test_a_grader_that_cannot_be_sent_is_one_line_and_nothing_is_sent(
        fake: _Recorder, tmp_path: Path, grader: str | None, method: str | None,
        said: str) -> None:
    path = tmp_path / ("missing.json" if grader == "missing.json" else "grader.json")
    if grader is not None and grader != "missing.json":
        path.write_text(grader)
    options = [*(("--method", method) if method else ()),
               *(("--grader", str(path)) if grader is not None else ())]
    for command in (("jobs", "create", "--yes"), ("estimate",)):
        result = run(*command, "--model", "m", "--training-file", "file-1", *options)
        assert result.exit_code == 1, result.output
        assert result.stdout == ""
        assert result.stderr.startswith("Error: " + said.format(path=path)), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert fake.requests == []


REWARDED = [
    {"object": "fine_tuning.job.metrics", "step": 1, "epoch": 0.5, "train_loss": 0.01,
     "learning_rate": 1e-4, "reward": 0.25, "reward_std": 0.5, "valid_reward": None,
     "scores": {"exact": 0.25}},
    {"object": "fine_tuning.job.metrics", "step": 2, "epoch": 1.0, "train_loss": 0.02,
     "learning_rate": 5e-5, "reward": 0.75, "reward_std": 0.433, "valid_reward": 0.5,
     "scores": {"exact": 0.75, "valid.exact": 0.5}},
]
SUPERVISED = [{"object": "fine_tuning.job.metrics", "step": 10, "epoch": 1.0,
               "train_loss": 1.5, "learning_rate": 1e-3, "reward": None, "reward_std": None,
               "valid_reward": None, "scores": None}]


@pytest.mark.unit
def test_metrics_show_the_reward_of_a_reinforcement_job_and_none_for_supervised(
        fake: _Recorder) -> None:
    path = "/v1/fine_tuning/jobs/ft-1/metrics"
    fake.answers[("GET", path)] = httpx.Response(200, json={"object": "list", "data": REWARDED})
    table = run("jobs", "metrics", "ft-1").stdout
    header = next(line for line in table.splitlines() if "Step" in line)
    assert [h.strip() for h in header.strip("┃ ").split("┃")] == [
        "Step", "Train loss", "Reward", "± Spread", "Valid reward", "LR"]
    last = next(line for line in table.splitlines() if re.match(r"\W*2 ", line))
    assert [cell.strip() for cell in last.strip("│ ").split("│")][2:5] == [
        "0.7500", "0.4330", "0.5000"]
    rows = run("jobs", "metrics", "ft-1", "--csv").stdout.splitlines()
    # The job's results file's columns (OpenAI's names), issue 35.
    assert rows[0] == ("step,train_loss,train_accuracy,valid_loss,valid_mean_token_accuracy,"
                       "full_valid_loss,full_valid_mean_token_accuracy,learning_rate,grad_norm,"
                       "tokens_per_s,train_reward,train_reward_std,valid_reward,score_exact,"
                       "valid_score_exact")
    assert rows[2] == "2,0.02,,,,,,5e-05,,,0.75,0.433,0.5,0.75,0.5"

    fake.answers[("GET", path)] = httpx.Response(200, json={"object": "list",
                                                            "data": SUPERVISED})
    table = run("jobs", "metrics", "ft-1").stdout
    assert "Reward" not in table and "Train loss" in table
    assert run("jobs", "metrics", "ft-1", "--csv").stdout.splitlines() == [
        "step,train_loss,train_accuracy,valid_loss,valid_mean_token_accuracy,full_valid_loss,"
        "full_valid_mean_token_accuracy,learning_rate,grad_norm,tokens_per_s",
        "10,1.5,,,,,,0.001,,"]


@pytest.mark.unit
def test_the_watch_bar_shows_the_latest_reward_beside_the_loss(
        fake: _Recorder, make_job: JobFactory, sse_body: SseBody) -> None:
    body = sse_body(
        ("job", 1, make_job(progress={"step": 1, "max_steps": 2, "percent": 50.0})),
        ("metrics", 2, {"object": "fine_tuning.job.metrics", "step": 1, "train_loss": 0.01,
                        "reward": 0.25, "reward_std": 0.5}),
        ("metrics", 3, {"object": "fine_tuning.job.metrics", "step": 2, "train_loss": 0.02,
                        "reward": 0.75, "reward_std": 0.4}),
        ("metrics", 4, {"object": "fine_tuning.job.metrics", "step": 2, "valid_reward": 0.5}),
        ("job", 5, make_job(status="succeeded",
                            progress={"step": 2, "max_steps": 2, "percent": 100.0})))
    fake.answers[("GET", "/v1/fine_tuning/jobs/ft-1/stream")] = httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=body)
    out = io.StringIO()
    watch_job(alallo.cli._common.make_client(None, None), "ft-1",
              console=Console(file=out, force_terminal=True, width=160))
    assert "loss 0.0200 ▁█ reward 0.7500" in out.getvalue()


# -- a tiny real job on a live server -----------------------------------------------------


def _upload(server: LiveServer, path: Path, rows: str) -> str:
    path.write_text(rows)
    return str(json.loads(typed(server, "files", "upload", str(path), "--json").stdout)["id"])


@pytest.mark.slow  # real training: GRPO on the tiny model, two steps
@pytest.mark.any_backend
def test_a_reinforcement_job_from_the_command_line_reports_its_reward(
        live_server: LiveServer, tmp_path: Path) -> None:
    training = _upload(live_server, tmp_path / "prompts.jsonl", prompts(4))
    validation = _upload(live_server, tmp_path / "validation.jsonl", prompts(2))
    grader = tmp_path / "grader.json"
    grader.write_text(json.dumps(EXACT))
    created = typed(live_server, "jobs", "create", "--model", "alallo/tiny-gpt2",
                     "--training-file", training, "--validation-file", validation,
                     *RL_OPTIONS, "--grader", str(grader), "--eval-interval", "2",
                     "--eval-samples", "1", "--seed", "0", "--yes", "--watch")
    found = re.search(r"ft-[0-9a-f]{24}", created.stdout)
    assert found is not None and "\nsucceeded" in created.stdout, created.stdout
    assert created.stdout.startswith("Estimate: ")
    assert "Step 2/2: reward 0.0000 (spread 0.0000)" in created.stdout
    job_id = found.group(0)

    job = json.loads(typed(live_server, "jobs", "get", job_id, "--json").stdout)
    assert job["method"]["reinforcement"]["grader"] == EXACT
    assert job["method"]["reinforcement"]["hyperparameters"]["compute_multiplier"] == 0.5

    table = typed(live_server, "jobs", "metrics", job_id).stdout
    header = next(line for line in table.splitlines() if "Step" in line)
    assert all(name in header for name in ("Train loss", "Reward", "± Spread", "Valid reward"))
    assert "Valid loss" not in header and "Train acc." not in header
    rows = typed(live_server, "jobs", "metrics", job_id, "--csv").stdout.splitlines()
    columns = rows[0].split(",")
    assert {"train_reward", "train_reward_std", "valid_reward", "score_exact",
            "valid_score_exact"} <= set(columns) and "scores" not in columns
    last = dict(zip(columns, rows[-1].split(","), strict=True))
    assert last["step"] == "2" and float(last["train_reward"]) == 0.0  # the random model
    assert float(last["valid_reward"]) == 0.0


@pytest.mark.any_backend
def test_the_servers_refusals_read_as_one_line(live_server: LiveServer,
                                              tmp_path: Path) -> None:
    training = _upload(live_server, tmp_path / "prompts.jsonl", prompts(2))
    grader = tmp_path / "grader.json"
    grader.write_text(json.dumps({**EXACT, "operation": "equals"}))
    bad = typed(live_server, "jobs", "create", "--model", "alallo/tiny-gpt2",
                 "--training-file", training, *RL_OPTIONS, "--grader", str(grader), "--yes",
                 check=False)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "Input should be 'eq', 'ne', 'like' or 'ilike' (param: grader." in bad.stderr
    supervised = typed(live_server, "jobs", "create", "--model", "alallo/tiny-gpt2",
                        "--training-file", training, "--compute-multiplier", "2", "--yes",
                        check=False)
    assert supervised.returncode == 1 and "Traceback" not in supervised.stderr
    assert ("compute_multiplier applies to method reinforcement only"
            in " ".join(supervised.stderr.split())), supervised.stderr
    listed = json.loads(typed(live_server, "jobs", "list", "--json").stdout)["data"]
    assert not any(job["training_file"] == training for job in listed)
