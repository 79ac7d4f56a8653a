from __future__ import annotations

import pytest
import trio
import trio.testing
from actorkit import Block, Boom, Counter, Get, Inc, Journal

from actors import (
    Actor,
    ActorStopped,
    Backoff,
    Restart,
    RestartIntensity,
    Strategy,
    Supervisor,
    SupervisorEscalation,
    open_supervisor,
)


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
                    await trio.sleep(1)  # not a wait: crashes 1 s apart (mock clock) are the case
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
            await trio.sleep(1.5)  # not a wait: each crash alone in its window (mock clock)
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
        await trio.testing.wait_all_tasks_blocked()  # stuck is inside its handler
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
        backoff = Backoff(initial=0.01, factor=1, jitter=0)
        async with open_supervisor(
            intensity=intensity, backoff=backoff, shutdown_timeout=1.0
        ) as sup:
            await sup.start_child(FailStartLater, journal, name="loop")
            await sup.start_child(Counter, 0, Journal(), name="stuck")
            stuck = sup.lookup("stuck")
            assert stuck is not None
            await stuck.tell(Block())
            await trio.sleep(0.5)  # not a wait: the restart loop runs 0.5 s (mock clock) first
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
        await trio.sleep(0.01)  # not a wait: the actor's own life, 10 ms (the test's mock clock)
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


async def restart_delay(sup: Supervisor, journal: Journal, name: str, incarnation: int) -> float:
    """Crash child ``name`` (a `Counter` on ``journal``); the seconds until its ``incarnation``
    has started."""
    ref = sup.lookup(name)
    assert ref is not None
    crashed_at = trio.current_time()
    await ref.tell(Boom())
    await trio.testing.wait_all_tasks_blocked()  # the crash is handled: the restart is due later
    assert sup.lookup(name) is None
    assert name in sup, "a child waiting for its restart is still a child"
    with trio.fail_after(60):
        await journal.wait_for(f"start {name}#{incarnation}")
    return trio.current_time() - crashed_at


async def _crash(ref_name: str, sup: object) -> None:
    from actors import Supervisor

    assert isinstance(sup, Supervisor)
    ref = sup.lookup(ref_name)
    assert ref is not None
    await ref.tell(Boom())
    await ref.wait_stopped()
    await trio.testing.wait_all_tasks_blocked()


async def test_one_for_all_cancels_busy_siblings_promptly_and_restarts_everyone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = Journal()
    async with open_supervisor(strategy=Strategy.ONE_FOR_ALL, shutdown_timeout=60) as sup:
        for name in ("a", "b", "c"):
            await sup.start_child(Counter, 0, journal, name=name)
        busy = sup.lookup("c")
        assert busy is not None
        await busy.tell(Block())  # would take forever to stop gracefully
        await trio.testing.wait_all_tasks_blocked()
        journal.events.clear()
        start = trio.current_time()
        await _crash("b", sup)
        assert trio.current_time() == start  # no graceful wait for the sibling in Block
        assert journal.events == [
            "stop b#1",
            "stop c#1",
            "stop a#1",
            "start a#2",
            "start b#2",
            "start c#2",
        ]
        assert [sup.lookup(n).incarnation for n in ("a", "b", "c")] == [2, 2, 2]  # type: ignore[union-attr]
        assert sup.statistics().restarted == 3


async def test_rest_for_one_restarts_exactly_the_later_children() -> None:
    journal = Journal()
    async with open_supervisor(strategy=Strategy.REST_FOR_ONE) as sup:
        for name in ("a", "b", "c", "d"):
            await sup.start_child(Counter, 0, journal, name=name)
        journal.events.clear()
        await _crash("b", sup)
        assert journal.events == [
            "stop b#1",
            "stop d#1",
            "stop c#1",
            "start b#2",
            "start c#2",
            "start d#2",
        ]
        incarnations = {n: sup.lookup(n).incarnation for n in sup.children()}  # type: ignore[union-attr]
        assert incarnations == {"a": 1, "b": 2, "c": 2, "d": 2}
        assert sup.children() == ["a", "b", "c", "d"]


async def test_group_restart_drops_temporary_siblings_and_ignores_normal_transient_exits() -> None:
    journal = Journal()
    async with open_supervisor(strategy=Strategy.ONE_FOR_ALL) as sup:
        await sup.start_child(Counter, 0, journal, name="perm")
        await sup.start_child(Counter, 0, journal, name="temp", restart=Restart.TEMPORARY)
        done = await sup.start_child(Counter, 0, journal, name="done", restart=Restart.TRANSIENT)
        done.stop()  # a normal transient exit restarts nobody
        await done.wait_stopped()
        await trio.testing.wait_all_tasks_blocked()
        assert sup.children() == ["perm", "temp"]
        assert sup.lookup("perm").incarnation == 1  # type: ignore[union-attr]
        await _crash("perm", sup)
        assert sup.children() == ["perm"]
        assert sup.lookup("perm").incarnation == 2  # type: ignore[union-attr]


async def test_backoff_delays_restarts_exponentially_and_resets_after_a_healthy_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = Journal()
    backoff = Backoff(initial=1.0, factor=2.0, cap=3.0, jitter=0.0, reset_after=10.0)
    restarted_after: list[float] = []
    async with open_supervisor(backoff=backoff, intensity=RestartIntensity(10, 60)) as sup:
        await sup.start_child(Counter, 0, journal, name="c")
        for incarnation in range(2, 6):
            restarted_after.append(await restart_delay(sup, journal, "c", incarnation))
        # Not a wait: healthy for reset_after (mock clock), the backoff starts over.
        await trio.sleep(10)
        restarted_after.append(await restart_delay(sup, journal, "c", 6))
    assert restarted_after == pytest.approx([1.0, 2.0, 3.0, 3.0, 1.0])


async def test_lookup_during_backoff_finds_nothing(autojump_clock: trio.testing.MockClock) -> None:
    journal = Journal()
    async with open_supervisor(backoff=Backoff(initial=5.0, jitter=0.0)) as sup:
        ref = await sup.start_child(Counter, 0, journal, name="c")
        await ref.tell(Boom())
        await trio.testing.wait_all_tasks_blocked()  # the crash is handled: 5 s of backoff
        assert sup.lookup("c") is None and sup.children() == ["c"]
        with trio.fail_after(60):
            await journal.wait_for("start c#2")
        assert trio.current_time() == pytest.approx(5.0), "not back before its backoff ended"
        assert sup.lookup("c") is not None


async def test_nested_supervisor_escalation_is_a_crash_its_parent_restarts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = Journal()
    async with open_supervisor(name="root") as root:
        await root.start_child(Counter, 0, journal, name="sibling")
        inner = await root.start_supervisor(
            name="inner", intensity=RestartIntensity(max_restarts=0, within=5.0)
        )
        assert root.children() == ["sibling", "inner"] and inner.name == "inner"
        await inner.start_child(Counter, 0, journal, name="w1")
        await inner.start_child(Counter, 0, journal, name="w2", restart=Restart.TEMPORARY)
        assert root.lookup("inner") is None  # supervisors are not actors
        journal.events.clear()
        await _crash("w1", inner)  # max_restarts=0: the first crash escalates
        await trio.testing.wait_all_tasks_blocked()
        assert journal.events == ["stop w1#1", "stop w2#1", "start w1#2"]
        stats = root.statistics()
        assert (stats.crashed, stats.restarted) == (1, 1)
        assert inner.children() == ["w1"]  # temporary children are not restarted
        w1 = inner.lookup("w1")
        assert w1 is not None and await w1.ask(Get()) == 0
        assert root.lookup("sibling").incarnation == 1  # type: ignore[union-attr]
    assert journal.events[-2:] == ["stop w1#2", "stop sibling#1"]


async def test_nested_supervisor_stop_is_graceful_and_in_order() -> None:
    journal = Journal()
    async with open_supervisor() as root:
        inner = await root.start_supervisor(name="inner")
        await inner.start_child(Counter, 0, journal, name="a")
        await inner.start_child(Counter, 0, journal, name="b")
        await root.stop_child("inner")
        assert journal.events == ["start a#1", "start b#1", "stop b#1", "stop a#1"]
        with pytest.raises(ActorStopped):
            await inner.start_child(Counter, name="late")


async def test_escalation_reaches_the_root_through_a_transient_free_chain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with pytest.raises(SupervisorEscalation, match="'root'") as info:
        async with open_supervisor(name="root", intensity=RestartIntensity(0, 5)) as root:
            inner = await root.start_supervisor(name="inner", intensity=RestartIntensity(0, 5))
            await inner.start_child(Counter, name="w")
            await _crash("w", inner)
            await trio.sleep_forever()
    assert isinstance(info.value.__cause__, SupervisorEscalation)
    assert isinstance(info.value.__cause__.__cause__, ValueError)


async def test_dead_letters_are_shared_with_nested_supervisors() -> None:
    async with open_supervisor() as root:
        inner = await root.start_supervisor(name="inner")
        assert inner.dead_letters is root.dead_letters


# -- a child's own restart intensity, backoff and give-up -------------------------------------


async def test_a_child_over_its_own_intensity_is_given_up_and_the_supervisor_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    given_up: list[tuple[str, BaseException | None, float]] = []
    gave_up = trio.Event()

    async def on_give_up(name: str, crash: BaseException | None) -> None:
        given_up.append((name, crash, trio.current_time()))
        gave_up.set()

    # The supervisor's own intensity allows no restart at all: the child's are not its own.
    async with open_supervisor(intensity=RestartIntensity(0, 5.0)) as sup:
        sibling = await sup.start_child(Counter, 0, Journal(), name="sibling")
        await sup.start_child(
            FailStartLater,
            Journal(),
            name="loop",
            intensity=RestartIntensity(max_restarts=2, within=60.0),
            backoff=Backoff(initial=0.1, cap=1.6, jitter=0.0),
            on_give_up=on_give_up,
        )
        with trio.fail_after(10):
            await gave_up.wait()
        # Crashes at t=0.01 (running), 0.11 and 0.31 (restarts that failed to start):
        # the third is more than 2 restarts within 60 s.
        assert [(n, type(c), round(t, 2)) for n, c, t in given_up] == [
            ("loop", ConnectionError, 0.31)
        ]
        assert "loop" not in sup and sup.children() == ["sibling"]
        stats = sup.statistics()
        assert (stats.given_up, stats.escalations, stats.restarted, stats.crashed) == (1, 0, 2, 3)
        assert await sibling.ask(Inc()) == 1, "the others go on"
        again = await sup.start_child(Counter, name="loop")  # its name is free again
        assert again.incarnation == 1


async def test_a_childs_own_backoff_doubles_from_min_to_max(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = Journal()
    restarted_after: list[float] = []
    async with open_supervisor() as sup:
        await sup.start_child(
            Counter,
            0,
            journal,
            name="c",
            intensity=RestartIntensity(max_restarts=10, within=60.0),
            backoff=Backoff(initial=0.1, cap=1.6, jitter=0.0),
        )
        for incarnation in range(2, 8):
            restarted_after.append(await restart_delay(sup, journal, "c", incarnation))
    assert restarted_after == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 1.6])


async def test_a_childs_own_intensity_is_checked() -> None:
    async def on_give_up(name: str, crash: BaseException | None) -> None:
        pass  # pragma: no cover

    async with open_supervisor(strategy=Strategy.ONE_FOR_ALL) as sup:
        with pytest.raises(ValueError, match="needs Strategy.ONE_FOR_ONE, not ONE_FOR_ALL"):
            await sup.start_child(Counter, name="c", intensity=RestartIntensity(1, 1.0))
    async with open_supervisor() as sup:
        with pytest.raises(ValueError, match="on_give_up needs an intensity"):
            await sup.start_child(Counter, name="c", on_give_up=on_give_up)
        assert "c" not in sup and 42 not in sup


async def test_an_error_in_on_give_up_is_the_supervisors_own(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def on_give_up(name: str, crash: BaseException | None) -> None:
        raise KeyError(name)

    with pytest.raises(KeyError, match="loop"):
        async with open_supervisor() as sup:
            await sup.start_child(
                FailStartLater,
                Journal(),
                name="loop",
                intensity=RestartIntensity(0, 5.0),
                on_give_up=on_give_up,
            )
            await trio.sleep_forever()
