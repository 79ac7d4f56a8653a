"""Two ``alallo serve`` processes that share a database but no path: uploads live
at the shared storage URL (``ALALLO_STORAGE_URL``, here ``file://``).

Real processes, real signals. Each server has its own data dir. A file uploaded
through A is listed, read and used for a job through B (B owns that job, so B
fetches the file); a job created through A, whose trainer A started, is adopted
by B after ``kill -9`` of A and trained to the end with a file B never had; a
file deleted through B is gone at the URL. The servers run on one machine, so
the test deletes what A keeps locally to play separate machines.
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from support import (EXAMPLES, LiveServer, drop_databases, new_database_url, start_server,
                     stop_server, upload, wait_for_job)

SAMPLE = (EXAMPLES / "sample.jsonl").read_bytes()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[LiveServer, LiveServer, Path]]:
    url = new_database_url()
    bucket = tmp_path / "bucket"
    env = {"ALALLO_DATABASE_URL": url, "ALALLO_STORAGE_URL": f"file://{bucket}",
           "ALALLO_HEARTBEAT_INTERVAL_S": "0.5", "ALALLO_LEASE_TTL_S": "3"}
    with ThreadPoolExecutor(2) as pool:  # both start (and stop) at once: half the wait
        starts = [pool.submit(start_server, tmp_path / name / "data", **env) for name in "ab"]
        try:
            a, b = (start.result() for start in starts)
            yield a, b, bucket
        finally:
            started = [s.result() for s in starts if s.exception() is None]
            for stop in [pool.submit(stop_server, server) for server in started
                         if server.process.poll() is None]:
                stop.result()
            drop_databases({url})


def connect(server: LiveServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30)


async def submit(client: httpx.AsyncClient, file_id: str, steps: int) -> str:
    response = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file_id,
        "hyperparameters": {"max_steps": steps},
        "trainer": {"type": "simulated", "step_delay_s": 0.05}})
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


async def until(client: httpx.AsyncClient, job_id: str, done: str) -> dict[str, object]:
    """The job once ``done`` (a Python expression over ``job``) holds, as its stream shows it."""
    return await wait_for_job(
        client, job_id,
        lambda job: eval(done, {}, {"job": job}))  # noqa: S307 - the test's own expressions


async def test_uploads_reach_a_server_with_another_data_dir(
        servers: tuple[LiveServer, LiveServer, Path]) -> None:
    a, b, bucket = servers
    async with connect(a) as on_a, connect(b) as on_b:
        first = (await upload(on_a, content=SAMPLE)).json()
        second = (await upload(on_a, content=SAMPLE, name="second.jsonl")).json()
        assert (bucket / "files" / f"{first['id']}.jsonl").read_bytes() == SAMPLE
        # One machine plays two: what A keeps is out of B's reach, as on another machine.
        for kept in (a.data_dir / "files").iterdir():
            kept.unlink()
        listed = (await on_b.get("/v1/files")).json()["data"]
        assert {f["id"] for f in listed} == {first["id"], second["id"]}
        assert (await on_b.get(f"/v1/files/{first['id']}")).json()["bytes"] == len(SAMPLE)
        content = await on_b.get(f"/v1/files/{first['id']}/content")
        assert content.status_code == 200 and content.content == SAMPLE

        # Created through B: B owns it and trains it on the file A received.
        on_b_job = await submit(on_b, first["id"], 5)
        job = await until(on_b, on_b_job, "job['status'] in ('succeeded', 'failed')")
        assert job["status"] == "succeeded", job

        # Created through A, A trains it; kill -9 A: B adopts it with a file it never had.
        moved = await submit(on_a, second["id"], 40)
        await until(on_a, moved, "job['checkpoint'] is not None")
        assert (a.data_dir / "files" / f"{second['id']}.jsonl").exists(), "A fetched it"
        assert not (b.data_dir / "files" / f"{second['id']}.jsonl").exists()
        a.process.send_signal(signal.SIGKILL)
        a.process.wait(timeout=30)
        shutil.rmtree(a.data_dir / "files")
        shutil.rmtree(a.data_dir / "jobs")  # the checkpoint too comes from the URL
        job = await until(on_b, moved, "job['status'] in ('succeeded', 'failed')")
        assert job["status"] == "succeeded" and job["attempt"] == 2, job
        assert (b.data_dir / "files" / f"{second['id']}.jsonl").read_bytes() == SAMPLE

        deleted = await on_b.delete(f"/v1/files/{first['id']}")
        assert deleted.status_code == 200, deleted.text
        assert not (bucket / "files" / f"{first['id']}.jsonl").exists()
        assert (await on_b.get(f"/v1/files/{first['id']}")).status_code == 404
