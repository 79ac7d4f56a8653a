from __future__ import annotations

import time

import pytest
import trio
import trio.testing
from actorkit import Boom, Counter, Inc, Journal

from actors import DEFAULT_STOP_TIMEOUT, Actor, Restart, open_supervisor


class Probe(Actor[object]):
    """Records what it sees of its own identity and lifecycle."""

    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self.journal = journal

    async def on_start(self) -> None:
        self.journal.add(f"on_start {self.name} #{self.incarnation} ref={self.ref.name}")

    async def handle(self, message: object) -> object:
        self.journal.add(f"handle {message}")
        if message == "stop-self":
            self.stop()
        return None

    async def on_stop(self) -> None:
        self.journal.add("on_stop")


async def test_lifecycle_hooks_run_in_order() -> None:
    journal = Journal()
    async with open_supervisor() as sup:
        ref = await sup.start_child(Probe, journal, name="p", restart=Restart.TRANSIENT)
        assert journal.events == ["on_start p #1 ref=p"]  # start_child waited for on_start
        ref.try_tell("hello")
        ref.try_tell("stop-self")
        ref.try_tell("never")
        await ref.wait_stopped()
    assert journal.events == ["on_start p #1 ref=p", "handle hello", "handle stop-self", "on_stop"]
    assert sup.dead_letters.count == 1


async def test_on_stop_runs_after_a_crash_too() -> None:
    journal = Journal()
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, 0, journal, name="c", restart=Restart.TEMPORARY)
        await ref.tell(Boom())
        await ref.wait_stopped()
    assert journal.events == ["start c#1", "stop c#1"]


async def test_actor_outside_a_supervisor_has_no_ref() -> None:
    with pytest.raises(RuntimeError, match="is not running"):
        _ = Counter().ref


class Helpers(Actor[str]):
    """Runs a helper task in its nursery; the helper fails on demand."""

    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self.journal = journal
        self.fail = trio.Event()

    async def on_start(self) -> None:
        self.nursery.start_soon(self._helper)

    async def _helper(self) -> None:
        try:
            await self.fail.wait()
        except trio.Cancelled:
            self.journal.add("helper cancelled")
            raise
        raise RuntimeError("helper failed")

    async def handle(self, message: str) -> object:
        if message == "fail":
            self.fail.set()
        return None


async def test_helper_tasks_are_cancelled_when_the_actor_stops() -> None:
    journal = Journal()
    async with open_supervisor() as sup:
        ref = await sup.start_child(Helpers, journal, name="h", restart=Restart.TRANSIENT)
        ref.stop()
        await ref.wait_stopped()
    assert journal.events == ["helper cancelled"]


async def test_helper_task_exception_crashes_the_actor() -> None:
    journal = Journal()
    async with open_supervisor() as sup:
        ref = await sup.start_child(Helpers, journal, name="h", restart=Restart.TRANSIENT)
        await ref.tell("fail")
        await ref.wait_stopped()
        await trio.testing.wait_all_tasks_blocked()
        assert sup.statistics().crashed == 1
        new = sup.lookup("h")
        assert new is not None and new.incarnation == 2


class SlowStop(Actor[object]):
    async def handle(self, message: object) -> object:
        return None

    async def on_stop(self) -> None:
        await trio.sleep_forever()


async def test_on_stop_is_shielded_but_cut_off_at_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_supervisor(shutdown_timeout=1.0) as sup:
        ref = await sup.start_child(SlowStop, name="s", restart=Restart.TRANSIENT)
        start = trio.current_time()
        ref.stop()
        await ref.wait_stopped()
        assert trio.current_time() - start == pytest.approx(DEFAULT_STOP_TIMEOUT)


class FailingStop(Actor[object]):
    async def handle(self, message: object) -> object:
        return None

    async def on_stop(self) -> None:
        raise OSError("cannot release")


async def test_on_stop_failure_after_a_normal_stop_is_a_crash() -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(FailingStop, name="f", restart=Restart.TRANSIENT)
        ref.stop()
        await ref.wait_stopped()
        await trio.testing.wait_all_tasks_blocked()
        assert sup.statistics().crashed == 1
        assert sup.lookup("f") is not None  # transient: restarted after the crash


class Unimplemented(Actor[object]):
    pass


async def test_handle_must_be_overridden() -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(Unimplemented, name="u")
        with pytest.raises(NotImplementedError):
            await ref.ask("anything")


class Spinner(Actor[float]):
    """Spins synchronously, then awaits: a cancel can only land at that await."""

    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self.journal = journal

    async def handle(self, message: float) -> object:
        end = time.monotonic() + message
        while time.monotonic() < end:
            pass
        self.journal.add("spun")
        await trio.lowlevel.checkpoint()
        self.journal.add("after await")
        return None


async def test_actor_cancelled_in_a_long_synchronous_stretch_stops_at_its_next_await() -> None:
    journal = Journal()
    async with open_supervisor() as sup:
        ref = await sup.start_child(Spinner, journal, name="s", restart=Restart.TEMPORARY)
        ref.try_tell(0.05)
        # Hard-cancel (what a shutdown does once the graceful deadline has passed) before the
        # actor has even started its handler; trio can only deliver it at the handler's await.
        ref._incarnation.cancel()
        await ref.wait_stopped()
    assert journal.events == ["spun"]


async def test_message_handed_over_just_before_a_stop_is_not_handled() -> None:
    journal = Journal()
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, 0, journal, name="c", restart=Restart.TEMPORARY)
        ref.try_tell(Inc())  # handed straight to the idle actor, which has not run yet
        ref.stop()
        await ref.wait_stopped()
    assert journal.handled == []
    assert [letter.message for letter in sup.dead_letters.recent()] == [Inc()]


class _StepCounter(trio.abc.Instrument):
    """Numbers trio task steps: a step is everything a task does between two yields."""

    def __init__(self) -> None:
        self.step = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.step += 1


@pytest.mark.parametrize(("throughput", "expected"), [(1, [1] * 7), (3, [3, 3, 1]), (10, [7])])
async def test_throughput_bounds_how_many_messages_run_before_yielding(
    throughput: int, expected: list[int]
) -> None:
    counter = _StepCounter()
    steps: list[int] = []

    class Recorder(Actor[int]):
        async def handle(self, message: int) -> object:
            steps.append(counter.step)
            return None

    async with open_supervisor() as sup:
        ref = await sup.start_child(Recorder, name="r", throughput=throughput, mailbox_size=10)
        trio.lowlevel.add_instrument(counter)
        try:
            for n in range(6):
                ref.try_tell(n)
            await ref.ask(-1)  # the actor runs only now, with 7 messages queued
        finally:
            trio.lowlevel.remove_instrument(counter)
    assert [steps.count(step) for step in sorted(set(steps))] == expected
