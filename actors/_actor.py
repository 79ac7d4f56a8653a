"""`Actor`, the base class of everything a supervisor runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    import trio

    from ._protocols import ActorCell
    from ._ref import ActorRef

__all__ = ["Actor"]

MessageT = TypeVar("MessageT")

if TYPE_CHECKING:
    class _Cell(ActorCell, Protocol[MessageT]):
        """The actor's incarnation, as the actor sees it (an `Incarnation`)."""

        @property
        def ref(self) -> ActorRef[MessageT]: ...


class Actor(Generic[MessageT]):
    """Base class for actors: state plus a ``handle`` coroutine that sees one message at a time.

    Subclass it, parametrised by the type of messages it accepts, and override `handle`. A
    supervisor builds a fresh instance for each incarnation (with the factory and arguments given
    to `Supervisor.start_child`), calls `restore` if a checkpoint exists, runs `on_start`, then
    feeds `handle` one message at a time until the incarnation stops, and finally runs
    `on_stop`. Because messages are handled one at a time, the actor's state needs no locks;
    work that must go on in parallel (reading a subprocess's output, a timer) goes into
    `nursery`, whose tasks live as long as the incarnation and whose exceptions crash it.

    Example::

        class Counter(Actor[Inc | Get | Cancel]):
            control_messages = (Cancel,)

            def __init__(self, start: int) -> None:
                super().__init__()
                self.n = start

            async def handle(self, message: Inc | Get | Cancel) -> object:
                if isinstance(message, Inc):
                    self.n += 1
                return self.n

    Attributes:
        control_messages: Message types that travel in the control lane: they overtake queued
            user messages and are never refused for lack of room. Keep them few and cheap
            (cancel requests, status probes); `docs/actors.md` says why.
    """

    control_messages: ClassVar[tuple[type, ...]] = ()

    def __init__(self) -> None:
        self._incarnation: _Cell[MessageT] | None = None

    def _cell(self) -> _Cell[MessageT]:
        cell: _Cell[MessageT] | None = getattr(self, "_incarnation", None)
        if cell is None:
            raise RuntimeError(
                f"{type(self).__name__} is not running: start it with Supervisor.start_child"
            )
        return cell

    @property
    def ref(self) -> ActorRef[MessageT]:
        """The reference to this incarnation (what `Supervisor.start_child` returned)."""
        return self._cell().ref

    @property
    def name(self) -> str:
        """The actor's name within its supervisor."""
        return self._cell().name

    @property
    def incarnation(self) -> int:
        """This incarnation's number: 1 for the first start, +1 per restart or relocation."""
        return self._cell().number

    @property
    def placement(self) -> object:
        """Where the supervisor placed this incarnation: the opaque value given to
        `Supervisor.start_child` or `Supervisor.relocate` (``None`` by default)."""
        return self._cell().placement

    @property
    def nursery(self) -> trio.Nursery:
        """A nursery that lives as long as this incarnation, for helper tasks.

        It is open from before `on_start` until the incarnation stops; its tasks are cancelled
        then. An exception in one of them crashes the incarnation.
        """
        nursery = self._cell().nursery
        if nursery is None:
            raise RuntimeError("the actor's nursery is not open yet")
        return nursery

    def stop(self) -> None:
        """Stop this incarnation normally once the current handler returns.

        Synchronous and idempotent, like `ActorRef.stop`, which it is.
        """
        self._cell().request_stop()

    async def checkpoint(self) -> bool:
        """Save `snapshot` to the supervisor's checkpoint store now.

        The next incarnation (after a restart or `Supervisor.relocate`) starts from the latest
        saved snapshot. Call it where the state is consistent, typically at the end of a
        handler.

        Returns:
            Whether a snapshot was saved: ``False`` if the supervisor has no checkpoint store
            or `snapshot` returned ``None``.
        """
        return await self._cell().save_checkpoint()

    async def on_start(self) -> None:
        """Called once per incarnation before the first message; override to acquire things.

        `ref`, `nursery` and `placement` are available. Until it returns,
        `Supervisor.start_child` does not. An exception here is a crash.
        """

    async def handle(self, message: MessageT) -> object:
        """Handle one message; override this.

        Returns:
            The reply to an `ActorRef.ask`; ignored for a `ActorRef.tell`.

        Raises:
            Exception: For a ``tell``, any exception crashes the incarnation. For an ``ask``,
                it is raised to the asker instead and the actor carries on.
        """
        raise NotImplementedError(f"{type(self).__name__} must override handle()")

    async def on_stop(self) -> None:
        """Called once when the incarnation ends, normally or by a crash; override to release.

        Best effort: it runs shielded from cancellation but under a deadline
        (`DEFAULT_STOP_TIMEOUT` seconds), after the mailbox is closed and helper tasks are
        cancelled. It is skipped if `on_start` was never entered.
        """

    def snapshot(self) -> object | None:
        """Return the state to checkpoint, or ``None`` to save nothing (the default)."""
        return None

    def restore(self, snapshot: object) -> None:
        """Load state from ``snapshot`` (from an earlier `snapshot`); called before `on_start`.

        The default ignores it. Override together with `snapshot`.
        """
