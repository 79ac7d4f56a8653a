"""Training on a real local Ray cluster (a head with no CPUs for work, two 2-CPU workers).

The runtime's pool is the cluster's worker nodes; each trainer runs as a Ray job on its
planned node. A job runs there to its end; a cancel leaves no process; a node lost (its raylet
killed: the trainer it started outlives it, as on a node cut off) moves the job to the other
node from its checkpoint, charged exactly its steps, and the orphan stops itself (fenced).
The simulated trainer is a real process on the node (no torch): these tests are about where
and how it runs; ``bench/`` runs the real TRL trainer through Ray.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import trio
from ray_cluster import RayCluster

from alallo import EventType, JobStatus, Runtime, Settings
from alallo.jobs import Job
from alallo.jobs._billing import step_price

pytestmark = [pytest.mark.any_backend, pytest.mark.ray, pytest.mark.slow]

DATA = b"".join(b'{"text": "Example number %d."}\n' % n for n in range(200))


@asynccontextmanager
async def ray_runtime(cluster: RayCluster, tmp_path: Path) -> AsyncIterator[tuple[Runtime, str, str]]:
    """A runtime on the cluster, its local account, and a training file of 200 rows."""
    settings = Settings(data_dir=tmp_path / "data", shared_dir=tmp_path / "shared",
                        ray_address=cluster.address, cancel_grace_s=2.0)
    async with Runtime(settings) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "train.jsonl", DATA)
        yield rt, account, file.id


def simulated(file_id: str, steps: int, delay: float) -> dict[str, Any]:
    return {"model": "alallo/tiny-gpt2", "training_file": file_id,
            "hyperparameters": {"max_steps": steps},
            "trainer": {"type": "simulated", "step_delay_s": delay}}


async def until(rt: Runtime, account: str, job_id: str, ready: Any, timeout: float) -> Job:
    """The job once ``ready(job)`` holds, waiting on its stream."""
    with trio.fail_after(timeout):
        async for item in rt.stream(account, job_id):
            if item.kind == "job" and ready(job := await rt.get_job(account, job_id)):
                return job
    job = await rt.get_job(account, job_id)
    assert ready(job), job
    return job


def trainer_pid(job: Job, attempt: int, shared: Path) -> int:
    return int((shared / "jobs" / job.id / f"attempt-{attempt}" / "trainer.pid").read_text())


def run_id(job: Job, attempt: int, shared: Path) -> str:
    launch = json.loads((shared / "jobs" / job.id / f"attempt-{attempt}" / "launch.json").read_text())
    return str(launch["run_id"])


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def ray_job_status(cluster: RayCluster, run_id: str) -> str:
    async with httpx.AsyncClient(base_url=cluster.address) as http:
        return str((await http.get(f"/api/jobs/{run_id}")).json()["status"])


async def test_the_pool_is_the_clusters_workers_and_a_job_runs_on_one(
        ray_cluster: RayCluster, tmp_path: Path) -> None:
    workers = {w.node_id for w in ray_cluster.alive_workers}
    async with ray_runtime(ray_cluster, tmp_path) as (rt, account, file_id):
        capacity = await rt.capacity(account)
        nodes = {n["name"]: n for n in capacity["nodes"]}
        assert set(nodes) == workers, "the head offers no CPU; each worker its 2"
        assert all((n["device_type"], n["devices"], n["ray"], n["simulated"]) == ("cpu", 2, True, False)
                   for n in nodes.values())
        job = await rt.create_job(account, simulated(file_id, steps=20, delay=0.02))
        done = await until(rt, account, job.id, lambda j: j.status.is_final, timeout=90)
        log = [line.text for line in (await rt.read_log(account, job.id))[0]]
    assert done.status is JobStatus.SUCCEEDED, log
    assert done.placement is not None and done.placement["node"] in workers
    assert "Training complete" in log and done.progress.step == 20
    assert await ray_job_status(ray_cluster, run_id(job, 1, tmp_path / "shared")) == "SUCCEEDED"


async def test_cancel_on_ray_stops_the_trainer_and_leaves_no_process(
        ray_cluster: RayCluster, tmp_path: Path) -> None:
    async with ray_runtime(ray_cluster, tmp_path) as (rt, account, file_id):
        job = await rt.create_job(account, simulated(file_id, steps=10_000, delay=0.05))
        await until(rt, account, job.id, lambda j: j.progress.step >= 1, timeout=90)
        pid = trainer_pid(job, 1, tmp_path / "shared")
        assert running(pid)
        await rt.cancel_job(account, job.id)
        done = await until(rt, account, job.id, lambda j: j.status.is_final, timeout=60)
        assert done.status is JobStatus.CANCELLED
        with trio.fail_after(10):
            while running(pid):
                await trio.sleep(0.1)
    assert await ray_job_status(ray_cluster, run_id(job, 1, tmp_path / "shared")) == "STOPPED"


async def test_a_launcher_killed_on_its_node_reads_as_killed_by_that_signal(
        ray_cluster: RayCluster, tmp_path: Path) -> None:
    """The launcher is Ray's entrypoint process itself (no shell between): a SIGKILL it
    gets reads as that signal, as a local trainer's does, not as a shell's exit code 137."""
    async with ray_runtime(ray_cluster, tmp_path) as (rt, account, file_id):
        job = await rt.create_job(account, simulated(file_id, steps=10_000, delay=0.05))
        await until(rt, account, job.id, lambda j: j.progress.step >= 1, timeout=90)
        trainer = psutil.Process(trainer_pid(job, 1, tmp_path / "shared"))
        launcher = trainer.parent()
        assert launcher is not None and "alallo.executors._node_launcher" in launcher.cmdline()
        os.kill(launcher.pid, signal.SIGKILL)
        ended = await until(rt, account, job.id,
                            lambda j: j.attempt == 2 or j.status.is_final, timeout=60)
        events = (await rt.list_events(account, job.id, limit=1000))[0]
        if not ended.status.is_final:
            await rt.cancel_job(account, job.id)
            await until(rt, account, job.id, lambda j: j.status.is_final, timeout=60)
    said = [e.message for e in events] + [ended.restart_cause or ""]
    assert any("the trainer was killed by signal 9" in m for m in said), said


async def test_a_draining_node_moves_the_job_to_the_other_through_ray(
        ray_cluster: RayCluster, tmp_path: Path) -> None:
    """The path a job takes to more capacity: its run stopped on Ray, the next on another
    node, from the checkpoint."""
    async with ray_runtime(ray_cluster, tmp_path) as (rt, account, file_id):
        job = await rt.create_job(account, simulated(file_id, steps=60, delay=0.1))
        first = await until(rt, account, job.id, lambda j: j.checkpoint is not None, timeout=90)
        assert first.placement is not None
        node = first.placement["node"]
        pid = trainer_pid(first, 1, tmp_path / "shared")
        assert await rt.drain_node(node) == [job.id]
        done = await until(rt, account, job.id, lambda j: j.status.is_final, timeout=120)
        await rt.drain_node(node, on=False)
        assert not running(pid)
    assert done.status is JobStatus.SUCCEEDED and done.attempt == 2
    assert done.placement is not None and done.placement["node"] != node
    assert await ray_job_status(ray_cluster, run_id(job, 1, tmp_path / "shared")) == "STOPPED"


async def test_a_lost_node_moves_the_job_to_the_other_from_its_checkpoint(
        ray_cluster: RayCluster, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    try:
        async with ray_runtime(ray_cluster, tmp_path) as (rt, account, file_id):
            job = await rt.create_job(account, simulated(file_id, steps=120, delay=0.25))
            first = await until(rt, account, job.id,
                                lambda j: j.checkpoint is not None, timeout=90)
            assert first.placement is not None
            lost = next(w for w in ray_cluster.workers if w.node_id == first.placement["node"])
            orphan = trainer_pid(first, 1, shared)
            ray_cluster.kill_raylet(lost)  # the trainer it started lives on, cut off
            with trio.fail_after(45):  # Ray takes the node for dead in ~15 s
                moved = await until(rt, account, job.id, lambda j: j.attempt == 2, timeout=45)
            moved_at = trio.current_time()
            assert moved.placement is not None and moved.placement["node"] != lost.node_id
            done = await until(rt, account, job.id, lambda j: j.status.is_final, timeout=120)
            with trio.fail_after(max(1.0, 60 - (trio.current_time() - moved_at))):
                while running(orphan):  # fenced: it stops itself within a minute of the move
                    await trio.sleep(0.2)
            events = (await rt.list_events(account, job.id, limit=1000))[0]
            entries = await rt.store.ledger_entries(job.id)
    finally:
        if len(ray_cluster.alive_workers) < 2:
            ray_cluster.start_worker()
    assert done.status is JobStatus.SUCCEEDED
    messages = {e.type: e.message for e in events}
    assert f"node {lost.node_id} was lost" in messages[EventType.JOB_RESCHEDULED]
    step = first.checkpoint.step if first.checkpoint else 0
    assert messages[EventType.JOB_RESTARTED].startswith(
        "Job restarted from the checkpoint at step ")
    assert done.restarts == 0 and done.attempt == 2 and step >= 10
    charged = [step for e in entries if e["kind"] == "charge"
               for step in range(e["first_step"], e["last_step"] + 1)]
    assert charged == list(range(1, 121)), "each step charged once"
    assert done.charged == pytest.approx(120 * step_price(done), rel=1e-4)
    assert not any((shared / "jobs" / job.id / "attempt-1" / "checkpoints").glob(
        "checkpoint-12*")), "the orphan saved nothing after the move"
