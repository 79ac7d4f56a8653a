"""Messages that were accepted but never reached a handler: `DeadLetter` and `DeadLetters`."""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass

__all__ = ["DEFAULT_DEAD_LETTER_HISTORY", "DeadLetter", "DeadLetterReason", "DeadLetters"]

DEFAULT_DEAD_LETTER_HISTORY = 1000
"""How many recent dead letters a `DeadLetters` sink keeps for inspection."""


class DeadLetterReason(enum.Enum):
    """Why a message accepted by a mailbox was never handled."""

    STOPPED = "stopped"
    """The incarnation stopped normally with the message still queued."""
    CRASHED = "crashed"
    """The incarnation crashed (or was cancelled) with the message still queued."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One message that was queued for an actor but never handled.

    Questions (`ActorRef.ask`) that end here have also failed their caller with `ActorStopped`.
    """

    recipient: str
    """Name of the actor the message was for."""
    message: object
    """The message itself, as it was sent (for an ask, the question)."""
    reason: DeadLetterReason
    """Why it was not handled."""


class DeadLetters:
    """A sink for dead letters: a running count plus a bounded history of the latest ones.

    Every supervisor has one (`Supervisor.dead_letters`); nested supervisors share their
    parent's. When an incarnation ends, each message still in its mailbox is recorded here, so
    that "every message sent is handled or a dead letter" can be checked, and exported as a
    counter. Nothing is retried: a message for a stopped actor means something different to the
    next incarnation, and only the sender can tell whether to send it again.

    Args:
        history: How many of the latest dead letters `recent` keeps.

    Raises:
        ValueError: ``history`` is negative.
    """

    __slots__ = ("_count", "_recent")

    def __init__(self, *, history: int = DEFAULT_DEAD_LETTER_HISTORY) -> None:
        if history < 0:
            raise ValueError(f"history must be >= 0, got {history}")
        self._recent: deque[DeadLetter] = deque(maxlen=history)
        self._count = 0

    @property
    def count(self) -> int:
        """Dead letters recorded since this sink was created (never decreases)."""
        return self._count

    def recent(self) -> list[DeadLetter]:
        """Return the latest dead letters, oldest first, at most ``history`` of them."""
        return list(self._recent)

    def record(self, letter: DeadLetter) -> None:
        """Count ``letter`` and keep it in the history (dropping the oldest if full)."""
        self._count += 1
        self._recent.append(letter)
