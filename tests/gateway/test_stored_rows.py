"""A stored job that no longer validates never makes its account unreadable.

An older alallo accepted a W&B integration without ``api_key`` and stored it
as ``"api_key": ""``, which today's job spec refuses: every read of the
account (the job list, the job, its events, log and checkpoints, cancel, the
account stream) answered 400, also after a restart. Here such rows are
written into the store of a stopped server, as that alallo left them, and
the server started again must serve all of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
import trio
from httpx_sse import aconnect_sse
from sqlalchemy.pool import NullPool

from support import (EXAMPLES, FINAL, LiveServer, database_url_for, job_of, read_stream,
                     start_server, stop_server, upload)

BAD_WANDB = {"type": "wandb", "wandb": {"project": "demo", "api_key": "", "name": None,
                                        "entity": None}}
"""An integration as the older alallo stored it when the request had no ``api_key``."""


def store_url(data_dir: Path) -> str:
    return database_url_for(data_dir) or f"sqlite:///{data_dir.resolve() / 'alallo.db'}"


def poison(data_dir: Path, job_ids: list[str]) -> None:
    """Give these jobs' stored states the integration an older alallo stored."""
    engine = sa.create_engine(store_url(data_dir), poolclass=NullPool)
    try:
        with engine.begin() as c:
            for job_id in job_ids:
                state = json.loads(c.execute(sa.text("SELECT state FROM jobs WHERE id = :id"),
                                             {"id": job_id}).scalar_one())
                state["spec"]["integrations"] = [BAD_WANDB]
                c.execute(sa.text("UPDATE jobs SET state = :s WHERE id = :id"),
                          {"s": json.dumps(state), "id": job_id})
    finally:
        engine.dispose()


def spec(file_id: str, steps: int, delay: float) -> dict[str, Any]:
    return {"model": "alallo/tiny-gpt2", "training_file": file_id,
            "hyperparameters": {"max_steps": steps},
            "trainer": {"type": "simulated", "step_delay_s": delay}}


async def test_a_wandb_integration_without_a_key_is_refused_when_none_is_stored(
        live_server: LiveServer) -> None:
    # OpenAI's form names no key: the account's stored one (test_wandb_keys.py); this
    # account has none.
    async with httpx.AsyncClient(base_url=live_server.url, headers=live_server.headers) as c:
        file = (await upload(c, EXAMPLES / "sample.jsonl")).json()
        before = (await c.get("/v1/fine_tuning/jobs", params={"limit": 1000})).json()["data"]
        response = await c.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": file["id"],
            "integrations": [{"type": "wandb", "wandb": {"project": "p"}}]})
        after = (await c.get("/v1/fine_tuning/jobs", params={"limit": 1000})).json()["data"]
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "integrations"
    assert response.json()["error"]["message"].startswith(
        "integrations: no W&B API key is stored for this account")
    assert len(after) == len(before), "nothing was stored"


async def test_rows_that_no_longer_validate_leave_the_account_readable(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    env = {"ALALLO_MAX_CONCURRENT_JOBS": "1"}
    server = start_server(data_dir, **env)
    try:
        async with httpx.AsyncClient(base_url=server.url, headers=server.headers,
                                     timeout=30) as c:
            file = (await upload(c, EXAMPLES / "sample.jsonl")).json()["id"]
            done = (await c.post("/v1/fine_tuning/jobs", json=spec(file, 3, 0.0))).json()["id"]
            assert (await read_stream(c, done))[-1][2]["status"] == "succeeded"
            running = (await c.post("/v1/fine_tuning/jobs",
                                    json=spec(file, 100_000, 0.05))).json()["id"]
            queued = (await c.post("/v1/fine_tuning/jobs", json=spec(file, 3, 0.0))).json()["id"]
    finally:
        stop_server(server)
    poison(data_dir, [done, running, queued])

    server = start_server(data_dir, **env)
    try:
        async with httpx.AsyncClient(base_url=server.url, headers=server.headers,
                                     timeout=30) as c:
            listed = await c.get("/v1/fine_tuning/jobs")
            assert listed.status_code == 200, listed.text
            assert {j["id"] for j in listed.json()["data"]} == {done, running, queued}
            for job_id in (done, running, queued):
                job = await job_of(c, job_id)
                assert job["integrations"] == [], "what does not validate is left out"
                for part in ("events", "log", "checkpoints"):
                    answer = await c.get(f"/v1/fine_tuning/jobs/{job_id}/{part}")
                    assert answer.status_code == 200, (part, answer.text)
            seen: set[str] = set()
            with trio.fail_after(30):
                async with aconnect_sse(c, "GET", "/v1/fine_tuning/stream") as source:
                    async for sse in source.aiter_sse():
                        if sse.event == "job":
                            seen.add(json.loads(sse.data)["id"])
                        if seen == {done, running, queued}:
                            break
            cancelled = await c.post(f"/v1/fine_tuning/jobs/{running}/cancel")
            assert cancelled.status_code == 200, cancelled.text
            with trio.fail_after(60):
                assert (await read_stream(c, running))[-1][2]["status"] == "cancelled"
                final = (await read_stream(c, queued))[-1][2]
            assert final["status"] in FINAL and final["status"] == "succeeded"
    finally:
        stop_server(server)
