from __future__ import annotations

import pytest
import trio
import trio.testing
from actorkit import Boom, Counter, Get, Inc, Journal

from actors import Actor, InMemoryCheckpointStore, open_supervisor


async def test_in_memory_store_keeps_the_latest_snapshot_per_name() -> None:
    store = InMemoryCheckpointStore()
    assert await store.load("a") is None
    await store.save("a", 1)
    await store.save("b", 2)
    await store.save("a", 3)
    assert (await store.load("a"), await store.load("b")) == (3, 2)
    assert store.names() == ["a", "b"]


class Saver(Counter):
    """Checkpoints after every Inc."""

    async def handle(self, message: object) -> object:
        reply = await super().handle(message)  # type: ignore[arg-type]
        if isinstance(message, Inc):
            assert await self.checkpoint()
        return reply


async def test_restart_starts_from_the_latest_checkpoint() -> None:
    store = InMemoryCheckpointStore()
    async with open_supervisor(checkpoints=store) as sup:
        ref = await sup.start_child(Saver, 0, name="c")
        await ref.tell(Inc(5))
        await ref.tell(Inc(2))
        await ref.tell(Boom())
        await ref.wait_stopped()
        await trio.testing.wait_all_tasks_blocked()
        new = sup.lookup("c")
        assert new is not None and new.incarnation == 2
        assert await new.ask(Get()) == 7


async def test_without_a_store_checkpoint_saves_nothing_and_restarts_are_fresh() -> None:
    async with open_supervisor() as sup:
        ref = await sup.start_child(Counter, 0, name="c")
        await ref.tell(Inc(5))
        await ref.tell(Boom())
        await ref.wait_stopped()
        await trio.testing.wait_all_tasks_blocked()
        new = sup.lookup("c")
        assert new is not None and await new.ask(Get()) == 0


class Placed(Actor[str]):
    """Reports where it runs; keeps a count it snapshots."""

    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self.journal = journal
        self.count = 0

    async def on_start(self) -> None:
        self.journal.add(f"start on {self.placement} with {self.count}")

    async def handle(self, message: str) -> object:
        self.count += 1
        return self.placement

    def snapshot(self) -> object | None:
        return self.count

    def restore(self, snapshot: object) -> None:
        assert isinstance(snapshot, int)
        self.count = snapshot


async def test_relocate_moves_the_actor_with_its_state() -> None:
    journal = Journal()
    store = InMemoryCheckpointStore()
    async with open_supervisor(checkpoints=store) as sup:
        ref = await sup.start_child(Placed, journal, name="p", placement="gpu-0")
        assert await ref.ask("where") == "gpu-0"
        await ref.ask("x")
        moved = await sup.relocate("p", "gpu-1")
        assert ref.stopped and moved is not ref and moved.incarnation == 2
        assert sup.lookup("p") is moved
        assert await moved.ask("where") == "gpu-1"
        assert journal.events == ["start on gpu-0 with 0", "start on gpu-1 with 2"]
        stats = sup.statistics()
        assert (stats.relocated, stats.restarted) == (1, 0)
        with pytest.raises(LookupError):
            await sup.relocate("nobody", "gpu-2")


async def test_relocated_actor_restarts_on_its_new_placement() -> None:
    journal = Journal()
    async with open_supervisor(checkpoints=InMemoryCheckpointStore()) as sup:
        await sup.start_child(Placed, journal, name="p", placement="a")
        moved = await sup.relocate("p", "b")
        moved._incarnation.cancel()  # an external kill: not a graceful stop
        await moved.wait_stopped()
        await trio.testing.wait_all_tasks_blocked()
        again = sup.lookup("p")
        assert again is not None and await again.ask("where") == "b"
