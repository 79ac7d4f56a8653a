"""Message conservation: every message a mailbox accepted is handled or becomes a dead letter."""

from __future__ import annotations

import random
from dataclasses import dataclass

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from actors import (
    Actor,
    ActorStopped,
    DeadLetters,
    MailboxFull,
    RestartIntensity,
    Supervisor,
    open_supervisor,
)


@dataclass(frozen=True)
class Item:
    id: int
    crash: bool = False


class Recorder(Actor[Item]):
    def __init__(self, handled: list[int]) -> None:
        super().__init__()
        self.handled = handled

    async def handle(self, message: Item) -> object:
        self.handled.append(message.id)
        if message.id % 3 == 0:
            await trio.lowlevel.checkpoint()
        if message.crash:
            raise RuntimeError(f"crash on {message.id}")
        return message.id


@dataclass
class _Ledger:
    told: set[int]
    asked_ok: set[int]
    asked_stopped: set[int]


async def _run_plan(sup: Supervisor, plan: list[str], first_id: int, ledger: _Ledger) -> None:
    for offset, action in enumerate(plan):
        message_id = first_id + offset
        ref = sup.lookup("r")
        if action == "yield" or ref is None:
            await trio.lowlevel.checkpoint()  # the plan's step: let the other plans run
            continue
        if action == "stop":
            ref.stop()
            continue
        item = Item(message_id, crash=action == "boom")
        try:
            if action == "try_tell":
                ref.try_tell(item)
            elif action == "ask":
                assert await ref.ask(item, timeout=None) == message_id
                ledger.asked_ok.add(message_id)
                continue
            else:
                await ref.tell(item)
        except MailboxFull:
            continue
        except ActorStopped:
            if action == "ask":
                ledger.asked_stopped.add(message_id)
            continue
        ledger.told.add(message_id)


def _check(handled: list[int], dead: DeadLetters, ledger: _Ledger) -> None:
    dead_ids = [letter.message.id for letter in dead.recent()]  # type: ignore[attr-defined]
    assert len(handled) == len(set(handled)), "a message was handled twice"
    assert not set(handled) & set(dead_ids), "a message was both handled and dead"
    assert dead.count == len(dead_ids)
    assert ledger.told <= set(handled) | set(dead_ids), "an accepted message vanished"
    assert ledger.asked_ok <= set(handled)
    # An ask that failed was refused, dead-lettered, or in flight when its incarnation ended.
    accounted = set(handled) | set(dead_ids)
    assert set(handled) | set(dead_ids) <= ledger.told | ledger.asked_ok | ledger.asked_stopped
    assert accounted >= ledger.asked_ok


ACTIONS = ["tell", "try_tell", "ask", "boom", "stop", "yield"]


@settings(max_examples=60, deadline=None)
@given(
    mailbox_size=st.integers(0, 4),
    throughput=st.integers(1, 4),
    plans=st.lists(
        st.lists(st.sampled_from(ACTIONS), max_size=40),
        min_size=1,
        max_size=4,
    ),
)
async def test_every_accepted_message_is_handled_or_a_dead_letter(
    mailbox_size: int, throughput: int, plans: list[list[str]]
) -> None:
    handled: list[int] = []
    dead = DeadLetters(history=100_000)
    ledger = _Ledger(set(), set(), set())
    intensity = RestartIntensity(max_restarts=10_000, within=1.0)
    async with open_supervisor(intensity=intensity, dead_letters=dead) as sup:
        await sup.start_child(
            Recorder, handled, name="r", mailbox_size=mailbox_size, throughput=throughput
        )
        async with trio.open_nursery() as nursery:
            for n, plan in enumerate(plans):
                nursery.start_soon(_run_plan, sup, plan, n * 1000, ledger)
    _check(handled, dead, ledger)


async def test_conservation_under_load() -> None:
    rng = random.Random(1234)
    handled: list[int] = []
    dead = DeadLetters(history=100_000)
    ledger = _Ledger(set(), set(), set())
    actions = ["tell"] * 20 + ["try_tell"] * 5 + ["ask"] * 5 + ["boom", "stop", "yield"]
    plans = [[rng.choice(actions) for _ in range(1000)] for _ in range(8)]
    intensity = RestartIntensity(max_restarts=10_000, within=1.0)
    async with open_supervisor(intensity=intensity, dead_letters=dead) as sup:
        await sup.start_child(Recorder, handled, name="r", mailbox_size=16)
        async with trio.open_nursery() as nursery:
            for n, plan in enumerate(plans):
                nursery.start_soon(_run_plan, sup, plan, n * 10_000, ledger)
    _check(handled, dead, ledger)
    assert len(ledger.told) > 4000 and dead.count > 0
