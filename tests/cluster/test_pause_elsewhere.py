"""Pause and resume through a server process that does not own the job.

Two ``alallo serve`` processes share one PostgreSQL database and data dir. A job is created
through server A, so A owns it (its lease) and runs its trainer; it is paused and resumed
through server B. Checked: B answers the pause with the job paused (or pausing, then
paused), and the resume with the job queued again; A keeps the job and runs it to its end;
every step is charged once; a finished job (and a job being cancelled) answers 409 through B.
A pause asked through B while A is dead (killed) is honoured when B adopts the job.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from support import (EXAMPLES, LiveServer, drop_databases, job_of, new_database_url,
                     read_stream, start_server, stop_server, upload, wait_for_job)

STEP_S = 0.05
PRICE_PER_HOUR = 3600.0
"""A simulated step of 0.05 s then costs $0.05."""
STEP_PRICE = PRICE_PER_HOUR * STEP_S / 3600


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[LiveServer, LiveServer, str]]:
    """Servers A and B on one new database, and its URL."""
    url = new_database_url()
    env = {"ALALLO_DATABASE_URL": url, "ALALLO_HEARTBEAT_INTERVAL_S": "0.5",
           "ALALLO_LEASE_TTL_S": "3", "ALALLO_CPU_PRICE_PER_HOUR": str(PRICE_PER_HOUR),
           "ALALLO_BUDGET_FACTOR": "1000"}
    started: list[LiveServer] = []
    try:
        started.append(start_server(tmp_path / "shared", **env))
        started.append(start_server(tmp_path / "shared", **env))
        yield started[0], started[1], url
    finally:
        for server in started:
            if server.process.poll() is None:
                stop_server(server)
        drop_databases({url})


def owner_pid(url: str, job_id: str) -> int | None:
    """The process id of the server that owns the job (its lease), from the database."""
    engine = sa.create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as c:
            return c.execute(sa.text(
                "SELECT nodes.pid FROM jobs JOIN nodes ON nodes.id = jobs.owner "
                "WHERE jobs.id = :id"), {"id": job_id}).scalar_one_or_none()
    finally:
        engine.dispose()


async def submit(client: httpx.AsyncClient, file_id: str, steps: int) -> dict[str, Any]:
    response = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file_id,
        "hyperparameters": {"max_steps": steps},
        "trainer": {"type": "simulated", "step_delay_s": STEP_S}})
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_a_job_paused_and_resumed_through_another_server_goes_on_where_it_runs(
        two_servers: tuple[LiveServer, LiveServer, str]) -> None:
    a, b, url = two_servers
    async with (httpx.AsyncClient(base_url=a.url, headers=a.headers, timeout=60) as on_a,
                httpx.AsyncClient(base_url=b.url, headers=b.headers, timeout=60) as on_b):
        file = (await upload(on_a, EXAMPLES / "sample.jsonl")).json()
        job = await submit(on_a, file["id"], 60)
        assert owner_pid(url, job["id"]) == a.process.pid, "created through A: A owns it"
        await wait_for_job(on_b, job["id"], lambda j: j["progress"]["step"] >= 5)

        pause = await on_b.post(f"/v1/fine_tuning/jobs/{job['id']}/pause")
        assert pause.status_code == 200, pause.text
        answered = pause.json()
        assert (answered["status"] == "paused" or (
            answered["status"] == "running"
            and answered["message"].startswith("Pausing"))), answered
        paused = await wait_for_job(on_b, job["id"], lambda j: j["status"] == "paused")
        step = paused["checkpoint"]["step"]
        assert 5 <= step < 60 and paused["message"] == (
            f"Paused at step {step}. Resume it to continue from step {step}.")
        assert (await job_of(on_a, job["id"]))["status"] == "paused", "A sees it paused"
        assert owner_pid(url, job["id"]) == a.process.pid, "A paused it: it stays A's"
        again = await on_b.post(f"/v1/fine_tuning/jobs/{job['id']}/pause")
        assert (again.status_code, again.json()["status"]) == (200, "paused"), "idempotent"

        resume = await on_b.post(f"/v1/fine_tuning/jobs/{job['id']}/resume")
        assert resume.status_code == 200, resume.text
        assert resume.json()["status"] in {"queued", "running"}, resume.json()
        items = await read_stream(on_b, job["id"], last_event_id=0)
        final = items[-1][2]
        assert final["status"] == "succeeded", final
        assert final["progress"]["step"] == 60
        assert final["price"]["charged"] == pytest.approx(60 * STEP_PRICE), \
            "each step charged once"
        types = [data["alallo_type"] for kind, _, data in items if kind == "event"]
        at = types.index("PAUSE_REQUESTED")
        assert types[at:at + 5] == ["PAUSE_REQUESTED", "CHECKPOINT_SAVE", "JOB_PAUSED",
                                    "JOB_RESUMED", "JOB_RESTARTED"], types
        assert types.count("JOB_PAUSED") == types.count("JOB_RESUMED") == 1

        finished = await on_b.post(f"/v1/fine_tuning/jobs/{job['id']}/pause")
        assert finished.status_code == 409
        assert finished.json()["error"]["message"] == (
            f"cannot pause {job['id']}: the job has already finished (succeeded)")
        refused = await on_b.post(f"/v1/fine_tuning/jobs/{job['id']}/resume")
        assert refused.status_code == 409

        doomed = await submit(on_a, file["id"], 500)
        await wait_for_job(on_b, doomed["id"], lambda j: j["status"] == "running")
        cancel = await on_b.post(f"/v1/fine_tuning/jobs/{doomed['id']}/cancel")
        assert cancel.status_code == 200, cancel.text
        late = await on_b.post(f"/v1/fine_tuning/jobs/{doomed['id']}/pause")
        assert late.status_code == 409, "a cancel wins over a pause"
        ended = (await read_stream(on_b, doomed["id"]))[-1][2]
        assert ended["status"] == "cancelled"

        # A pause asked while A is dead is honoured by B, which adopts the job.
        orphan = await submit(on_a, file["id"], 40)
        await wait_for_job(on_b, orphan["id"], lambda j: j["progress"]["step"] >= 3)
        a.process.send_signal(signal.SIGKILL)
        a.process.wait(timeout=30)
        pause = await on_b.post(f"/v1/fine_tuning/jobs/{orphan['id']}/pause")
        assert pause.status_code == 200, pause.text
        paused = await wait_for_job(on_b, orphan["id"], lambda j: j["status"] == "paused")
        assert owner_pid(url, orphan["id"]) == b.process.pid, "B adopted it, paused"
        resume = await on_b.post(f"/v1/fine_tuning/jobs/{orphan['id']}/resume")
        assert resume.status_code == 200, resume.text
        final = (await read_stream(on_b, orphan["id"]))[-1][2]
        assert final["status"] == "succeeded" and final["progress"]["step"] == 40, final
        assert final["price"]["charged"] == pytest.approx(40 * STEP_PRICE)
