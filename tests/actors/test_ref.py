from __future__ import annotations

import pytest
import trio
import trio.testing
from actorkit import Block, Boom, Cancel, Counter, Get, Inc, Journal

from actors import (
    ActorStopped,
    AskTimeout,
    DeadLetterReason,
    MailboxFull,
    Restart,
    open_supervisor,
)


async def test_tell_then_ask_sees_the_effect() -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, 5, name="c")
        await ref.tell(Inc())
        ref.try_tell(Inc(2))
        assert await ref.ask(Get()) == 8
        assert ref.name == "c" and ref.incarnation == 1
        assert repr(ref) == "<ActorRef 'c' incarnation=1 running>"


async def test_tell_waits_for_room_and_try_tell_raises_mailbox_full() -> None:
    release = trio.Event()
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, name="c", mailbox_size=2)
        await ref.tell(Block(release))
        await trio.testing.wait_all_tasks_blocked()  # the handler is now busy
        ref.try_tell(Inc())
        ref.try_tell(Inc())
        with pytest.raises(MailboxFull):
            ref.try_tell(Inc())
        sent = trio.Event()

        async def send_third() -> None:
            await ref.tell(Inc())
            sent.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_third)
            await trio.testing.wait_all_tasks_blocked()
            assert not sent.is_set()
            assert ref.statistics().senders_waiting == 1
            release.set()
        assert await ref.ask(Get()) == 3


async def test_control_message_overtakes_a_full_mailbox(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = Journal()
    release = trio.Event()
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, 0, journal, name="c", mailbox_size=1)
        await ref.tell(Block(release))
        await trio.testing.wait_all_tasks_blocked()
        ref.try_tell(Inc())
        with trio.fail_after(1):
            await ref.tell(Cancel())  # never waits, even though the user lane is full
        assert ref.statistics().control_queued == 1
        release.set()
        await ref.ask(Get())
    assert journal.handled[:3] == [Block(release), Cancel(), Inc()]


async def test_ask_times_out(autojump_clock: trio.testing.MockClock) -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, name="c")
        await ref.tell(Block())
        start = trio.current_time()
        with pytest.raises(AskTimeout, match="did not answer Get within 2.5 s"):
            await ref.ask(Get(), timeout=2.5)
        assert trio.current_time() - start == pytest.approx(2.5)


async def test_ask_timeout_covers_waiting_for_room(autojump_clock: trio.testing.MockClock) -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, name="c", mailbox_size=0)
        await ref.tell(Block())
        with pytest.raises(AskTimeout):
            await ref.ask(Get(), timeout=1.0)
        assert ref.statistics().senders_waiting == 0


async def test_handler_exception_on_ask_fails_the_caller_and_the_actor_carries_on() -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, 1, name="c")
        with pytest.raises(ValueError, match="bad question"):
            await ref.ask(Boom("bad question"))
        assert await ref.ask(Get()) == 1
        assert sup.lookup("c") is ref


async def test_ask_queued_behind_a_crash_fails_with_actor_stopped() -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, name="c", restart=Restart.TEMPORARY)
        release = trio.Event()
        await ref.tell(Block(release))
        await ref.tell(Boom("crash"))
        results: list[BaseException] = []

        async def asker() -> None:
            try:
                await ref.ask(Get(), timeout=None)
            except ActorStopped as exc:
                results.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(asker)
            await trio.testing.wait_all_tasks_blocked()
            release.set()
        [stopped] = results
        assert isinstance(stopped.__cause__, ValueError)
        assert str(stopped.__cause__) == "crash"
        [letter] = sup.dead_letters.recent()
        assert (letter.recipient, letter.message, letter.reason) == (
            "c",
            Get(),
            DeadLetterReason.CRASHED,
        )


async def test_ask_in_flight_fails_when_a_helper_task_crashes_the_actor() -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, name="c", restart=Restart.TEMPORARY)
        await ref.tell(Inc())
        await trio.testing.wait_all_tasks_blocked()

        async def explode() -> None:
            raise KeyError("helper")

        failures: list[BaseException] = []

        async def ask_blocked() -> None:
            try:
                await ref.ask(Block(), timeout=None)
            except ActorStopped as exc:
                failures.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask_blocked)
            await trio.testing.wait_all_tasks_blocked()
            actor = ref._incarnation.actor  # reach the actor's own nursery from outside
            actor.nursery.start_soon(explode)
        [stopped] = failures
        assert isinstance(stopped.__cause__, KeyError)


async def test_unanswerable_abandoned_ask_crashes_the_actor(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, name="c", restart=Restart.TEMPORARY)
        release = trio.Event()
        await ref.tell(Block(release))
        with pytest.raises(AskTimeout):
            await ref.ask(Boom("nobody listens"), timeout=1)
        release.set()
        await ref.wait_stopped()
        await trio.testing.wait_all_tasks_blocked()
        assert sup.statistics().crashed == 1


async def test_stopped_ref_refuses_everything() -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, name="c", restart=Restart.TRANSIENT)
        ref.stop()
        await ref.wait_stopped()
        assert ref.stopped
        with pytest.raises(ActorStopped):
            await ref.tell(Inc())
        with pytest.raises(ActorStopped):
            ref.try_tell(Inc())
        with pytest.raises(ActorStopped):
            await ref.tell(Cancel())
        with pytest.raises(ActorStopped) as info:
            await ref.ask(Get())
        assert info.value.__cause__ is None
        ref.stop()  # idempotent, also once stopped
        await ref.wait_stopped()


async def test_stop_is_idempotent_and_no_handler_runs_after_it() -> None:
    journal = Journal()
    release = trio.Event()
    async with open_supervisor() as sup:
        ref = await sup.start_child(
            Counter, 0, journal, name="c", restart=Restart.TRANSIENT, mailbox_size=10
        )
        await ref.tell(Block(release))
        for _ in range(5):
            await ref.tell(Inc())
        await trio.testing.wait_all_tasks_blocked()
        ref.stop()
        ref.stop()
        release.set()
        await ref.wait_stopped()
        assert journal.handled == [Block(release)]
        assert sup.dead_letters.count == 5
        assert {letter.reason for letter in sup.dead_letters.recent()} == {DeadLetterReason.STOPPED}


async def test_stop_reaches_an_actor_whose_user_mailbox_is_full() -> None:
    release = trio.Event()
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, name="c", restart=Restart.TRANSIENT, mailbox_size=1)
        await ref.tell(Block(release))
        await trio.testing.wait_all_tasks_blocked()
        ref.try_tell(Inc())
        blocked_senders_failed: list[BaseException] = []

        async def sender() -> None:
            try:
                await ref.tell(Inc())
            except ActorStopped as exc:
                blocked_senders_failed.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sender)
            await trio.testing.wait_all_tasks_blocked()
            ref.stop()
            release.set()
            await ref.wait_stopped()
        assert len(blocked_senders_failed) == 1
        assert sup.lookup("c") is None


async def test_ask_without_timeout_still_ends_when_the_actor_stops(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, name="c", restart=Restart.TRANSIENT)
        await ref.tell(Block())
        async with trio.open_nursery() as nursery:

            async def stopper() -> None:
                await trio.testing.wait_all_tasks_blocked()
                sup_ref = sup.lookup("c")
                assert sup_ref is not None
                await sup.stop_child("c")

            nursery.start_soon(stopper)
            with pytest.raises(ActorStopped):
                await ref.ask(Get(), timeout=None)
