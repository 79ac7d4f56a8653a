"""The exceptions raised by :mod:`actors`, all rooted at :class:`ActorError`.

The tree::

    ActorError
    ├── MailboxFull            you sent faster than the actor reads (try_tell only)
    ├── ActorStopped           the incarnation you address is gone; a crash is its __cause__
    ├── AskTimeout             no reply came within the ask's timeout
    └── SupervisorEscalation   a supervisor exceeded its restart intensity and gave up

`MailboxFull` is "you did it": the caller chose not to wait. `ActorStopped` is "the world did
it": nothing the caller could have done differently, short of looking the name up again with
`Supervisor.lookup`. Exceptions raised by an actor's own `handle` while answering an `ask` reach
the asker unchanged; they are not wrapped in this hierarchy.
"""

from __future__ import annotations

__all__ = ["ActorError", "ActorStopped", "AskTimeout", "MailboxFull", "SupervisorEscalation"]


class ActorError(Exception):
    """Base class of every exception this package raises on its own account."""


class MailboxFull(ActorError):
    """`ActorRef.try_tell` found the actor's user mailbox full.

    Raised instead of waiting. Use ``await ref.tell(message)`` to wait for room instead, or
    send the message as a control message if it must overtake the queue.
    """


class ActorStopped(ActorError):
    """The addressed incarnation has stopped, or stopped before it could answer.

    Raised by `ActorRef.tell`, `ActorRef.try_tell` and `ActorRef.ask` when the incarnation behind
    the reference has stopped (normally or by crashing), including while the caller was waiting
    for room in the mailbox or for a reply. When the incarnation crashed, the crash exception is
    this exception's ``__cause__``. A restarted actor is a new incarnation with a new reference:
    get it with `Supervisor.lookup`.
    """


class AskTimeout(ActorError):
    """`ActorRef.ask` got no reply within its ``timeout``.

    The question stays in the mailbox and may still be handled later, as with OTP's
    ``gen_server:call``; its reply is then discarded.
    """


class SupervisorEscalation(ActorError):
    """A supervisor saw more restarts than its `RestartIntensity` allows and gave up.

    Before raising, the supervisor stopped all of its children in reverse start order. It is
    raised out of `open_supervisor`'s ``async with`` block for a root supervisor, and treated as
    the crash of a child by the parent of a nested one. The last crash that tripped the limit is
    the ``__cause__``.
    """
