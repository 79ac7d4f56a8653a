"""A plan of two devices trains as two ranks: real TRL under torchrun, gloo on the CPU.

The CPU node offers two devices (``cpu_devices=2``); goal ``fastest_finish`` takes the
data-parallel plan. Rank 0 alone speaks the protocol; cancelling stops every rank.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio

from alallo import JobStatus, Runtime, Settings

pytestmark = [pytest.mark.any_backend, pytest.mark.slow]

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


def processes_in(directory: Path) -> list[int]:
    """The pids of the processes whose working directory is ``directory``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(os.readlink(f"/proc/{entry}/cwd")) == directory:
                    found.append(int(entry))
            except OSError:
                continue  # gone, or not ours to read
    return found


async def test_a_two_device_plan_runs_two_ranks_and_cancel_stops_them(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, cpu_devices=2, warm_trainers=False)
    async with Runtime(settings) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        spec = {"model": "alallo/tiny-gpt2", "training_file": file.id, "goal": "fastest_finish",
                "hyperparameters": {"max_steps": 10, "batch_size": 4}, "seed": 1}

        cancelled = await rt.create_job(account, spec)
        attempt = (tmp_path / "jobs" / cancelled.id / "attempt-1").resolve()
        with trio.fail_after(120):
            async for item in rt.stream(account, cancelled.id):
                if item.kind == "job" and item.data["progress"]["step"] >= 1:
                    break
        # torchrun and its two ranks, each in the job's run directory
        assert len(processes_in(attempt)) == 3
        await rt.cancel_job(account, cancelled.id)
        with trio.fail_after(60):
            async for item in rt.stream(account, cancelled.id):
                pass
            while processes_in(attempt):  # the ranks die with their launcher
                await trio.sleep(0.05)
        assert (await rt.get_job(account, cancelled.id)).status is JobStatus.CANCELLED

        job = await rt.create_job(account, spec)
        assert (job.plan.devices, job.plan.device_type) == (2, "cpu")
        log: list[str] = []
        with trio.fail_after(120):
            async for item in rt.stream(account, job.id):
                if item.kind == "log":
                    log.append(item.data["text"])
        done = await rt.get_job(account, job.id)
    assert done.status is JobStatus.SUCCEEDED, log
    assert done.placement is not None and done.placement["device_indices"] == [0, 1]
    assert "Distributed training: world size 2, backend gloo" in log
    assert log.count("Training complete") == 1, "rank 0 alone reports"
    assert done.plan.price_per_hour == 2 * settings.cpu_price_per_hour


def rank_of(pid: int) -> int | None:
    """The ``RANK`` a process was started with (None: not a rank, or gone)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    found = [v for v in environ if v.startswith(b"RANK=")]
    return int(found[0][5:]) if found else None


async def test_a_crashed_rank_restarts_the_job_from_its_checkpoint(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, cpu_devices=2, warm_trainers=False)
    async with Runtime(settings) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        job = await rt.create_job(account, {
            "model": "alallo/tiny-gpt2", "training_file": file.id, "goal": "fastest_finish",
            "hyperparameters": {"max_steps": 30, "batch_size": 4}, "seed": 1})
        attempt = (tmp_path / "jobs" / job.id / "attempt-1").resolve()
        with trio.fail_after(120):
            async for item in rt.stream(account, job.id):
                if item.kind == "event" and item.data["alallo_type"] == "CHECKPOINT_SAVE":
                    break
        (second,) = [pid for pid in processes_in(attempt) if rank_of(pid) == 1]
        os.kill(second, signal.SIGKILL)  # one rank dies: the group goes down with it
        with trio.fail_after(180):
            async for _ in rt.stream(account, job.id):
                pass
        done = await rt.get_job(account, job.id)
        events, _ = await rt.list_events(account, job.id, limit=1000)
    assert done.status is JobStatus.SUCCEEDED and done.attempt == 2 and done.restarts == 1
    (restarted,) = [e.message for e in events if e.type.value == "JOB_RESTARTED"]
    assert restarted.startswith("Job restarted from the checkpoint at step 10: "), restarted
    assert done.progress.step == 30
