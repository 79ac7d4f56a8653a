"""Group commit (alallo/store/_group_commit.py) without a database: batching, order, cancellation."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
import trio

from alallo.store._group_commit import GroupCommit

pytestmark = pytest.mark.unit


class _Gate:
    """A commit function that records its batches and can hold the first one in its thread."""

    def __init__(self, *, hold_first: bool) -> None:
        self.batches: list[list[str]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        if not hold_first:
            self.release.set()

    def commit(self, items: Sequence[str]) -> list[str]:
        self.batches.append(list(items))
        self.entered.set()
        self.release.wait()
        return [f"done {item}" for item in items]


async def test_writes_arriving_during_a_commit_go_together_in_the_next_one() -> None:
    gate = _Gate(hold_first=True)
    group: GroupCommit[str, str] = GroupCommit(gate.commit, trio.CapacityLimiter(1))
    answers: dict[str, str] = {}

    async def submit(item: str) -> None:
        answers[item] = await group.submit(item)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(submit, "a")
        await trio.to_thread.run_sync(gate.entered.wait)  # "a" is being committed
        for item in "bcd":
            nursery.start_soon(submit, item)
        await trio.testing.wait_all_tasks_blocked()
        gate.release.set()
    # Trio starts the tasks in an order of its own: the order of the calls is
    # test_store's concurrent-creations test.
    assert gate.batches[0] == ["a"] and sorted(gate.batches[1]) == ["b", "c", "d"]
    assert len(gate.batches) == 2
    assert answers == {item: f"done {item}" for item in "abcd"}


async def test_a_write_cancelled_before_its_batch_is_never_written() -> None:
    gate = _Gate(hold_first=True)
    group: GroupCommit[str, str] = GroupCommit(gate.commit, trio.CapacityLimiter(1))
    answers: dict[str, str] = {}
    cancelled = trio.CancelScope()

    async def submit(item: str) -> None:
        answers[item] = await group.submit(item)

    async def first_waiter() -> None:
        with cancelled:
            answers["b"] = await group.submit("b")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(submit, "a")
        await trio.to_thread.run_sync(gate.entered.wait)
        nursery.start_soon(first_waiter)  # waits behind "a", first in line for the next batch
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(submit, "c")
        await trio.testing.wait_all_tasks_blocked()
        cancelled.cancel()
        await trio.testing.wait_all_tasks_blocked()
        gate.release.set()
    assert gate.batches == [["a"], ["c"]], "b was never written; c led the next batch"
    assert answers == {"a": "done a", "c": "done c"}


async def test_a_leader_whose_caller_is_cancelled_still_answers_its_batch() -> None:
    gate = _Gate(hold_first=True)
    group: GroupCommit[str, str] = GroupCommit(gate.commit, trio.CapacityLimiter(1))
    answers: dict[str, str] = {}
    leader_scope = trio.CancelScope()

    async def leader() -> None:
        with leader_scope:
            answers["a"] = await group.submit("a")

    async def submit(item: str) -> None:
        answers[item] = await group.submit(item)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(leader)
        await trio.to_thread.run_sync(gate.entered.wait)
        nursery.start_soon(submit, "b")
        await trio.testing.wait_all_tasks_blocked()
        leader_scope.cancel()  # the batch of "a" is in its thread: it commits anyway
        gate.release.set()
    assert gate.batches == [["a"], ["b"]]
    assert answers["b"] == "done b"


async def test_a_failing_item_fails_alone() -> None:
    def commit(items: Sequence[str]) -> list[str]:
        if "bad" in items:
            raise ValueError("bad item")
        return [item.upper() for item in items]

    group: GroupCommit[str, str] = GroupCommit(commit, trio.CapacityLimiter(1))
    answers: dict[str, str | BaseException] = {}

    async def submit(item: str) -> None:
        try:
            answers[item] = await group.submit(item)
        except ValueError as exc:
            answers[item] = exc

    async with trio.open_nursery() as nursery:
        for item in ("x", "bad", "y"):
            nursery.start_soon(submit, item)
    assert answers["x"] == "X" and answers["y"] == "Y"
    assert isinstance(answers["bad"], ValueError)
