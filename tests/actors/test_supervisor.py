from __future__ import annotations

import pytest
import trio
import trio.testing

from actors import (
    Actor,
    ActorStopped,
    Backoff,
    Restart,
    RestartIntensity,
    Strategy,
    SupervisorEscalation,
    open_supervisor,
)
from actorkit import Block, Boom, Counter, Get, Inc, Journal


class FailStart(Actor[object]):
    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self.journal = journal

    async def on_start(self) -> None:
        self.journal.add("on_start")
        raise ConnectionError("no backend")

    async def handle(self, message: object) -> object:
        return None

    async def on_stop(self) -> None:
        self.journal.add("on_stop")


async def test_start_child_returns_after_on_start_and_lists_children_in_order() -> None:
    journal = Journal()
    async with open_supervisor() as sup:
        await sup.start_child(Counter, 0, journal, name="a")
        await sup.start_child(Counter, 0, journal, name="b")
        auto = await sup.start_child(Counter, 0, journal)
        assert journal.events == ["start a#1", "start b#1", f"start {auto.name}#1"]
        assert sup.children() == ["a", "b", auto.name]
        assert auto.name.startswith("Counter-")


async def test_start_child_raises_what_on_start_raised_and_registers_nothing() -> None:
    journal = Journal()
    async with open_supervisor() as sup:
        with pytest.raises(ConnectionError, match="no backend"):
            await sup.start_child(FailStart, journal, name="f")
        assert sup.children() == []
        assert sup.lookup("f") is None
    assert journal.events == ["on_start", "on_stop"]


async def test_start_child_validates_its_options() -> None:
    async with open_supervisor() as sup:
        await sup.start_child(Counter, name="a")
        with pytest.raises(ValueError, match="already has a child named 'a'"):
            await sup.start_child(Counter, name="a")
        with pytest.raises(ValueError, match="throughput"):
            await sup.start_child(Counter, name="b", throughput=0)
        with pytest.raises(ValueError, match="mailbox_size"):
            await sup.start_child(Counter, name="b", mailbox_size=-1)
    with pytest.raises(ActorStopped, match="not running"):
        await sup.start_child(Counter, name="late")


async def test_supervisor_validates_shutdown_timeout() -> None:
    with pytest.raises(ValueError, match="shutdown_timeout"):
        async with open_supervisor(shutdown_timeout=-1):
            pass  # pragma: no cover


@pytest.mark.parametrize(
    ("restart", "crash", "restarted"),
    [
        (Restart.PERMANENT, True, True),
        (Restart.PERMANENT, False, True),
        (Restart.TRANSIENT, True, True),
        (Restart.TRANSIENT, False, False),
        (Restart.TEMPORARY, True, False),
        (Restart.TEMPORARY, False, False),
    ],
)
async def test_restart_types_follow_otp(restart: Restart, crash: bool, restarted: bool) -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, 7, name="c", restart=restart)
        if crash:
            await ref.tell(Boom())
        else:
            ref.stop()
        await ref.wait_stopped()
        await trio.testing.wait_all_tasks_blocked()
        new = sup.lookup("c")
        if restarted:
            assert new is not None and new is not ref and new.incarnation == 2
            assert await new.ask(Get()) == 7  # a fresh instance from the factory
            assert sup.children() == ["c"]
        else:
            assert new is None and sup.children() == []


async def test_lookup_resolves_to_the_new_incarnation_and_old_refs_are_dead() -> None:
    async with open_supervisor() as sup:
        old = await sup.start_child(Counter, name="c")
        await old.tell(Boom())
        await old.wait_stopped()
        await trio.testing.wait_all_tasks_blocked()
        new = sup.lookup("c")
        assert new is not None and new.incarnation == 2
        with pytest.raises(ActorStopped) as info:
            await old.ask(Get())
        assert isinstance(info.value.__cause__, ValueError)
        assert await new.ask(Get()) == 0


async def test_intensity_trips_and_escalates_instead_of_looping_forever(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = Journal()
    body_cancelled = False
    with pytest.raises(SupervisorEscalation, match="more than 2 restarts within 5.0 s") as info:
        async with open_supervisor(intensity=RestartIntensity(max_restarts=2, within=5.0)) as sup:
            await sup.start_child(Counter, 0, journal, name="steady")
            try:
                for _ in range(10):
                    ref = sup.lookup("c") or await sup.start_child(Counter, 0, journal, name="c")
                    await ref.tell(Boom())
                    await trio.sleep(1)
            except trio.Cancelled:
                body_cancelled = True
                raise
    assert body_cancelled
    assert isinstance(info.value.__cause__, ValueError)
    assert trio.current_time() == pytest.approx(2.0)  # third crash, at t=2: 3 restarts > 2
    # Everyone was stopped, in reverse start order, before the escalation left the block.
    assert journal.events[-2:] == ["stop c#3", "stop steady#1"]


async def test_intensity_window_slides(autojump_clock: trio.testing.MockClock) -> None:
    async with open_supervisor(intensity=RestartIntensity(max_restarts=1, within=1.0)) as sup:
        await sup.start_child(Counter, name="c")
        for _ in range(5):
            ref = sup.lookup("c")
            assert ref is not None
            await ref.tell(Boom())
            await trio.sleep(1.5)  # each crash is alone in its window
        assert sup.statistics().restarted == 5


async def test_shutdown_stops_children_in_reverse_order() -> None:
    journal = Journal()
    async with open_supervisor() as sup:
        for name in ("a", "b", "c"):
            await sup.start_child(Counter, 0, journal, name=name)
    assert journal.events[3:] == ["stop c#1", "stop b#1", "stop a#1"]


async def test_shutdown_cancels_a_child_that_does_not_stop_within_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = Journal()
    async with open_supervisor(shutdown_timeout=2.0) as sup:
        await sup.start_child(Counter, 0, journal, name="quick")
        stuck = await sup.start_child(Counter, 0, journal, name="stuck")
        await stuck.tell(Block())
        start = trio.current_time()
    assert trio.current_time() - start == pytest.approx(2.0)
    assert journal.events[-2:] == ["stop stuck#1", "stop quick#1"]


async def test_shutdown_on_an_exception_in_the_block_is_graceful_too() -> None:
    journal = Journal()
    with pytest.raises(KeyError):
        async with open_supervisor() as sup:
            await sup.start_child(Counter, 0, journal, name="a")
            raise KeyError("body failed")
    assert journal.events == ["start a#1", "stop a#1"]


async def test_shutdown_completes_within_its_deadline_during_a_failing_restart_loop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = Journal()
    intensity = RestartIntensity(max_restarts=1000, within=1.0)
    with trio.fail_after(3.0):
        async with open_supervisor(
            intensity=intensity, backoff=Backoff(initial=0.01, factor=1, jitter=0), shutdown_timeout=1.0
        ) as sup:
            await sup.start_child(FailStartLater, journal, name="loop")
            await sup.start_child(Counter, 0, Journal(), name="stuck")
            stuck = sup.lookup("stuck")
            assert stuck is not None
            await stuck.tell(Block())
            await trio.sleep(0.5)
            start = trio.current_time()
    assert trio.current_time() - start <= 1.0 + 0.01
    assert sup.statistics().restarted > 40


class FailStartLater(Actor[object]):
    """Starts fine the first time, then every restart fails in on_start."""

    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self.journal = journal

    async def on_start(self) -> None:
        if self.incarnation > 1:
            raise ConnectionError("still down")
        self.nursery.start_soon(self._die_soon)

    async def _die_soon(self) -> None:
        await trio.sleep(0.01)
        raise ConnectionError("lost")

    async def handle(self, message: object) -> object:
        return None


async def test_statistics_count_starts_restarts_and_crashes() -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, name="c")
        await sup.start_child(Counter, name="d", restart=Restart.TEMPORARY)
        await ref.tell(Boom())
        await ref.wait_stopped()
        await trio.testing.wait_all_tasks_blocked()
        stats = sup.statistics()
        assert (stats.children, stats.running, stats.started) == (2, 2, 3)
        assert (stats.restarted, stats.crashed, stats.escalations) == (1, 1, 0)


async def test_stop_child_removes_it_for_good() -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, name="c", restart=Restart.PERMANENT)
        await sup.stop_child("c")
        assert ref.stopped and sup.children() == [] and sup.lookup("c") is None
        with pytest.raises(LookupError):
            await sup.stop_child("c")
        again = await sup.start_child(Counter, name="c")  # the name is free again
        await again.tell(Inc())
