"""Files uploaded with ``expires_after`` (OpenAI's): gone for the account when they expire,
deleted by the runtime's sweep, and kept for a job that trains on them until it ends."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from alallo import InvalidRequest, JobStatus, NotFound, Runtime, Settings
from alallo.runtime._file_expiry import Sweep

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


def simulated(file_id: str, steps: int, delay: float) -> dict[str, object]:
    return {"model": "alallo/tiny-gpt2", "training_file": file_id,
            "hyperparameters": {"max_steps": steps},
            "trainer": {"type": "simulated", "step_delay_s": delay}}


async def sweep_that(rt: Runtime, done: object) -> Sweep:
    """The first sweep from now for which ``done(sweep)`` holds."""
    with trio.fail_after(60):
        while True:
            sweep = await rt.files.expiry.wait_sweep()
            if done(sweep):  # type: ignore[operator]
                return sweep


async def test_an_expired_file_is_deleted_but_kept_for_the_job_that_trains_on_it(
        tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, min_file_expiry_s=1, file_expiry_sweep_s=0.05,
                        max_concurrent_jobs=1)
    data = SAMPLE.read_bytes()
    async with Runtime(settings) as rt:
        account = await rt.authenticate(rt.api_key)
        kept = await rt.upload_file(account, "kept.jsonl", data)
        # The one slot is taken: the job on the expiring file waits for it, not started.
        blocker = await rt.create_job(account, simulated(kept.id, 100_000, 0.05))
        # Whole seconds (created_at is truncated): 3 leaves the job at least 2 s to be created.
        used = await rt.files.upload(account, "used.jsonl", data, expires_after_s=3)
        waiting = await rt.create_job(account, simulated(used.id, 4, 0.0))
        unused = await rt.files.upload(account, "unused.jsonl", data, expires_after_s=3)
        assert used.expires_at == used.created_at + 3

        sweep = await sweep_that(rt, lambda s: unused.id in s.deleted)
        assert used.id in sweep.kept  # expired no later than `unused`, and a job needs it
        for gone in (used.id, unused.id):
            with pytest.raises(NotFound):
                await rt.get_file(account, gone)
        assert [f.id for f in await rt.list_files(account)] == [kept.id]
        with pytest.raises(InvalidRequest, match="no training file") as refused:
            await rt.create_job(account, simulated(used.id, 4, 0.0))
        assert refused.value.param == "training_file"
        assert not rt.file_storage.local_path(unused.id).exists()

        await rt.cancel_job(account, blocker.id)
        with trio.fail_after(60):
            async for _ in rt.stream(account, waiting.id):
                pass
        done = await rt.get_job(account, waiting.id)
        assert done.status is JobStatus.SUCCEEDED, done.message
        assert done.progress.step == 4

        # Its job has ended: a sweep deletes it (maybe one that ran before this line, sweeping
        # every 0.05 s: then the next finds its bytes gone).
        stored = rt.file_storage.local_path(used.id)
        await sweep_that(rt, lambda s: used.id in s.deleted or not stored.exists())
        assert not stored.exists()


async def test_expiry_out_of_openais_bounds_is_refused(tmp_path: Path) -> None:
    async with Runtime(Settings(data_dir=tmp_path)) as rt:
        account = await rt.authenticate(rt.api_key)
        for seconds in (3599, 2_592_001):
            with pytest.raises(InvalidRequest, match="between 3600 and 2592000") as refused:
                await rt.files.upload(account, "a.jsonl", SAMPLE.read_bytes(),
                                      expires_after_s=seconds)
            assert refused.value.param == "expires_after"
        assert await rt.list_files(account) == []
