"""``GET /metrics``: scraped from a live server while jobs run, wait, stream and fail."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse
from prometheus_client.parser import text_string_to_metric_families

from alallo.runtime._operator import RESTART_CAUSES
from support import (
    EXAMPLES,
    FINAL,
    LiveServer,
    start_server,
    stop_server,
    upload,
    wait_for_job,
    wait_until,
)

pytestmark = pytest.mark.any_backend  # the subject does not depend on the store

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
STATUSES = ("queued", "running", "re-scheduling", "cancelling", "cancelled", "succeeded",
            "failed")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    started = start_server(tmp_path_factory.mktemp("metrics") / "data",
                           ALALLO_MAX_CONCURRENT_JOBS="1", ALALLO_MAX_RESTARTS="1")
    yield started
    stop_server(started)


@pytest.fixture
async def client(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30) as c:
        yield c


async def scrape(client: httpx.AsyncClient) -> Samples:
    response = await client.get("/metrics", headers={"Authorization": ""})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.text)
            for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[name, tuple(sorted(labels.items()))]


async def create(client: httpx.AsyncClient, file_id: str, **spec: Any) -> str:
    response = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file_id, **spec})
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


async def poll_job(client: httpx.AsyncClient, job_id: str, done: Any) -> dict[str, Any]:
    """The job once ``done`` holds, polled: its stream would be one more open stream, a figure
    this module checks."""
    async def state() -> dict[str, Any] | None:
        job: dict[str, Any] = (await client.get(f"/v1/fine_tuning/jobs/{job_id}")).json()
        return job if done(job) else None

    job: dict[str, Any] = await wait_until(state, timeout=60,
                                           what=f"the awaited state of {job_id}")
    return job


async def test_every_figure_is_there_before_any_job(client: httpx.AsyncClient) -> None:
    samples = await scrape(client)
    for status in STATUSES:
        assert value(samples, "alallo_jobs", status=status) == 0
    for kind in ("job", "account", "websocket"):
        assert value(samples, "alallo_open_streams", kind=kind) == 0
    for name in ("alallo_queue_length", "alallo_training_steps_per_second",
                 "alallo_actor_restarts_total", "alallo_actor_crashes_total",
                 "alallo_actors_given_up_total",
                 "alallo_job_platform_failures_total"):
        assert value(samples, name) == 0, name
    for cause in RESTART_CAUSES:
        assert value(samples, "alallo_job_restarts_total", cause=cause) == 0, cause
    assert value(samples, "alallo_actors_running") >= 1  # the scheduler
    assert value(samples, "process_resident_memory_bytes") > 0


async def test_running_waiting_streaming_and_failing_jobs_are_counted(
        client: httpx.AsyncClient) -> None:
    file_id = (await upload(client, EXAMPLES / "sample.jsonl")).json()["id"]
    slow = {"hyperparameters": {"max_steps": 100_000},
            "trainer": {"type": "simulated", "step_delay_s": 0.02}}
    running = await create(client, file_id, **slow)
    await poll_job(client, running, lambda j: j["progress"]["step"] >= 5)
    waiting = await create(client, file_id, **slow)
    await poll_job(client, waiting, lambda j: j["queue_position"] == 1)

    async with aconnect_sse(client, "GET", f"/v1/fine_tuning/jobs/{running}/stream") as source:
        events = source.aiter_sse()
        await events.__anext__()  # the stream is open and counted
        samples = await scrape(client)
        await events.aclose()
    assert value(samples, "alallo_jobs", status="running") == 1
    assert value(samples, "alallo_jobs", status="queued") == 1
    assert value(samples, "alallo_queue_length") == 1
    assert value(samples, "alallo_open_streams", kind="job") == 1
    assert 1 < value(samples, "alallo_training_steps_per_second") < 1000

    for job_id in (running, waiting):
        await client.post(f"/v1/fine_tuning/jobs/{job_id}/cancel")
        await wait_for_job(client, job_id, lambda j: j["status"] in FINAL)

    # A trainer that dies is restarted once (ALALLO_MAX_RESTARTS=1), then fails the job.
    broken = await create(client, file_id, trainer={"type": "simulated", "fail_at_step": 1})
    await wait_for_job(client, broken, lambda j: j["status"] in FINAL)

    async def settled() -> Samples | None:
        # The streams' tasks end soon after their clients left: a gauge gives no event.
        samples = await scrape(client)
        return samples if (value(samples, "alallo_open_streams", kind="job") == 0
                           and value(samples, "alallo_job_platform_failures_total") == 1) else None

    samples = await wait_until(settled, timeout=30, what="no open job stream, one failure")
    assert value(samples, "alallo_jobs", status="cancelled") == 2
    assert value(samples, "alallo_jobs", status="failed") == 1
    assert value(samples, "alallo_jobs", status="running") == 0
    assert value(samples, "alallo_queue_length") == 0
    assert value(samples, "alallo_training_steps_per_second") == 0
    assert value(samples, "alallo_job_restarts_total", cause="trainer") == 1
    assert sum(value(samples, "alallo_job_restarts_total", cause=c) for c in RESTART_CAUSES) == 1
