"""Small actors and messages shared by the tests of :mod:`actors`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar

import trio

from actors import Actor


@dataclass(frozen=True)
class Inc:
    by: int = 1


@dataclass(frozen=True)
class Get:
    pass


@dataclass(frozen=True)
class Boom:
    text: str = "boom"


@dataclass(frozen=True)
class Block:
    """Handler waits on the event (forever if None)."""

    until: trio.Event | None = None


@dataclass(frozen=True)
class Cancel:
    pass


@dataclass(frozen=True)
class Spin:
    """Handler runs synchronously for a while without any await."""

    seconds: float


Msg = Inc | Get | Boom | Block | Cancel | Spin


@dataclass
class Journal:
    """What actors did, shared with the test that started them."""

    events: list[str] = field(default_factory=list)
    handled: list[object] = field(default_factory=list)
    _added: trio.Event = field(default_factory=trio.Event, repr=False, compare=False)

    def add(self, text: str) -> None:
        self.events.append(text)
        self._added.set()
        self._added = trio.Event()

    async def wait_for(self, text: str) -> None:
        """Return once an actor has added ``text`` (at once if one has already)."""
        while text not in self.events:
            await self._added.wait()


class Counter(Actor[Msg]):
    """Counts; crashes on Boom; blocks on Block; Cancel is a control message."""

    control_messages: ClassVar[tuple[type, ...]] = (Cancel,)

    def __init__(self, start: int = 0, journal: Journal | None = None) -> None:
        super().__init__()
        self.n = start
        self.journal = journal if journal is not None else Journal()

    async def on_start(self) -> None:
        self.journal.add(f"start {self.name}#{self.incarnation}")

    async def handle(self, message: Msg) -> object:
        self.journal.handled.append(message)
        if isinstance(message, Inc):
            self.n += message.by
        elif isinstance(message, Boom):
            raise ValueError(message.text)
        elif isinstance(message, Block):
            if message.until is None:
                await trio.sleep_forever()
            else:
                await message.until.wait()
        elif isinstance(message, Cancel):
            self.journal.add(f"cancel {self.name}")
        elif isinstance(message, Spin):
            end = time.monotonic() + message.seconds
            while time.monotonic() < end:
                pass
        return self.n

    async def on_stop(self) -> None:
        self.journal.add(f"stop {self.name}#{self.incarnation}")

    def snapshot(self) -> object | None:
        return self.n

    def restore(self, snapshot: object) -> None:
        if isinstance(snapshot, int):
            self.n = snapshot
