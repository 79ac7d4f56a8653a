"""Warm trainers through the embedding API: jobs forked from a warm process.

The TRL job is real training of the tiny model; its warm process imports
torch, transformers and TRL once (several seconds) and is stopped when the
module ends. A warm process that dies between jobs is started again by the
next job, which succeeds.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from support import wait_exited

from alallo import Job, JobStatus, Runtime, Settings
from alallo.executors import _warm

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


@pytest.fixture(scope="module", autouse=True)
def _stop_trl_warm_process() -> Iterator[None]:
    yield
    for warm in _warm.warm_processes():
        if warm.module == "alallo.trainers.trl":
            warm.stop()


def warm_processes(module: str) -> list[_warm.WarmProcess]:
    return [w for w in _warm.warm_processes() if w.module == module and w.alive()]


async def run_job(rt: Runtime, spec: dict[str, object]) -> Job:
    account = await rt.authenticate(rt.api_key)
    file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
    job = await rt.create_job(account, {"training_file": file.id, **spec})
    with trio.fail_after(240):
        return await rt.wait_for_final(account, job.id)


async def test_a_trl_job_trains_to_succeeded_through_the_warm_path(tmp_path: Path) -> None:
    async with Runtime(Settings(data_dir=tmp_path)) as rt:
        done = await run_job(rt, {"model": "alallo/tiny-gpt2",
                                  "hyperparameters": {"max_steps": 4, "batch_size": 2}})
    assert done.status is JobStatus.SUCCEEDED and done.progress.step == 4
    model = Path(done.fine_tuned_model or "")
    assert (model / "adapter_config.json").is_file()
    assert len(warm_processes("alallo.trainers.trl")) == 1
    log = next((tmp_path / "jobs").glob("*/attempt-1/trainer-output.log")).read_text()
    assert '"type":"progress","step":4' in log


async def test_the_next_job_succeeds_after_the_warm_process_died(tmp_path: Path) -> None:
    simulated = {"model": "alallo/tiny-gpt2", "hyperparameters": {"max_steps": 3},
                 "trainer": {"type": "simulated", "step_delay_s": 0.0}}
    async with Runtime(Settings(data_dir=tmp_path)) as rt:
        first = await run_job(rt, simulated)
        [warm] = warm_processes("alallo.trainers.simulated")
        dead = warm.pid
        assert dead is not None
        os.kill(dead, signal.SIGKILL)
        await wait_exited([dead], timeout=10)
        assert not warm.alive()
        second = await run_job(rt, simulated)
    assert first.status is second.status is JobStatus.SUCCEEDED
    assert second.attempt == 1, "no restart: it started on the new warm process"
    [again] = warm_processes("alallo.trainers.simulated")
    assert again.pid != dead
