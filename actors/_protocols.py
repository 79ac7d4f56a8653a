"""What an actor and its reference see of their incarnation, as protocols, so that
``_actor`` and ``_ref`` annotate with these instead of importing ``_incarnation`` (which
imports them), and a nested supervisor's incarnation (``_child``) annotates its
`Supervisor` with `NestedSupervisor`: no two modules of ``actors`` import each other, not
even for annotations."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    import trio

    from ._mailbox import Mailbox

__all__ = ["ActorCell", "NestedSupervisor", "RefCell"]

MessageT = TypeVar("MessageT")


class RefCell(Protocol):
    """What an `ActorRef` uses of its incarnation: its names, mailbox and stop."""

    @property
    def name(self) -> str: ...

    @property
    def number(self) -> int: ...

    @property
    def mailbox(self) -> Mailbox[Any]: ...

    @property
    def control_types(self) -> tuple[type, ...]: ...

    @property
    def stopped(self) -> trio.Event: ...

    def request_stop(self) -> None: ...


class ActorCell(RefCell, Protocol):
    """What an `Actor` uses of its incarnation, besides what its reference uses (the actor's
    own `ref` is reached through ``_actor``, which knows `ActorRef`)."""

    @property
    def placement(self) -> object: ...

    @property
    def nursery(self) -> trio.Nursery | None: ...

    async def save_checkpoint(self) -> bool: ...


class NestedSupervisor(Protocol):
    """What the incarnation of a nested supervisor uses of it (a `Supervisor`)."""

    @property
    def name(self) -> str: ...

    def _running(self) -> AbstractAsyncContextManager[None]: ...
