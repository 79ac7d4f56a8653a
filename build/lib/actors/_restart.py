"""Restart policy: which children come back (`Restart`), which siblings go with them
(`Strategy`), how often before giving up (`RestartIntensity`) and how soon (`Backoff`).

The words and rules are OTP's (``supervisor(3)``); `docs/actors.md` spells them out.
"""

from __future__ import annotations

import enum
import math
import random
from collections import deque
from dataclasses import dataclass

__all__ = [
    "DEFAULT_BACKOFF",
    "DEFAULT_INTENSITY",
    "Backoff",
    "Restart",
    "RestartIntensity",
    "Strategy",
]


class Restart(enum.Enum):
    """When a child is restarted after its incarnation ends (OTP's ``restart`` key).

    A *crash* is an exception out of ``on_start``, out of ``handle`` while handling a ``tell``,
    or out of a helper task in ``Actor.nursery``. A *normal stop* is ``Actor.stop``,
    ``ActorRef.stop`` or a supervisor stopping the child.
    """

    PERMANENT = "permanent"
    """Always restarted, after a crash or a normal stop."""
    TRANSIENT = "transient"
    """Restarted only after a crash; a normal stop removes the child."""
    TEMPORARY = "temporary"
    """Never restarted, not even when a sibling's crash restarts the group; it is removed."""


def restarts(restart: Restart, *, crashed: bool) -> bool:
    """Whether a child of type ``restart`` comes back after its incarnation ended."""
    return restart is Restart.PERMANENT or (restart is Restart.TRANSIENT and crashed)


class Strategy(enum.Enum):
    """Which children a supervisor restarts when one must be restarted (OTP's ``strategy``)."""

    ONE_FOR_ONE = "one_for_one"
    """Only the child whose incarnation ended."""
    ONE_FOR_ALL = "one_for_all"
    """All children: the others are stopped in reverse start order, then all restart in order."""
    REST_FOR_ONE = "rest_for_one"
    """The child and those started after it: stopped in reverse order, restarted in order."""


@dataclass(frozen=True)
class RestartIntensity:
    """How many restarts a supervisor allows within a sliding window before it gives up.

    More than ``max_restarts`` restarts within any ``within`` seconds makes the supervisor stop
    all of its children and raise `SupervisorEscalation`, as OTP does with ``intensity`` and
    ``period``. The count is per supervisor, over all of its children, so that a crash loop
    spread across siblings is caught too. A group restart (`Strategy.ONE_FOR_ALL`,
    `Strategy.REST_FOR_ONE`) counts once.

    Args:
        max_restarts: Restarts allowed within the window; 0 means the first restart escalates.
        within: Length of the sliding window, in seconds.

    Raises:
        ValueError: ``max_restarts`` is negative or ``within`` is not a positive finite number.
    """

    max_restarts: int = 3
    """Restarts allowed within ``within`` seconds (Elixir's default, 3)."""
    within: float = 5.0
    """Window length in seconds (OTP's and Elixir's default, 5)."""

    def __post_init__(self) -> None:
        if self.max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {self.max_restarts}")
        if not (math.isfinite(self.within) and self.within > 0):
            raise ValueError(f"within must be a positive number of seconds, got {self.within}")


DEFAULT_INTENSITY = RestartIntensity()


@dataclass(frozen=True)
class Backoff:
    """Delay before each restart: exponential, capped, with full jitter on a fraction.

    The *n*-th consecutive restart of a child (counting from 0) waits
    ``min(cap, initial * factor**n)``, of which a random part of up to ``jitter`` is taken
    off, so that siblings that crashed together do not restart in lock step. The count goes
    back to 0 once an incarnation has run for ``reset_after`` seconds. The default waits
    nothing, as OTP does; pass e.g. ``Backoff(initial=0.1)`` for a crash loop that touches a
    flaky dependency.

    Args:
        initial: Delay before the first restart, in seconds (0 disables backoff).
        factor: Growth per consecutive restart (>= 1).
        cap: Largest delay, in seconds.
        jitter: Fraction of each delay that is randomised, from 0 (none) to 1 (all).
        reset_after: Seconds an incarnation must run to count as healthy again.

    Raises:
        ValueError: An argument is negative, not finite, ``factor`` < 1 or ``jitter`` > 1.
    """

    initial: float = 0.0
    """Delay before the first restart of a run of crashes, in seconds."""
    factor: float = 2.0
    """Multiplier applied per consecutive restart."""
    cap: float = 30.0
    """Upper bound on any delay, in seconds."""
    jitter: float = 0.1
    """Fraction of the delay that is random (taken off, never added)."""
    reset_after: float = 10.0
    """An incarnation that ran this long resets the consecutive-restart count."""

    def __post_init__(self) -> None:
        for field in ("initial", "cap", "reset_after"):
            value = getattr(self, field)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{field} must be a finite number >= 0, got {value}")
        if not (math.isfinite(self.factor) and self.factor >= 1):
            raise ValueError(f"factor must be a finite number >= 1, got {self.factor}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, got {self.jitter}")

    def delay(self, attempt: int, *, rng: random.Random | None = None) -> float:
        """Return the delay before restart number ``attempt`` (0-based) of a run of crashes.

        Args:
            attempt: Consecutive restarts of this child before this one.
            rng: Source of jitter; the module's global generator if ``None``.

        Returns:
            Seconds to wait, between ``(1 - jitter) * d`` and ``d`` for the capped delay ``d``.
        """
        if self.initial == 0:
            return 0.0
        # Cap the exponent first: factor ** attempt overflows long before it matters.
        exponent = min(attempt, 1024)
        try:
            raw = self.initial * self.factor**exponent
        except OverflowError:
            raw = self.cap
        capped = min(self.cap, raw)
        spread = (rng or random).random() * self.jitter
        return capped * (1 - spread)


DEFAULT_BACKOFF = Backoff()


class _RestartWindow:
    """Restart times within the current window of a `RestartIntensity`."""

    __slots__ = ("_intensity", "_times")

    def __init__(self, intensity: RestartIntensity) -> None:
        self._intensity = intensity
        self._times: deque[float] = deque()

    def admit(self, now: float) -> bool:
        """Record a restart at ``now``; return False if it exceeds the intensity."""
        horizon = now - self._intensity.within
        while self._times and self._times[0] <= horizon:
            self._times.popleft()
        self._times.append(now)
        return len(self._times) <= self._intensity.max_restarts

    def clear(self) -> None:
        self._times.clear()
