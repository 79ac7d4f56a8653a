"""One job's fault is that job's alone, in the embedding API (issue 14, section 3).

The user-level tests (real servers, real faults) are in ``tests/gateway/test_job_faults.py``;
here the runtime is driven directly: a start that fails half-way, a job queued for a start
twice, a job whose actor crashes at every start, and an upload the store fails to record.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import trio

from alallo import EventType, JobStatus, Runtime, Settings
from alallo.cluster._cluster import Claim
from alallo.store._store import StoreUnavailable

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


def simulated(file_id: str, steps: int, delay: float) -> dict[str, object]:
    return {"model": "alallo/tiny-gpt2", "training_file": file_id,
            "hyperparameters": {"max_steps": steps},
            "trainer": {"type": "simulated", "step_delay_s": delay}}


async def test_a_start_that_fails_half_way_closes_what_it_opened_and_raises_the_error(
        tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    rt = Runtime(settings)

    async def store_gone() -> list[Claim]:
        raise StoreUnavailable("the store failed: OperationalError: connection lost")

    # The nurseries and the supervisor of job actors are open when the recovery scan fails.
    rt.cluster.claim_expired = store_gone  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable, match="connection lost"):
        async with rt:
            pass  # pragma: no cover
    assert rt.actor_statistics() is not None and rt.actor_statistics().running == 0  # type: ignore[union-attr]

    async with Runtime(settings) as again:  # the same data opens as usual afterwards
        assert await again.authenticate(again.api_key)


async def test_the_same_job_queued_twice_at_start_starts_once_and_finishes_once(
        tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    async with Runtime(settings) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        job = await rt.create_job(account, simulated(file.id, 30, 0.02))
        with trio.fail_after(30):
            async for item in rt.stream(account, job.id):
                if item.kind == "job" and item.data["progress"]["step"] >= 2:
                    break

    rt = Runtime(settings)
    claims: list[Claim] = []
    claim_expired = rt.cluster.claim_expired

    async def recovered_twice() -> list[Claim]:
        claims.extend(await claim_expired())
        return claims + claims

    rt.cluster.claim_expired = recovered_twice  # type: ignore[method-assign]
    async with rt:
        assert [c.job_id for c in claims] == [job.id]
        await rt.relocation.adopt(claims)  # and adopted too, while its actor starts
        await rt.relocation.adopt(claims)
        with trio.fail_after(30):
            final = await rt.wait_for_final(account, job.id)
        await rt.relocation.adopt(claims)  # a start request for a job that ended is a no-op
        stats = rt.actor_statistics()
        events, _ = await rt.list_events(account, job.id, limit=1000)
    assert final.status is JobStatus.SUCCEEDED
    types = [e.type for e in events]
    assert types.count(EventType.JOB_RESTARTED) == 1 and types.count(EventType.JOB_COMPLETE) == 1
    assert stats is not None and stats.started == 2, "the scheduler and one job actor"
    assert (stats.crashed, stats.given_up) == (0, 0)


async def test_a_job_whose_actor_crashes_at_every_start_fails_and_the_others_go_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(data_dir=tmp_path)
    async with Runtime(settings) as rt:
        account = await rt.authenticate(rt.api_key)
        bad_file = await rt.upload_file(account, "bad.jsonl", SAMPLE.read_bytes())
        good_file = await rt.upload_file(account, "good.jsonl", SAMPLE.read_bytes())
        broken = await rt.create_job(account, simulated(bad_file.id, 30, 0.05))
        sound = await rt.create_job(account, simulated(good_file.id, 30, 0.05))

    rt = Runtime(settings)
    crashes: list[float] = []
    notified: list[tuple[str, str]] = []
    file_format = rt.files.format

    def format_of(file_id: str) -> Any:
        if file_id == bad_file.id:  # a bug that only this job's data meets
            crashes.append(time.monotonic())
            raise KeyError(file_id)
        return file_format(file_id)

    monkeypatch.setattr(rt.files, "format", format_of)
    monkeypatch.setattr(rt, "notify_operator",
                        lambda job_id, reason: notified.append((job_id, reason)))
    async with rt:
        with trio.fail_after(60):
            failed = await rt.wait_for_final(account, broken.id)
            failed_at = time.monotonic()
            done = await rt.wait_for_final(account, sound.id)
        stats = rt.actor_statistics()
        events, _ = await rt.list_events(account, broken.id, limit=1000)
    assert failed.status is JobStatus.FAILED and failed.error is not None
    assert failed.error.code == "platform_error"
    assert failed.message == "Failed. We've been notified and are looking into it."
    assert failed.charged - failed.refunded == 0
    (error,) = [e for e in events if e.type is EventType.JOB_ERROR]
    assert "its actor failed" in error.message and "KeyError" in error.message
    assert notified == [(broken.id, error.message)]
    assert done.status is JobStatus.SUCCEEDED
    assert stats is not None and (stats.given_up, stats.escalations) == (1, 0)
    assert len(crashes) == 6, "the first incarnation and 5 restarts"
    # Backoff 0.1, 0.2, 0.4, 0.8, 1.6 s (each less up to 10 % jitter) between the crashes.
    assert 2.7 <= failed_at - crashes[0] < 10


async def test_an_upload_the_store_fails_to_record_leaves_no_bytes_behind(
        tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    async with Runtime(settings) as rt:
        account = await rt.authenticate(rt.api_key)
        before = sorted(settings.files_dir.iterdir())

        async def store_fails(*args: object, **kwargs: object) -> None:
            raise StoreUnavailable("the store failed: OperationalError: connection lost")

        rt.store.insert_file = store_fails  # type: ignore[method-assign]
        with pytest.raises(StoreUnavailable):
            await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        # A failed request changes nothing: no file listed, no bytes left on the disk.
        assert sorted(settings.files_dir.iterdir()) == before
        assert await rt.list_files(account) == []
