"""Pause and resume over HTTP (``POST /v1/fine_tuning/jobs/{id}/pause`` and ``/resume``) with
the simulated trainer: the checkpoint a pause saves, the capacity it frees, what is charged,
the races it can lose, and a server killed while a job is paused."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from openai.types.fine_tuning import FineTuningJob

from support import (
    EXAMPLES,
    LiveServer,
    Servers,
    create_simulated,
    job_of,
    read_stream,
    upload,
    wait_for_job,
)

pytestmark = pytest.mark.any_backend


def event_types(items: list[tuple[str, int, dict[str, Any]]]) -> list[str]:
    return [data["alallo_type"] for kind, _, data in items if kind == "event"]


def as_openai(job: dict[str, Any]) -> FineTuningJob:
    """The job read with the SDK's own type: a paused job differs in ``status`` alone."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return FineTuningJob.model_validate({**job, "status": "running"})


async def test_pause_saves_a_checkpoint_frees_the_capacity_and_resume_continues_from_it(
        client: httpx.AsyncClient, file_id: str, live_server: LiveServer) -> None:
    job = await create_simulated(client, file_id, steps=20, step_delay_s=0.1)
    await wait_for_job(client, job["id"], lambda j: j["progress"]["step"] >= 3)

    with openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=live_server.api_key,
                       max_retries=0, timeout=60) as sdk:
        paused = sdk.fine_tuning.jobs.pause(job["id"]).model_dump()  # the SDK's method
    assert paused["checkpoint"], paused
    step = paused["checkpoint"]["step"]
    assert paused["status"] == "paused", paused
    assert paused["message"] == f"Paused at step {step}. Resume it to continue from step {step}."
    assert 3 <= step < 20 and paused["progress"]["step"] == step
    assert paused["estimated_finish"] is None and paused["time_left"]["high_s"] > 0
    as_openai(paused)
    capacity = (await client.get("/v1/capacity")).json()
    assert job["id"] not in json.dumps(capacity), "a paused job holds no capacity"
    again = await client.post(f"/v1/fine_tuning/jobs/{job['id']}/pause")
    assert (again.status_code, again.json()["status"]) == (200, "paused"), "idempotent"
    charged = (await job_of(client, job["id"]))["price"]["gross"]
    assert charged > 0, "the steps through the checkpoint are charged"

    with openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=live_server.api_key,
                       max_retries=0, timeout=60) as sdk:
        raw = sdk.fine_tuning.jobs.with_raw_response.resume(job["id"]).http_response.json()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed = FineTuningJob.model_validate(raw)  # "queued" is OpenAI's own: strict
    assert (resumed.status, raw["message"]) == ("queued", "Starting")
    items = await read_stream(client, job["id"])
    final = items[-1][2]
    assert final["status"] == "succeeded", (final["message"], final["error"], event_types(items))
    types = event_types(items)
    at = types.index("PAUSE_REQUESTED")
    assert types[at:at + 5] == ["PAUSE_REQUESTED", "CHECKPOINT_SAVE", "JOB_PAUSED",
                                "JOB_RESUMED", "JOB_RESTARTED"], types
    restarted = next(d for k, _, d in items if k == "event" and d["alallo_type"] == "JOB_RESTARTED")
    assert f"from the checkpoint at step {step}: resumed by user" in restarted["message"]

    # No step is charged twice: the job costs what the same job run at once costs.
    whole = await create_simulated(client, file_id, steps=20, step_delay_s=0.1)
    assert (await read_stream(client, whole["id"]))[-1][2]["status"] == "succeeded"
    assert final["price"]["gross"] == (await job_of(client, whole["id"]))["price"]["gross"]
    assert final["price"]["refunded"] == 0


async def test_cancel_of_a_paused_job_ends_it_cancelled_charged_for_the_steps_run(
        client: httpx.AsyncClient, file_id: str) -> None:
    job = await create_simulated(client, file_id, steps=500, step_delay_s=0.05)
    await wait_for_job(client, job["id"], lambda j: j["progress"]["step"] >= 2)
    paused = (await client.post(f"/v1/fine_tuning/jobs/{job['id']}/pause")).json()
    assert paused["status"] == "paused"
    cancelled = await client.post(f"/v1/fine_tuning/jobs/{job['id']}/cancel")
    assert cancelled.status_code == 200
    final = (await read_stream(client, job["id"]))[-1][2]
    assert final["status"] == "cancelled"
    assert final["price"]["gross"] == paused["price"]["gross"] > 0

    refused = await client.post(f"/v1/fine_tuning/jobs/{job['id']}/pause")
    assert refused.status_code == 409
    assert refused.json()["error"]["message"] == (
        f"cannot pause {job['id']}: the job has already finished (cancelled)")
    refused = await client.post(f"/v1/fine_tuning/jobs/{job['id']}/resume")
    assert refused.status_code == 409


async def test_resume_of_a_job_that_is_not_paused_and_unknown_jobs_are_refused(
        client: httpx.AsyncClient, file_id: str) -> None:
    job = await create_simulated(client, file_id, steps=500, step_delay_s=0.05)
    await wait_for_job(client, job["id"], lambda j: j["progress"]["step"] >= 1)
    refused = await client.post(f"/v1/fine_tuning/jobs/{job['id']}/resume")
    assert refused.status_code == 409
    assert refused.json()["error"]["message"] == (
        f"cannot resume {job['id']}: it is not paused (it is running)")
    assert (await client.post("/v1/fine_tuning/jobs/ft-nope/pause")).status_code == 404
    assert (await client.post("/v1/fine_tuning/jobs/ft-nope/resume")).status_code == 404
    await client.post(f"/v1/fine_tuning/jobs/{job['id']}/cancel")


async def test_a_paused_job_stays_paused_across_a_kill_9_and_a_queued_one_pauses_at_once(
        servers: Callable[..., Servers]) -> None:
    group = servers(ALALLO_MAX_CONCURRENT_JOBS="1")
    server = group.start()
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers,
                                 timeout=60) as client:
        file = (await upload(client, EXAMPLES / "sample.jsonl")).json()["id"]
        first = await create_simulated(client, file, steps=40, step_delay_s=0.05)
        await wait_for_job(client, first["id"], lambda j: j["progress"]["step"] >= 2)
        second = await create_simulated(client, file, steps=3, step_delay_s=0)
        await wait_for_job(client, second["id"],
                           lambda j: j["message"] == "Waiting for capacity")
        waiting = (await client.post(f"/v1/fine_tuning/jobs/{second['id']}/pause")).json()
        assert (waiting["status"], waiting["message"], waiting["checkpoint"]) == (
            "paused", "Paused. Resume it to queue it again; it starts from the beginning.",
            None)
        paused = (await client.post(f"/v1/fine_tuning/jobs/{first['id']}/pause")).json()
        assert paused["status"] == "paused"
        group.kill(server)

    server = group.start()
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers,
                                 timeout=60) as client:
        for job in (first, second):  # recovery restarts neither
            now = await job_of(client, job["id"])
            assert (now["status"], now["attempt"]) == ("paused", 1 if job is first else 0)
        for job in (second, first):
            resumed = await client.post(f"/v1/fine_tuning/jobs/{job['id']}/resume")
            assert resumed.json()["status"] == "queued", resumed.text
        for job in (second, first):
            items = await read_stream(client, job["id"])
            assert items[-1][2]["status"] == "succeeded"
            assert "JOB_RESTARTED" not in event_types(items) or job is first
