"""`alallo.runtime._starter.Starter`: job actors start once per job, in order; what cannot start fails."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from actors import ActorStopped
from alallo.jobs._job import Job
from alallo.runtime._starter import Starter

pytestmark = pytest.mark.unit


def job(job_id: str) -> Job:
    return Job.model_construct(id=job_id)


class Fake:
    """The supervisor and the runtime as the starter sees them: who runs, who started, who
    failed; a start waits for ``gate`` when it is set up, and raises what ``errors`` names."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        self.starts: list[tuple[str, str | None]] = []
        self.failed: list[tuple[str, str]] = []
        self.errors: dict[str, BaseException] = {}
        self.gate: trio.Event | None = None
        self.failing = trio.Event()

    async def start(self, job: Job, cause: str | None) -> None:
        self.starts.append((job.id, cause))
        if self.gate is not None:
            await self.gate.wait()
        if job.id in self.errors:
            raise self.errors[job.id]
        self.running.add(job.id)

    async def fail(self, job_id: str, reason: str) -> None:
        self.failed.append((job_id, reason))
        await self.failing.wait()

    def starter(self) -> Starter:
        return Starter(self.start, exists=self.running.__contains__, fail=self.fail)


async def test_a_job_requested_twice_starts_once_and_in_request_order() -> None:
    fake = Fake()
    starter = fake.starter()
    async with starter.open():
        assert starter.request(job("a"), "recovered")
        assert starter.request(job("b"))
        assert not starter.request(job("a"), "adopted"), "queued already: a no-op"
        assert starter.recovering
        await starter.wait_started("b")
        assert not starter.request(job("a")), "running: a no-op"
        assert not await starter.start(job("b")), "running: a no-op"
    assert fake.starts == [("a", "recovered"), ("b", None)]
    assert not starter.recovering


async def test_a_start_while_queued_starts_are_made_waits_behind_them() -> None:
    fake = Fake()
    fake.gate = trio.Event()
    starter = fake.starter()
    async with starter.open():
        starter.request(job("recovered"))
        await trio.testing.wait_all_tasks_blocked()  # its start waits for the gate
        assert await starter.start(job("new")), "queued behind"
        assert not await starter.start(job("recovered")), "starting: a no-op"
        assert starter.idle("other") and not starter.idle("new")
        fake.gate.set()
        await starter.wait_started("new")
        assert await starter.start(job("later"))  # nothing queued: started at once
        assert "later" in fake.running
    assert [job_id for job_id, _ in fake.starts] == ["recovered", "new", "later"]


async def test_a_job_whose_actor_cannot_start_fails_and_is_not_started_meanwhile() -> None:
    fake = Fake()
    fake.errors["bad"] = KeyError("file-1")
    starter = fake.starter()
    async with starter.open():
        starter.request(job("bad"))
        starter.request(job("good"))
        await trio.testing.wait_all_tasks_blocked()  # failing "bad" waits for fake.failing
        assert fake.failed == [("bad", "its actor could not start: KeyError: 'file-1'")]
        assert not starter.request(job("bad")), "being failed: a no-op"
        fake.failing.set()
        await starter.wait_started("good")
        assert fake.running == {"good"}
        assert starter.idle("bad")


async def test_a_given_up_actor_fails_its_job_once_and_blocks_starts_until_then() -> None:
    fake = Fake()
    starter = fake.starter()
    async with starter.open(), trio.open_nursery() as nursery:
        nursery.start_soon(starter.given_up, "loop", KeyError("file-1"))
        await trio.testing.wait_all_tasks_blocked()
        assert not starter.request(job("loop")) and not await starter.start(job("loop"))
        waiting = trio.Event()

        async def wait() -> None:
            await starter.wait_started("loop")
            waiting.set()

        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        assert not waiting.is_set(), "a cancel waits until the failure is written"
        fake.failing.set()
        await waiting.wait()
    assert fake.failed == [("loop", "its actor failed 6 times within 60 s; "
                                    "the last time: KeyError: 'file-1'")]
    assert fake.starts == []


async def test_a_closing_runtime_stops_the_queued_starts_and_releases_their_waiters() -> None:
    fake = Fake()
    fake.errors["a"] = ActorStopped("the supervisor is not running")
    starter = fake.starter()
    async with starter.open():
        for name in ("a", "b", "c"):
            starter.request(job(name))
        with trio.fail_after(1):
            await starter.wait_started("c")
    assert [job_id for job_id, _ in fake.starts] == ["a"] and fake.failed == []
    assert starter.idle("b") and starter.idle("c")


async def test_a_request_to_a_starter_not_open_is_refused() -> None:
    with pytest.raises(RuntimeError, match="not open"):
        Fake().starter().request(job("a"))
