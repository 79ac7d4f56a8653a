"""Who pays what, failures told apart, automatic cancellation and stops, over HTTP.

Each test starts a server with its own settings: the price of the CPU node,
the account's balance, the limits.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from support import EXAMPLES, LiveServer, read_stream, upload, wait_for_job

from alallo._money import format_money
from test_jobs_http import trainer_pids, wait_for_step

Factory = Callable[..., LiveServer]
STEP_S = 0.05
PRICE_PER_HOUR = 3600.0
"""With 0.05 s steps a step costs $0.05: amounts that are easy to check."""
STEP_PRICE = PRICE_PER_HOUR * STEP_S / 3600


def connect(server: LiveServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30)


async def submit(client: httpx.AsyncClient, **spec: Any) -> dict[str, Any]:
    file = (await upload(client, EXAMPLES / "sample.jsonl")).json()
    body = {"model": "alallo/tiny-gpt2", "training_file": file["id"],
            "trainer": {"type": "simulated", "step_delay_s": STEP_S}, **spec}
    response = await client.post("/v1/fine_tuning/jobs", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def finish(client: httpx.AsyncClient, job_id: str) -> tuple[dict[str, Any], list[str]]:
    with trio.fail_after(120):
        items = await read_stream(client, job_id)
    events = (await client.get(f"/v1/fine_tuning/jobs/{job_id}/events",
                               params={"limit": 1000, "order": "asc", "type": "message"})).json()
    return items[-1][2], [e["alallo_type"] for e in events["data"]]


async def test_a_killed_trainer_resumes_from_its_checkpoint_and_each_step_is_paid_once(
        server_factory: Factory) -> None:
    server = server_factory(ALALLO_CPU_PRICE_PER_HOUR=str(PRICE_PER_HOUR))
    async with connect(server) as client:
        job = await submit(client, hyperparameters={"max_steps": 40})
        running = await wait_for_step(client, job["id"], 14)
        assert running["checkpoint"]["step"] == 10
        for pid in trainer_pids(job["id"]):
            os.kill(pid, signal.SIGKILL)
        final, types = await finish(client, job["id"])
    assert final["status"] == "succeeded" and final["attempt"] == 2
    assert types.count("JOB_RESTARTED") == 1 and types.count("JOB_START") == 2
    assert final["price"]["charged"] == pytest.approx(40 * STEP_PRICE)
    assert final["price"]["refunded"] == 0


async def test_a_user_error_fails_with_the_training_log_line_and_costs_nothing(
        server_factory: Factory, tmp_path: Path) -> None:
    trainer = tmp_path / "trainer.py"
    trainer.write_text(
        "import json\n"
        "for step in (1, 2):\n"
        "    print(json.dumps({'type': 'progress', 'step': step, 'max_steps': 5}))\n"
        "print(json.dumps({'type': 'error', 'kind': 'user',"
        " 'message': 'line 3: missing column \"text\"'}))\n"
        "raise SystemExit(1)\n")
    server = server_factory()
    async with connect(server) as client:
        job = await submit(client, trainer={"command": [sys.executable, str(trainer)]})
        final, types = await finish(client, job["id"])
    assert final["status"] == "failed"
    assert final["message"] == 'Training failed: line 3: missing column "text"'
    assert final["error"] == {"code": "training_failed", "message": final["message"],
                              "param": None}
    assert types[-1] == "JOB_USER_ERROR" and "JOB_RESTARTED" not in types
    assert final["price"]["charged"] - final["price"]["refunded"] == 0


CRASHING_TRAINER = json.dumps([{"name": "crashing", "description": "exits with code 3",
                                "command": [sys.executable, "-c", "raise SystemExit(3)"]}])
"""``ALALLO_TRAINERS``: a trainer the operator registered that crashes (a platform failure)."""


async def wait_posted(posted: threading.Event, timeout: float = 10) -> None:
    """Wait for the webhook's first request: the server posts it in the background."""
    assert await trio.to_thread.run_sync(posted.wait, timeout, abandon_on_cancel=True), \
        f"no webhook within {timeout} s"


async def test_platform_errors_restart_then_fail_with_the_notified_message(
        server_factory: Factory) -> None:
    hooks: list[dict[str, Any]] = []
    posted = threading.Event()
    with webhook(hooks, posted) as url:
        server = server_factory(ALALLO_MAX_RESTARTS="2", ALALLO_OPERATOR_WEBHOOK_URL=url,
                                ALALLO_TRAINERS=CRASHING_TRAINER)
        async with connect(server) as client:
            job = await submit(client, trainer={"name": "crashing"})
            final, types = await finish(client, job["id"])
            await wait_posted(posted)
    assert final["status"] == "failed"
    assert final["message"] == "Failed. We've been notified and are looking into it."
    assert types.count("JOB_RESTARTED") == 2 and types[-1] == "JOB_ERROR"
    (hook,) = hooks
    assert (hook["event"], hook["job_id"]) == ("job.platform_failure", job["id"])
    assert hook["reason"].endswith("(the trainer exited with code 3)")


async def test_the_accounts_own_command_failing_is_the_users_failure_not_the_platforms(
        server_factory: Factory, tmp_path: Path) -> None:
    trainer = tmp_path / "trainer.py"
    trainer.write_text("print('loading my model')\n"
                       "print('CUDA out of memory in my own code')\n"
                       "raise SystemExit(3)\n")
    hooks: list[dict[str, Any]] = []
    with webhook(hooks) as url:
        server = server_factory(ALALLO_MAX_RESTARTS="2", ALALLO_OPERATOR_WEBHOOK_URL=url)
        async with connect(server) as client:
            job = await submit(client, trainer={"command": [sys.executable, str(trainer)]})
            final, types = await finish(client, job["id"])
            metrics = (await client.get("/metrics")).text
    assert final["status"] == "failed"
    assert final["message"] == "Training failed: CUDA out of memory in my own code"
    assert final["error"]["code"] == "training_failed"
    assert types[-1] == "JOB_USER_ERROR"
    assert "JOB_RESTARTED" not in types and "JOB_ERROR" not in types
    assert final["price"]["charged"] - final["price"]["refunded"] == 0
    assert hooks == [], "the operator is not told of a user's failure"
    assert "alallo_job_platform_failures_total 0.0" in metrics


async def test_insufficient_balance_cancels_the_job_before_it_starts(
        server_factory: Factory) -> None:
    server = server_factory(ALALLO_CPU_PRICE_PER_HOUR=str(PRICE_PER_HOUR),
                            ALALLO_DEFAULT_BALANCE="0.5")
    async with connect(server) as client:
        job = await submit(client, hyperparameters={"max_steps": 40})
        final, types = await finish(client, job["id"])
        events = (await client.get(f"/v1/fine_tuning/jobs/{job['id']}/events",
                                   params={"order": "asc"})).json()["data"]
    assert final["status"] == "cancelled" and final["attempt"] == 0
    assert types == ["JOB_PENDING", "CANCEL_REQUESTED", "JOB_STOPPED"]
    assert events[1]["message"].startswith("Job cancelled due to insufficient balance: ")
    assert final["price"]["charged"] == 0


async def test_the_billing_limit_cancels_mid_run_and_completed_steps_are_paid(
        server_factory: Factory) -> None:
    # 200 steps: the estimate's low end (~$8.4) is covered, the whole run ($10) is not. The
    # limit falls at ~86% of the run: the ~30 steps left (1.5 s) give the stop room to
    # arrive while the suite loads the CPU (with 100 steps, a run once finished first).
    server = server_factory(ALALLO_CPU_PRICE_PER_HOUR=str(PRICE_PER_HOUR),
                            ALALLO_DEFAULT_BALANCE="8.6")
    async with connect(server) as client:
        job = await submit(client, hyperparameters={"max_steps": 200})
        final, types = await finish(client, job["id"])
    assert final["status"] == "cancelled"
    assert "BILLING_LIMIT" in types and types[-1] == "JOB_STOPPED"
    step = final["progress"]["step"]
    assert 160 <= step < 200
    assert final["price"]["charged"] == pytest.approx(step * STEP_PRICE)


async def test_a_bad_wandb_key_is_refused_at_creation(live_server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=live_server.url, headers=live_server.headers) as c:
        file = (await upload(c, EXAMPLES / "sample.jsonl")).json()
        response = await c.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": file["id"],
            "integrations": [{"type": "wandb", "wandb": {"project": "p",
                                                         "api_key": "x" * 17}}]})
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "invalid_request", "param": "integrations.0.wandb.api_key",
        "type": "invalid_request_error",
        "message": "integrations.0.wandb.api_key: API key must be 40 characters long, yours "
                   "was 17"}


@contextmanager
def fake_wandb_refusing_logins() -> Iterator[str]:
    """A W&B server stand-in on loopback that answers every call 401."""

    class Refuse(BaseHTTPRequestHandler):
        def _refuse(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"errors": [{"message": "user is not logged in"}]}')

        do_GET = do_POST = _refuse

        def log_message(self, *args: object) -> None:
            pass

    with serving(Refuse) as url:
        yield url


@contextmanager
def webhook(received: list[dict[str, Any]],
            posted: threading.Event | None = None) -> Iterator[str]:
    """An operator webhook on loopback that records what it is sent, and sets ``posted``."""

    class Record(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            if posted is not None:
                posted.set()
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with serving(Record) as url:
        yield url


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    httpd = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


WANDB_KEY = "0123456789abcdef0123456789abcdef01234567"


async def test_a_wandb_login_failure_at_start_cancels_with_the_seed_events(
        server_factory: Factory) -> None:
    with fake_wandb_refusing_logins() as url:
        server = server_factory(ALALLO_WANDB_BASE_URL=url)
        async with connect(server) as client:
            job = await submit(client, integrations=[
                {"type": "wandb", "wandb": {"project": "demo", "api_key": WANDB_KEY}}])
            final, _ = await finish(client, job["id"])
            events = (await client.get(f"/v1/fine_tuning/jobs/{job['id']}/events",
                                       params={"limit": 1000, "order": "asc"})).json()["data"]
    assert final["status"] == "cancelled"
    tail = [(e["alallo_type"], e["message"]) for e in events][-3:]
    assert tail[0][0] == "WANDB_INIT"
    assert tail[0][1].startswith("WandB login or init failed: ")
    assert "user is not logged in" in tail[0][1]
    assert tail[1:] == [("CANCEL_REQUESTED", "Job cancelled due to error in WandB login/init"),
                        ("JOB_STOPPED", "Job stopped due to cancel request")]


async def test_a_valid_wandb_key_reports_the_metrics(server_factory: Factory) -> None:
    server = server_factory(ALALLO_WANDB_MODE="offline")
    async with connect(server) as client:
        job = await submit(client, hyperparameters={"max_steps": 20}, integrations=[
        {"type": "wandb", "wandb": {"project": "demo", "api_key": WANDB_KEY}}])
        final, types = await finish(client, job["id"])
        log = (await client.get(f"/v1/fine_tuning/jobs/{job['id']}/log")).json()["data"]
    logged_losses = {float(m.group(1)) for line in log
                     if (m := re.search(r"loss ([0-9.]+)", line["text"]))}
    assert len(logged_losses) == 2, [line["text"] for line in log]
    assert final["status"] == "succeeded" and "WANDB_INIT" in types
    # The offline run file holds W&B's records (protobuf); the history records
    # carry each metric's key and JSON value as plain bytes.
    runs = list((server.data_dir / "jobs" / job["id"] / "wandb").rglob("run-*.wandb"))
    assert len(runs) == 1
    records = runs[0].read_bytes()
    assert b"train/loss" in records
    losses = re.findall(rb"train/loss..\x01?.?([0-9]+\.[0-9]+)", records)
    assert {round(float(x), 4) for x in losses} == logged_losses


@pytest.mark.parametrize(
    ("env", "message"),
    [({"ALALLO_BUDGET_FACTOR": "0.02", "ALALLO_BUDGET_MIN_S": "0"},
      "Stopped: the budget was reached"),
     # 3 s: room for a checkpoint (the first charge) even when the trainer is slow to start.
     ({"ALALLO_TIME_LIMIT_S": "3"}, "Stopped: the time limit was reached")],
)
async def test_a_job_that_runs_too_long_is_stopped_and_costs_nothing(
        server_factory: Factory, env: dict[str, str], message: str) -> None:
    server = server_factory(ALALLO_CPU_PRICE_PER_HOUR=str(PRICE_PER_HOUR), **env)
    async with connect(server) as client:
        job = await submit(client, hyperparameters={"max_steps": 2000})
        final, types = await finish(client, job["id"])
        refund = (await client.get(f"/v1/fine_tuning/jobs/{job['id']}/events",
                                   params={"limit": 1})).json()["data"][0]  # the newest
    assert final["status"] == "failed" and final["message"] == message
    assert "JOB_STOPPED" in types and types[-1] == "REFUND"
    # What the user pays is net of the refund: nothing; the refund is all that was charged,
    # and the event says the same amount as the job, to the last digit.
    price = final["price"]
    assert price["gross"] > 0 and price["charged"] == 0 and price["refunded"] == price["gross"]
    assert refund["message"] == f"Refunded {format_money(price['refunded'])}: failed jobs cost nothing"
    assert refund["data"] == {"amount": price["refunded"]}  # exact, as the job's figure
    assert trainer_pids(job["id"]) == []


async def test_a_job_planned_for_a_second_that_takes_a_few_is_not_stopped_by_the_budget(
        server_factory: Factory) -> None:
    # Planned: 0.3 s start + 10 x 0.01 s; it takes 10 x 0.3 s, ten times its plan's
    # upper end, yet nowhere near "far longer than planned" for a user.
    server = server_factory()
    async with connect(server) as client:
        job = await submit(client, hyperparameters={"max_steps": 10}, trainer={
            "type": "simulated", "step_delay_s": 0.01, "slow_step_every": 1,
            "slow_step_factor": 30})
        assert job["estimate"]["high_s"] <= 1  # seconds, rounded
        final, types = await finish(client, job["id"])
    assert final["status"] == "succeeded", final["message"]
    assert "JOB_STOPPED" not in types


async def test_cancel_while_queued_is_free_and_never_starts(server_factory: Factory) -> None:
    server = server_factory(ALALLO_MAX_CONCURRENT_JOBS="1")
    async with connect(server) as client:
        first = await submit(client, hyperparameters={"max_steps": 10_000})
        second = (await client.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": first["training_file"],
            "trainer": "simulated"})).json()
        await wait_for_job(client, second["id"],
                           lambda job: job["message"] == "Waiting for capacity", timeout=30)
        cancelled = await client.post(f"/v1/fine_tuning/jobs/{second['id']}/cancel")
        assert cancelled.status_code == 200
        again = await client.post(f"/v1/fine_tuning/jobs/{second['id']}/cancel")
        assert again.status_code in {200, 409}
        final, types = await finish(client, second["id"])
        await client.post(f"/v1/fine_tuning/jobs/{first['id']}/cancel")
    assert final["status"] == "cancelled" and final["attempt"] == 0
    assert types == ["JOB_PENDING", "CANCEL_REQUESTED", "JOB_STOPPED"]
    assert final["price"]["charged"] == 0
