"""Two ``alallo serve`` processes on one PostgreSQL database act as one service.

Real processes, real signals. Both servers share one data dir (the shared
path: uploaded files, checkpoints, the API key) and one database; short
heartbeats and leases. Jobs are created through server A, so A owns them;
a client follows one of them through server B. Then A is killed with
SIGKILL mid-training: B adopts A's jobs within the lease time and runs them
from their checkpoints. Checked: the client following through B saw every
event and log line of the job, in order, once, with the ids the store
keeps, before and after the move; the job restarted once, from its
checkpoint, naming the cause; no trainer of A is left; no step is charged
twice; the job that was queued on A runs on B after it, in its order.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from httpx_sse import aconnect_sse

from support import (EXAMPLES, Item, LiveServer, drop_databases, follow_stream, job_of,
                     new_database_url, read_stream, start_server, stop_server, upload,
                     wait_exited, wait_for_job)

STEP_S = 0.1
PRICE_PER_HOUR = 3600.0
"""A simulated step of 0.1 s then costs $0.10."""
STEP_PRICE = PRICE_PER_HOUR * STEP_S / 3600


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[LiveServer, LiveServer]]:
    url = new_database_url()
    env = {"ALALLO_DATABASE_URL": url, "ALALLO_HEARTBEAT_INTERVAL_S": "0.5",
           "ALALLO_LEASE_TTL_S": "3", "ALALLO_CPU_PRICE_PER_HOUR": str(PRICE_PER_HOUR),
           "ALALLO_BUDGET_FACTOR": "1000"}
    data_dir = tmp_path / "shared"
    started = []
    try:
        started.append(start_server(data_dir, **env))
        started.append(start_server(data_dir, **env))
        yield started[0], started[1]
    finally:
        for server in started:
            if server.process.poll() is None:
                stop_server(server)
        drop_databases({url})


def connect(server: LiveServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30)


def trainer_groups(job_id: str) -> set[int]:
    """Process groups of the live processes whose command line names the job."""
    groups = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if job_id.encode() in cmdline and fields[0] != "Z":
            groups.add(int(fields[2]))
    return groups


def group_members(group: int) -> list[int]:
    """The live processes (not zombies) of a process group."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == group and fields[0] != "Z":
                    members.append(int(entry))
    return members


async def submit(client: httpx.AsyncClient, file_id: str, steps: int) -> dict[str, Any]:
    response = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file_id,
        "hyperparameters": {"max_steps": steps},
        "trainer": {"type": "simulated", "step_delay_s": STEP_S}})
    assert response.status_code == 200, response.text
    return dict(response.json())


async def follow_account(client: httpx.AsyncClient, job_id: str, steps: list[int],
                         enough: int, seen_enough: trio.Event) -> None:
    """Read the account stream until job ``job_id`` has been seen at step ``enough``, then
    set ``seen_enough``."""
    async with aconnect_sse(client, "GET", "/v1/fine_tuning/stream",
                            timeout=httpx.Timeout(120)) as source:
        async with contextlib.aclosing(source.aiter_sse()) as events:
            async for sse in events:
                if not sse.data:
                    continue
                job = json.loads(sse.data)
                if job.get("id") == job_id:
                    steps.append(job["progress"]["step"])
                    if steps[-1] >= enough:
                        seen_enough.set()
                        return


def records(items: list[Item]) -> list[tuple[str, int, str]]:
    return [(kind, seq, data.get("alallo_type") or data.get("text") or "")
            for kind, seq, data in items if kind in {"event", "log"}]


async def test_a_killed_servers_jobs_move_to_the_other_and_its_streams_miss_nothing(
        cluster: tuple[LiveServer, LiveServer]) -> None:
    a, b = cluster
    seen: list[Item] = []
    account_steps: list[int] = []
    account_seen_enough = trio.Event()
    async with connect(a) as on_a, connect(b) as on_b:
        file = (await upload(on_a, EXAMPLES / "sample.jsonl")).json()
        first = await submit(on_a, file["id"], 50)
        queued = await submit(on_a, file["id"], 5)
        doomed = await submit(on_a, file["id"], 5)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow_stream, on_b, first["id"], seen)
            nursery.start_soon(follow_account, on_b, first["id"], account_steps, 10,
                               account_seen_enough)
            await wait_for_job(on_b, first["id"], lambda j: j["progress"]["step"] >= 14)
            assert (await job_of(on_b, queued["id"]))["status"] == "queued"
            assert any(kind == "job" and data["progress"]["step"] >= 10
                       for kind, _, data in seen), "B streams a job A runs, while A runs it"
            with trio.fail_after(30):
                await account_seen_enough.wait()
            assert account_steps == sorted(account_steps), "B's account stream follows it too"
            cancel = await on_b.post(f"/v1/fine_tuning/jobs/{doomed['id']}/cancel")
            assert cancel.status_code == 200, cancel.text
            assert cancel.json()["status"] in {"cancelling", "cancelled"}, \
                "a cancel through B reaches the job's owner, A"
            trainers = trainer_groups(first["id"])
            assert len(trainers) == 1
            a.process.send_signal(signal.SIGKILL)
            killed_at = time.monotonic()
            a.process.wait(timeout=30)
            await wait_exited([pid for g in trainers for pid in group_members(g)], timeout=10)
            assert not any(group_members(g) for g in trainers), "A's trainer died with A"
            await wait_for_job(on_b, first["id"], lambda j: j["attempt"] >= 2)
            print(f"adopted {time.monotonic() - killed_at:.1f} s after the kill")
        whole = await read_stream(on_b, first["id"], last_event_id=0)
        events = (await on_b.get(f"/v1/fine_tuning/jobs/{first['id']}/events",
                                 params={"limit": 1000, "order": "asc", "type": "message"},
                                 )).json()["data"]
        with trio.fail_after(60):
            second = [item async for item in _stream(on_b, queued["id"])]
            cancelled = [item async for item in _stream(on_b, doomed["id"])]
        metrics = (await on_b.get("/metrics")).text
    assert 'alallo_job_restarts_total{cause="adopted"} 1.0' in metrics.splitlines(), \
        "B's /metrics shows the job it took over"

    seqs = [seq for _, seq, _ in seen]
    assert seqs == sorted(set(seqs)), "in order, nothing twice"
    assert records(seen) == records(whole), "the follower through B lost nothing"
    final = seen[-1][2]
    assert seen[-1][0] == "job" and final["status"] == "succeeded" and final["attempt"] == 2
    assert final["progress"]["step"] == 50
    assert final["price"]["charged"] == pytest.approx(50 * STEP_PRICE), "no step charged twice"
    restarted = [e["message"] for e in events if e["alallo_type"] == "JOB_RESTARTED"]
    assert len(restarted) == 1 and restarted[0].startswith(
        "Job restarted from the checkpoint at step ")
    assert restarted[0].endswith(": the process that ran it stopped")
    resumed = [text for kind, _, text in records(whole) if text.startswith("Resuming from")]
    assert len(resumed) == 1
    assert second[-1][2]["status"] == "succeeded"
    assert second[-1][2]["progress"]["step"] == 5
    assert cancelled[-1][2]["status"] == "cancelled"


async def _stream(client: httpx.AsyncClient, job_id: str) -> Any:
    for item in await read_stream(client, job_id, last_event_id=0):
        yield item
