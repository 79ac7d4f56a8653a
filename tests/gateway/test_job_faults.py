"""One job's data or I/O fault never takes the server down (issue 14, section 3).

Each test starts real ``alallo serve`` processes and breaks one job the way the
world breaks it: its directory replaced by a file, the record of its training file
gone from the store while the server was down, its stored row cut short. Checked
every time: that job fails (or is left out) and says why, the operator is told,
it costs nothing, the server keeps answering, the other jobs finish once each,
and the server starts again on the same data.

Before this, the first two crashed the job's actor in a loop: 51 restarts in
about 40 ms made the supervisor of all jobs give up and the server exit (again at
every restart, sometimes as a ``TrioInternalError`` before it served at all); the
third stopped the server's start with a ``TrioInternalError``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
import trio
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.pool import NullPool
from support import (
    EXAMPLES,
    LiveServer,
    Servers,
    job_of,
    read_stream,
    stop_server,
    upload,
)
from test_money_and_failures import wait_posted, webhook
from test_stored_rows import store_url

NOTIFIED = "Failed. We've been notified and are looking into it."


def connect(server: LiveServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30)


async def submit(client: httpx.AsyncClient, steps: int, delay: float) -> dict[str, Any]:
    """A simulated job on a file of its own (so that a file's fault is that job's alone)."""
    file = (await upload(client, EXAMPLES / "sample.jsonl")).json()
    response = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file["id"],
        "hyperparameters": {"max_steps": steps},
        "trainer": {"type": "simulated", "step_delay_s": delay}})
    assert response.status_code == 200, response.text
    return dict(response.json())


async def final_of(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    with trio.fail_after(120):
        items = await read_stream(client, job_id)
    return items[-1][2]


async def events_of(client: httpx.AsyncClient, job_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/fine_tuning/jobs/{job_id}/events",
                                params={"limit": 1000, "order": "asc", "type": "message"})
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


async def metric(client: httpx.AsyncClient, name: str) -> float:
    text = (await client.get("/metrics")).text
    return sum(s.value for family in text_string_to_metric_families(text)
               for s in family.samples if s.name == name)


async def assert_serves(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/v1/fine_tuning/jobs")).status_code == 200


def assert_failed_for_the_platform(final: dict[str, Any], events: list[dict[str, Any]],
                                   why: str) -> None:
    """Failed with the notified message, charged nothing, one event saying why."""
    assert final["status"] == "failed"
    assert final["message"] == NOTIFIED
    assert final["error"] == {"code": "platform_error", "message": NOTIFIED, "param": None}
    assert final["price"]["charged"] - final["price"]["refunded"] == 0
    errors = [e["message"] for e in events if e["alallo_type"] == "JOB_ERROR"]
    assert len(errors) == 1 and errors[0].startswith(NOTIFIED) and why in errors[0], errors


def run_sql(data_dir: Path, statement: str, **params: object) -> None:
    """Change the store of a stopped server, as a hand (or a broken disk) would."""
    engine = sa.create_engine(store_url(data_dir), poolclass=NullPool)
    try:
        with engine.begin() as c:
            c.execute(sa.text(statement), params)
    finally:
        engine.dispose()


@pytest.mark.once_on_postgres  # a file-system fault: the store is not its subject
async def test_a_job_whose_directory_is_a_file_fails_alone_and_the_server_goes_on(
        servers: Callable[..., Servers]) -> None:
    hooks: list[dict[str, Any]] = []
    posted = threading.Event()
    with webhook(hooks, posted) as url:
        group = servers(ALALLO_MAX_CONCURRENT_JOBS="1", ALALLO_OPERATOR_WEBHOOK_URL=url)
        server = group.start()
        async with connect(server) as client:
            first = await submit(client, 30, 0.1)  # holds the only slot for 3 s
            broken = await submit(client, 3, 0.0)
            (server.data_dir / "jobs" / broken["id"]).write_text("not a directory")
            assert (await job_of(client, broken["id"]))["status"] == "queued"
            assert (await final_of(client, first["id"]))["status"] == "succeeded"
            final = await final_of(client, broken["id"])
            events = await events_of(client, broken["id"])
            await assert_serves(client)
            later = await submit(client, 3, 0.0)
            assert (await final_of(client, later["id"]))["status"] == "succeeded"
            await wait_posted(posted)
            given_up = await metric(client, "alallo_actors_given_up_total")
    assert_failed_for_the_platform(final, events, "Not a directory")
    assert [h["job_id"] for h in hooks] == [broken["id"]]
    assert given_up == 0, "a run's error, not its actor's: the actor was never given up"
    stop_server(server)

    again = group.start()  # the failed job is stored; the server starts and serves
    async with connect(again) as client:
        await assert_serves(client)
        assert (await job_of(client, broken["id"]))["status"] == "failed"
        assert (await final_of(client, later["id"]))["status"] == "succeeded"


async def test_a_job_that_crashes_its_actor_at_every_start_fails_once_after_a_restart(
        servers: Callable[..., Servers]) -> None:
    group = servers()
    server = group.start()
    async with connect(server) as client:
        sound = await submit(client, 30, 0.05)
        broken = await submit(client, 30, 0.05)
    group.kill(server)
    # Its training file's record is gone: every incarnation of its actor crashes at start.
    run_sql(group.data_dir, "DELETE FROM files WHERE id = :id", id=broken["training_file"])

    server = group.start()
    async with connect(server) as client:
        final = await final_of(client, broken["id"])
        events = await events_of(client, broken["id"])
        await assert_serves(client)
        done = await final_of(client, sound["id"])
        sound_events = [e["alallo_type"] for e in await events_of(client, sound["id"])]
        given_up = await metric(client, "alallo_actors_given_up_total")
    assert_failed_for_the_platform(final, events, "its actor failed")
    assert done["status"] == "succeeded"
    assert sound_events.count("JOB_COMPLETE") == 1, "the sound job finished once"
    assert given_up == 1
    stop_server(server)

    again = group.start()
    async with connect(again) as client:
        await assert_serves(client)
        assert (await job_of(client, broken["id"]))["status"] == "failed"
        kinds = [e["alallo_type"] for e in await events_of(client, broken["id"])]
        assert kinds.count("JOB_ERROR") == 1


async def test_a_stored_row_cut_short_does_not_stop_the_start(
        servers: Callable[..., Servers]) -> None:
    group = servers()
    server = group.start()
    async with connect(server) as client:
        sound = await submit(client, 30, 0.05)
        cut = await submit(client, 30, 0.05)
    group.kill(server)
    engine = sa.create_engine(store_url(group.data_dir), poolclass=NullPool)
    try:
        with engine.begin() as c:
            state = c.execute(sa.text("SELECT state FROM jobs WHERE id = :id"),
                              {"id": cut["id"]}).scalar_one()
            c.execute(sa.text("UPDATE jobs SET state = :s WHERE id = :id"),
                      {"s": state[:len(state) // 2], "id": cut["id"]})
    finally:
        engine.dispose()
    assert json.loads(state)["id"] == cut["id"]

    server = group.start()
    async with connect(server) as client:
        await assert_serves(client)
        assert (await final_of(client, sound["id"]))["status"] == "succeeded"
        listed = (await client.get("/v1/fine_tuning/jobs")).json()["data"]
        assert [job["id"] for job in listed] == [sound["id"]], "the unreadable row is left out"
        await assert_serves(client)
