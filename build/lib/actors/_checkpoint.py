"""Where actor snapshots are kept between incarnations: `CheckpointStore` and the in-memory one."""

from __future__ import annotations

from typing import Protocol

import trio

__all__ = ["CheckpointStore", "InMemoryCheckpointStore"]


class CheckpointStore(Protocol):
    """Storage for the latest snapshot of each actor, keyed by the actor's name.

    A supervisor given ``checkpoints=`` loads an actor's snapshot before each incarnation's
    ``on_start`` (and passes it to ``Actor.restore``), and saves one whenever the actor calls
    ``Actor.checkpoint`` or is relocated. Implementations must keep only the latest snapshot per
    name; snapshots are opaque to the runtime (a durable store must be able to serialise them).
    Exceptions raised by an implementation crash the incarnation that called it.
    """

    async def save(self, name: str, snapshot: object) -> None:
        """Store ``snapshot`` as the latest for ``name``, replacing any earlier one."""
        ...

    async def load(self, name: str) -> object | None:
        """Return the latest snapshot for ``name``, or ``None`` if there is none."""
        ...


class InMemoryCheckpointStore:
    """A `CheckpointStore` in a dict: survives restarts and relocations, not the process.

    Snapshots are stored as given, not copied: return immutable values from
    ``Actor.snapshot``.
    """

    def __init__(self) -> None:
        self._snapshots: dict[str, object] = {}

    async def save(self, name: str, snapshot: object) -> None:
        """Store ``snapshot`` as the latest for ``name``."""
        await trio.lowlevel.checkpoint()
        self._snapshots[name] = snapshot

    async def load(self, name: str) -> object | None:
        """Return the latest snapshot for ``name``, or ``None``."""
        await trio.lowlevel.checkpoint()
        return self._snapshots.get(name)

    def names(self) -> list[str]:
        """Return the names that have a snapshot, in the order first saved."""
        return list(self._snapshots)
