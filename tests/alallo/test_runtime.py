"""The embedding API: ``async with Runtime(settings)`` in a Trio program."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from alallo import EventType, InvalidRequest, JobStatus, NotFound, Runtime, Settings, Unauthorized
from alallo.runtime import _streams

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


def simulated(file_id: str, steps: int, delay: float) -> dict[str, object]:
    return {"model": "alallo/tiny-gpt2", "training_file": file_id,
            "hyperparameters": {"max_steps": steps},
            "trainer": {"type": "simulated", "step_delay_s": delay}}


async def test_embedded_job_streams_to_succeeded(tmp_path: Path) -> None:
    async with Runtime(Settings(data_dir=tmp_path)) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        job = await rt.create_job(account, simulated(file.id, 12, 0.0))
        kinds = []
        with trio.fail_after(30):
            async for item in rt.stream(account, job.id):
                kinds.append((item.kind, item.data.get("status") or item.data.get("type")))
        assert kinds[-1] == ("job", "succeeded")
        done = await rt.get_job(account, job.id)
        assert done.status is JobStatus.SUCCEEDED and done.progress.step == 12
        assert Path(done.fine_tuned_model or "").is_dir()


async def test_api_key_file_is_private_and_reused(tmp_path: Path) -> None:
    async with Runtime(Settings(data_dir=tmp_path)) as rt:
        first = rt.api_key
        assert rt.api_key_created
    key_file = tmp_path / "api-key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    async with Runtime(Settings(data_dir=tmp_path)) as rt:
        assert rt.api_key == first and not rt.api_key_created
        with pytest.raises(Unauthorized):
            await rt.authenticate("sk-alallo-wrong")


async def test_accounts_do_not_see_each_other(tmp_path: Path) -> None:
    async with Runtime(Settings(data_dir=tmp_path)) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        with pytest.raises(NotFound):
            await rt.get_file("acct-other", file.id)
        with pytest.raises(InvalidRequest, match="no training file"):
            await rt.create_job("acct-other", simulated(file.id, 3, 0.0))


async def test_running_job_resumes_from_its_checkpoint_after_a_restart(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    async with Runtime(settings) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        job = await rt.create_job(account, simulated(file.id, 40, 0.05))
        with trio.fail_after(30):
            async for item in rt.stream(account, job.id):
                if item.kind == "event" and item.data["alallo_type"] == "CHECKPOINT_SAVE":
                    break
    stopped = None
    async with Runtime(settings) as rt:
        with trio.fail_after(30):
            stopped = await rt.get_job(account, job.id)
            # The server stopped right after the first checkpoint (a later one may have
            # landed while it stopped): the job continues from the latest.
            assert stopped.checkpoint is not None and stopped.checkpoint.step >= 10
            resumed_at = stopped.checkpoint.step
            final = await rt.wait_for_final(account, job.id)
        assert final.status is JobStatus.SUCCEEDED and final.attempt == 2
        events, _ = await rt.list_events(account, job.id, limit=1000)
        restarted = [e for e in events if e.type is EventType.JOB_RESTARTED]
        assert len(restarted) == 1
        assert restarted[0].message == (f"Job restarted from the checkpoint at step {resumed_at}: "
                                        "the server restarted")
        second_run, _ = await rt.read_log(account, job.id, attempt=2)
        assert any(line.text.startswith(f"Resuming from checkpoint at step {resumed_at}")
                   for line in second_run)
        first_run, _ = await rt.read_log(account, job.id, attempt=1)
        assert first_run and not any("Resuming" in line.text for line in first_run)


async def test_a_crashed_job_actor_restarts_from_its_durable_checkpoint(tmp_path: Path) -> None:
    """The jobs' supervisor keeps job actors' checkpoints in the store (JobCheckpoints):
    when the actor crashes (here: the database fails once), the supervisor restarts it from
    the committed job, and training continues from the trainer's checkpoint."""
    from alallo.store._checkpoints import JobCheckpoints
    from alallo.store._store import StoreUnavailable

    async with Runtime(Settings(data_dir=tmp_path)) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        job = await rt.create_job(account, simulated(file.id, 40, 0.05))
        save_job = rt.store.save_job
        failed: list[int] = []

        async def flaky_save(saved, *args, **kwargs):  # type: ignore[no-untyped-def]
            if saved.checkpoint is not None and saved.progress.step >= 12 and not failed:
                failed.append(saved.progress.step)
                raise StoreUnavailable("the database went away")
            return await save_job(saved, *args, **kwargs)

        rt.store.save_job = flaky_save  # type: ignore[method-assign]
        with trio.fail_after(60):
            final = await rt.wait_for_final(account, job.id)
        assert failed and final.status is JobStatus.SUCCEEDED and final.attempt == 2
        checkpoint = await JobCheckpoints(rt.store).load(job.id)
        assert checkpoint == final
        events, _ = await rt.list_events(account, job.id, limit=1000)
        restarted = [e.message for e in events if e.type is EventType.JOB_RESTARTED]
        assert restarted == ["Job restarted from the checkpoint at step 10: "
                             "its actor restarted after an error"]


async def test_a_long_backlog_streams_a_page_at_a_time_in_order_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A follower catching up holds one page of the job's history, not all of it (a
    # WebSocket following one job 200 times held 200 copies of its log): pages of 7 here.
    monkeypatch.setattr(_streams, "BACKLOG_PAGE", 7)
    async with Runtime(Settings(data_dir=tmp_path)) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        spec = simulated(file.id, 30, 0.0) | {"hyperparameters": {
            "max_steps": 30, "logging_steps": 1}}
        job = await rt.create_job(account, spec)
        with trio.fail_after(30):
            async for _ in rt.stream(account, job.id):
                pass
        stored = [seq for _, seq, _ in await rt.store.items_after(
            job.id, 0, kinds=("event", "log", "metrics"))]
        done = await rt.get_job(account, job.id)
        for after in (0, stored[10]):
            batches = [batch async for batch in rt.stream_batches(account, job.id, after=after)]
            seqs = [item.seq for batch in batches for item in batch]
            assert max(len(batch) for batch in batches) <= 7 + 1, "a page, and the job's state"
            assert seqs == sorted(set(seqs)), "in order, each once"
            assert seqs == [seq for seq in stored if seq > after] + [done.state_seq]
            assert batches[-1][-1].kind == "job" and batches[-1][-1].data["status"] == "succeeded"
