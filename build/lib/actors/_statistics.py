"""`SupervisorStatistics`: what one supervisor has done since it was opened."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SupervisorStatistics"]


@dataclass(frozen=True, slots=True)
class SupervisorStatistics:
    """Counters of one supervisor since it was opened, as returned by `Supervisor.statistics`.

    They count incarnations of the supervisor's direct children; nested supervisors keep their
    own.
    """

    children: int
    """Children registered now, running or waiting to be restarted."""
    running: int
    """Children with a running incarnation now."""
    started: int
    """Incarnations started successfully, first starts and restarts alike."""
    restarted: int
    """Restarts attempted: incarnations begun by a restart, whether or not ``on_start`` then
    succeeded (first starts and `Supervisor.relocate` are not restarts)."""
    crashed: int
    """Incarnations that ended with an exception."""
    relocated: int
    """Completed `Supervisor.relocate` calls."""
    escalations: int
    """Times the supervisor's own restart intensity was exceeded."""
    given_up: int
    """Children removed for exceeding their own restart intensity (``start_child(...,
    intensity=...)``); the supervisor went on without them."""
    dead_letters: int
    """Dead letters recorded in `Supervisor.dead_letters` (shared with nested supervisors)."""
