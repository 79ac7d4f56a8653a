"""The scheduler actor: order, backfill, goals, and never a device given twice."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from actors import ActorRef, open_supervisor
from alallo.capacity._pool import NodeSpec, Pool
from alallo.jobs._plan import Plan
from alallo.capacity._scheduler import (Acquire, Grant, QueueSnapshot, Release, Scheduler,
                                        SchedulerMessage, WaitEstimate)

pytestmark = pytest.mark.unit


def plan(devices: int = 1, training_s: float = 100.0, device: str = "A100-80GB",
         price_per_hour: float = 1.0) -> Plan:
    return Plan(device_type=device, devices=devices, memory_gb=10, price_per_hour=price_per_hour,
                step_time_s=training_s / 10, startup_s=0, max_steps=10)


class Waiter:
    """One job's side of an Acquire: its grant channel and the positions it was told."""

    def __init__(self, job_id: str, *options: Plan, goal: str = "lowest_cost") -> None:
        self.job_id = job_id
        self.positions: list[int] = []
        self.send, self.receive = trio.open_memory_channel[Grant](1)
        self.request = Acquire(job_id, options, goal, self.send, self.positions.append)

    def granted(self) -> Grant | None:
        try:
            return self.receive.receive_nowait()
        except trio.WouldBlock:
            return None


@pytest.fixture
async def scheduler() -> AsyncIterator[ActorRef[SchedulerMessage]]:
    pool = Pool([NodeSpec(name="a", device="A100-80GB", count=2),
                 NodeSpec(name="l", device="L40S-48GB", count=1)])
    async with open_supervisor(name="test") as sup:
        yield await sup.start_child(partial(Scheduler, pool, clock=trio.current_time), name="scheduler")


async def settle(ref: ActorRef[SchedulerMessage]) -> list[str]:
    queue: list[str] = await ref.ask(QueueSnapshot())
    return queue


async def test_first_come_first_served_with_queue_positions(
        scheduler: ActorRef[SchedulerMessage]) -> None:
    a, b, c = Waiter("a", plan(2)), Waiter("b", plan(2)), Waiter("c", plan(2))
    for w in (a, b, c):
        await scheduler.tell(w.request)
    assert await settle(scheduler) == ["b", "c"]
    assert a.granted() is not None and b.granted() is None
    assert (b.positions, c.positions) == ([1], [2])
    await scheduler.tell(Release("a"))
    assert await settle(scheduler) == ["c"]
    assert b.granted() is not None and c.positions == [2, 1]


async def test_backfill_never_delays_the_head(scheduler: ActorRef[SchedulerMessage]) -> None:
    running = Waiter("running", plan(1, training_s=100))
    head = Waiter("head", plan(2, training_s=100))
    short = Waiter("short", plan(1, training_s=50))
    long = Waiter("long", plan(1, training_s=500))
    for w in (running, head, long, short):
        await scheduler.tell(w.request)
    assert await settle(scheduler) == ["head", "long"]
    assert running.granted() is not None and short.granted() is not None
    assert head.granted() is None and long.granted() is None


async def test_a_job_that_fits_elsewhere_is_not_held_up(
        scheduler: ActorRef[SchedulerMessage]) -> None:
    big = Waiter("big", plan(2))
    await scheduler.tell(big.request)
    blocked = Waiter("blocked", plan(2))
    other = Waiter("other", plan(1, device="L40S-48GB"))
    await scheduler.tell(blocked.request)
    await scheduler.tell(other.request)
    assert await settle(scheduler) == ["blocked"]
    assert other.granted() is not None


async def test_the_wait_behind_the_queue_follows_joins_starts_and_cancels(
        scheduler: ActorRef[SchedulerMessage]) -> None:
    # Both A100s busy for 100 s; then the queue's training time over one 2-device slot.
    running, b, c = (Waiter("running", plan(2, training_s=100)),
                     Waiter("b", plan(2, training_s=100)), Waiter("c", plan(2, training_s=300)))
    for w in (running, b, c):
        await scheduler.tell(w.request)
    assert await settle(scheduler) == ["b", "c"]
    wait = partial(scheduler.ask, WaitEstimate(plan(2)))
    assert await wait() == pytest.approx(100 + 100 + 300, abs=1)
    await scheduler.tell(Release("running"))  # b starts: c alone waits
    assert await settle(scheduler) == ["c"]
    assert await wait() == pytest.approx(100 + 300, abs=1)
    await scheduler.tell(Release("c"))  # cancelled while queued
    assert await settle(scheduler) == []
    assert await wait() == pytest.approx(100, abs=1)


async def test_goals(scheduler: ActorRef[SchedulerMessage]) -> None:
    cheap_slow = plan(1, training_s=200, device="L40S-48GB", price_per_hour=0.5)
    dear_fast = plan(1, training_s=100, device="A100-80GB", price_per_hour=2.0)
    cost, fast = (Waiter("cost", cheap_slow, dear_fast),
                  Waiter("fast", cheap_slow, dear_fast, goal="fastest_finish"))
    await scheduler.tell(cost.request)
    await scheduler.tell(fast.request)
    await settle(scheduler)
    cost_grant, fast_grant = cost.granted(), fast.granted()
    assert cost_grant is not None and cost_grant.placement.device_type == "L40S-48GB"
    assert fast_grant is not None and fast_grant.placement.device_type == "A100-80GB"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["acquire", "release"]), st.integers(0, 5),
                          st.integers(1, 2)), max_size=30))
def test_no_device_is_ever_given_twice(ops: list[tuple[str, int, int]]) -> None:
    async def main() -> None:
        pool = Pool([NodeSpec(name="a", device="A100-80GB", count=2)])
        held: dict[str, tuple[int, ...]] = {}
        waiters: dict[str, Waiter] = {}
        async with open_supervisor(name="prop") as sup:
            ref = await sup.start_child(partial(Scheduler, pool, clock=trio.current_time))
            for op, n, devices in ops:
                job = f"j{n}"
                if op == "acquire" and job not in waiters:
                    waiters[job] = Waiter(job, plan(devices))
                    await ref.tell(waiters[job].request)
                elif op == "release" and job in waiters:
                    await ref.tell(Release(job))
                    del waiters[job]
                    held.pop(job, None)
                await ref.ask(QueueSnapshot())
                for job_id, w in waiters.items():
                    if (grant := w.granted()) is not None:
                        held[job_id] = grant.placement.device_indices
                        assert len(grant.placement.device_indices) == grant.placement.devices
                indices = [i for ix in held.values() for i in ix]
                assert len(indices) == len(set(indices)) <= 2  # no device held twice
                assert set(indices) <= {0, 1}
                assert pool.nodes["a"].held == held
                assert sum(pool.nodes["a"].busy.values()) <= 2
    trio.run(main)


def test_the_pool_gives_each_job_its_own_devices() -> None:
    pool = Pool([NodeSpec(name="a", device="A100-80GB", count=3)])
    node = pool.nodes["a"]
    first = pool.take(node, "j1", 2)
    second = pool.take(node, "j2", 1)
    assert (first.device_indices, second.device_indices) == ((0, 1), (2,))
    pool.release("j1")
    assert node.free_indices() == [0, 1] and node.held == {"j2": (2,)}
    assert pool.take(node, "j3", 1).device_indices == (0,)


def start_times(jobs: list[tuple[int, float]]) -> dict[str, float]:
    """Run jobs (devices, training seconds), all submitted at t=0 in order, on one node of
    two devices, each holding its devices for exactly its planned time; their start times."""
    import trio.testing

    started: dict[str, float] = {}

    async def main() -> None:
        pool = Pool([NodeSpec(name="a", device="A100-80GB", count=2)])
        async with open_supervisor(name="prop") as sup:
            ref = await sup.start_child(partial(Scheduler, pool, clock=trio.current_time))

            async def job(name: str, devices: int, seconds: float, *,
                          task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                w = Waiter(name, plan(devices, training_s=seconds))
                await ref.tell(w.request)
                task_status.started()
                await w.receive.receive()
                started[name] = trio.current_time()
                await trio.sleep(seconds)  # not a wait: the job trains (mock clock)
                await ref.tell(Release(name))

            async with trio.open_nursery() as nursery:
                for i, (devices, seconds) in enumerate(jobs):
                    await nursery.start(job, f"j{i}", devices, seconds)  # it asked, in order
                    await ref.ask(QueueSnapshot())

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return started


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2), st.sampled_from([10.0, 30.0, 50.0, 100.0])),
                min_size=2, max_size=7))
def test_backfill_never_delays_the_head_of_the_queue(jobs: list[tuple[int, float]]) -> None:
    alone = start_times(jobs)
    # The first job that had to wait was the head of the queue at some point.
    waited = [i for i in range(len(jobs)) if alone[f"j{i}"] > 0]
    if not waited:
        return
    head = waited[0]
    without_later = start_times(jobs[: head + 1])
    assert alone[f"j{head}"] <= without_later[f"j{head}"] + 1e-6
