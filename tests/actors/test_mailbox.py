from __future__ import annotations

import pytest
import trio
import trio.testing

from actors import ActorStopped, MailboxFull
from actors._mailbox import Mailbox


def _closed() -> ActorStopped:
    return ActorStopped("closed")


def test_negative_capacity_is_refused() -> None:
    with pytest.raises(ValueError, match="capacity must be >= 0"):
        Mailbox[int](-1, closed_error=_closed)


async def test_control_items_overtake_user_items_and_each_lane_is_fifo() -> None:
    box = Mailbox[str](4, closed_error=_closed)
    box.send_nowait("u1")
    box.send_nowait("u2")
    box.send_control("c1")
    box.send_nowait("u3")
    box.send_control("c2")
    assert [await box.receive() for _ in range(5)] == ["c1", "c2", "u1", "u2", "u3"]


async def test_full_user_lane_raises_mailbox_full_but_control_lane_never_does() -> None:
    box = Mailbox[int](2, closed_error=_closed)
    box.send_nowait(1)
    box.send_nowait(2)
    with pytest.raises(MailboxFull):
        box.send_nowait(3)
    for n in range(100):
        box.send_control(n)
    assert box.statistics().control_queued == 100


async def test_waiting_senders_are_served_in_order() -> None:
    box = Mailbox[int](1, closed_error=_closed)
    box.send_nowait(0)
    async with trio.open_nursery() as nursery:
        for n in (1, 2, 3):
            nursery.start_soon(box.send, n)
            await trio.testing.wait_all_tasks_blocked()
        assert box.statistics().senders_waiting == 3
        assert [await box.receive() for _ in range(4)] == [0, 1, 2, 3]


async def test_capacity_zero_is_a_rendezvous() -> None:
    box = Mailbox[int](0, closed_error=_closed)
    with pytest.raises(MailboxFull):
        box.send_nowait(1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(box.send, 1)
        await trio.testing.wait_all_tasks_blocked()
        assert await box.receive() == 1
    received: list[int] = []

    async def receiver() -> None:
        received.append(await box.receive())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        await trio.testing.wait_all_tasks_blocked()
        box.send_nowait(2)  # handed straight to the waiting receiver
    assert received == [2]


async def test_cancelled_sender_takes_its_item_back(autojump_clock: trio.testing.MockClock) -> None:
    box = Mailbox[int](1, closed_error=_closed)
    box.send_nowait(0)
    with trio.move_on_after(0.01):
        await box.send(1)
    assert box.statistics().senders_waiting == 0
    assert box.receive_nowait() == 0
    with pytest.raises(trio.WouldBlock):
        box.receive_nowait()


async def test_close_returns_leftovers_and_fails_waiting_and_later_senders() -> None:
    box = Mailbox[str](1, closed_error=_closed)
    box.send_nowait("u1")
    box.send_control("c1")
    failures: list[BaseException] = []

    async def sender() -> None:
        try:
            await box.send("u2")
        except ActorStopped as exc:
            failures.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        assert box.close() == ["c1", "u1"]
    assert len(failures) == 1
    assert box.close() == []
    with pytest.raises(ActorStopped):
        box.send_nowait("u3")
    with pytest.raises(ActorStopped):
        box.send_control("c2")
    with pytest.raises(trio.ClosedResourceError):
        await box.receive()


async def test_close_wakes_a_waiting_receiver() -> None:
    box = Mailbox[int](1, closed_error=_closed)
    errors: list[BaseException] = []

    async def receiver() -> None:
        try:
            await box.receive()
        except trio.ClosedResourceError as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        await trio.testing.wait_all_tasks_blocked()
        box.close()
    assert len(errors) == 1


async def test_one_receiver_at_a_time() -> None:
    box = Mailbox[int](1, closed_error=_closed)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(box.receive)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(RuntimeError, match="already receiving"):
            await box.receive()
        box.send_nowait(1)


async def test_statistics_report_every_field() -> None:
    box = Mailbox[int](3, closed_error=_closed)
    box.send_nowait(1)
    box.send_nowait(2)
    box.receive_nowait()
    box.send_control(9)
    stats = box.statistics()
    assert (stats.capacity, stats.user_queued, stats.control_queued) == (3, 1, 1)
    assert (stats.peak_user_queued, stats.senders_waiting) == (2, 0)
    assert not stats.receiver_waiting and not stats.closed
