"""Recovery in the embedding API: a runtime opening on live jobs serves while it recovers them.

The real-process crash tests (``kill -9``) are in ``tests/gateway/test_recovery.py``;
here the runtime is closed with jobs running and queued, and opened again.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import trio

from alallo import EventType, JobStatus, Runtime, Settings

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


def simulated(file_id: str, steps: int, delay: float) -> dict[str, object]:
    return {"model": "alallo/tiny-gpt2", "training_file": file_id,
            "hyperparameters": {"max_steps": steps},
            "trainer": {"type": "simulated", "step_delay_s": delay}}


async def test_requests_during_recovery_are_answered_and_queued_jobs_keep_their_order(
        tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, max_concurrent_jobs=1)
    async with Runtime(settings) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        running = await rt.create_job(account, simulated(file.id, 60, 0.05))
        queued = [await rt.create_job(account, simulated(file.id, 2, 0.0)) for _ in range(3)]
        with trio.fail_after(30):
            async for item in rt.stream(account, running.id):
                if item.kind == "job" and item.data["progress"]["step"] >= 1:
                    break
        assert [(await rt.get_job(account, j.id)).status for j in queued] == [
            JobStatus.QUEUED] * 3

    rt = Runtime(settings)
    # Hold the actors' starts until the requests below are in, so that they meet
    # the recovery at work whatever the backend's speed.
    gate = trio.Event()
    start_actor = rt._start_actor

    async def gated_start(*args: Any, **kwargs: Any) -> None:
        await gate.wait()
        await start_actor(*args, **kwargs)

    rt._start_actor = gated_start  # type: ignore[method-assign]
    async with rt:
        assert rt.recovering  # the runtime serves before its job actors have started
        first, cancelled, last = queued
        assert (await rt.get_job(account, running.id)).status is JobStatus.RUNNING
        late = await rt.create_job(account, simulated(file.id, 2, 0.0))
        assert late.status is JobStatus.QUEUED
        async with trio.open_nursery() as nursery:
            answers: list[JobStatus] = []

            async def cancel() -> None:
                answers.append((await rt.cancel_job(account, cancelled.id)).status)

            nursery.start_soon(cancel)
            await trio.sleep(0.05)  # not a wait: nothing may answer the cancel meanwhile
            assert not answers  # the cancel waits for the job's actor
            gate.set()
        assert answers[0] in {JobStatus.CANCELLING, JobStatus.CANCELLED}
        with trio.fail_after(30):
            # The last actor started, late's, has its place in the queue: the actors started
            # before it have asked for capacity before it.
            async with contextlib.aclosing(rt.stream_jobs(account)) as feed:
                async for item in feed:
                    if item.job_id == late.id and item.data["queue_position"] is not None:
                        break
            queue = (await rt.capacity())["queue"]
            finals = {j.id: await rt.wait_for_final(account, j.id)
                      for j in (running, *queued, late)}
        # Recovered queued jobs wait in their order, and a job created meanwhile behind them.
        assert queue == [first.id, last.id, late.id]
        assert finals[cancelled.id].status is JobStatus.CANCELLED
        assert all(finals[j.id].status is JobStatus.SUCCEEDED
                   for j in (running, first, last, late))
        events, _ = await rt.list_events(account, running.id, limit=1000)
        assert [e.type for e in events].count(EventType.JOB_RESTARTED) == 1
