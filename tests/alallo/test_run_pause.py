"""A pause in an embedded runtime (:mod:`alallo.runtime._run_pause`): a trainer that does not
honour the pause file is stopped after the grace period, and the job pauses at its latest
checkpoint; the steps after it run again after the resume and are charged once."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from alallo import EventType, JobStatus, Runtime, Settings
from alallo.jobs._billing import step_price

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


async def test_a_trainer_that_ignores_the_pause_is_stopped_and_the_job_pauses_at_its_checkpoint(
        tmp_path: Path) -> None:
    # A run of several ranks never honours the pause file (its ranks could disagree on the
    # step): the simulated trainer told so stands for any trainer that ignores it.
    settings = Settings(data_dir=tmp_path, pause_grace_s=0.2, trainer_env={"WORLD_SIZE": "2"})
    async with Runtime(settings) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        job = await rt.create_job(account, {
            "model": "alallo/tiny-gpt2", "training_file": file.id,
            "hyperparameters": {"max_steps": 20},
            "trainer": {"type": "simulated", "step_delay_s": 0.1}})
        with trio.fail_after(30):
            async for item in rt.stream(account, job.id):
                if item.kind == "job" and item.data["progress"]["step"] >= 12:
                    break
            paused = await rt.jobs.pause_job(account, job.id)
        assert paused.status is JobStatus.PAUSED, paused
        assert paused.message == "Paused at step 10. Resume it to continue from step 10."
        assert paused.progress.step == 10 and paused.charged_through == 10
        charged_at_pause = paused.charged

        resumed = await rt.jobs.resume_job(account, job.id)
        assert resumed.status is JobStatus.QUEUED
        with trio.fail_after(30):
            final = await rt.wait_for_final(account, job.id)
        assert final.status is JobStatus.SUCCEEDED and final.charged_through == 20
        # Steps 11 and 12 ran twice; each of the 20 steps is charged once.
        assert charged_at_pause == pytest.approx(10 * step_price(final), abs=1e-9)
        assert final.charged == pytest.approx(20 * step_price(final), abs=1e-9)
        events, _ = await rt.list_events(account, job.id, limit=1000)
        restarted = [e.message for e in events if e.type is EventType.JOB_RESTARTED]
        assert restarted == ["Job restarted from the checkpoint at step 10: resumed by user"]
