"""A shared checkpoint location (``checkpoint_url``): a job moved to a process that
does not share the first one's data dir resumes from the checkpoint the first saved."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import trio

from alallo import Runtime, Settings

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


async def test_a_job_resumes_elsewhere_from_the_checkpoint_at_the_url(
        tmp_path: Path, database_url: str) -> None:
    shared = tmp_path / "object-store"
    url = f"file://{shared}"
    first = Settings(data_dir=tmp_path / "a", database_url=database_url, checkpoint_url=url)
    async with Runtime(first) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        job = await rt.create_job(account, {
            "model": "alallo/tiny-gpt2", "training_file": file.id,
            "hyperparameters": {"max_steps": 40},
            "trainer": {"type": "simulated", "step_delay_s": 0.1}})
        with trio.fail_after(60):
            async with contextlib.aclosing(rt.stream(account, job.id)) as items:
                async for item in items:
                    if item.kind == "job" and item.data["checkpoint"] is not None:
                        break
        job = await rt.get_job(account, job.id)
    saved = job.checkpoint
    assert saved is not None and job.status.value == "running"
    name = Path(saved.path).name
    assert (shared / job.id / name / "trainer_state.json").is_file(), "copied to the URL"
    shutil.rmtree(tmp_path / "a" / "jobs")  # the first process's disk is gone

    second = Settings(data_dir=tmp_path / "b", database_url=database_url, checkpoint_url=url,
                      api_key=rt.api_key)
    async with Runtime(second) as rt2:
        with trio.fail_after(60):
            done = await rt2.wait_for_final(account, job.id)
        lines, _ = await rt2.read_log(account, job.id, attempt=2)
    assert done.status.value == "succeeded" and done.attempt == 2
    # The first process's copy is gone: the step can only come from the URL's copy.
    assert f"Resuming from checkpoint at step {saved.step}" in [line.text for line in lines]
    assert done.checkpoint is not None
    assert Path(done.checkpoint.path).is_relative_to(tmp_path / "b"), "the new run saves here"
