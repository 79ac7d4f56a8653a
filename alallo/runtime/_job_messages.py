"""The mailbox of a job's actor: every message it takes (:class:`JobMessage`).

Four come from outside: :class:`CancelJob` (a user's cancel, on the control lane, so it
overtakes a backlog of progress lines), :class:`PauseJob` and :class:`ResumeJob` (a user's
pause and resume, on the control lane too) and :class:`RescheduleJob` (capacity: the node
drains or was lost). The others the actor sends itself from its run's tasks (the scheduler's answer,
the trainer's lines and exit, a limit reached), so that every change of the job goes through
the mailbox, one at a time (:mod:`alallo.runtime._job_actor`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..capacity import Grant
from ..executors import RunEnd

if TYPE_CHECKING:
    import trio

__all__ = ["CancelJob", "JobMessage", "PauseJob", "RescheduleJob", "ResumeJob"]


@dataclass(frozen=True)
class CancelJob:
    """Stop the job for the user; the reply is the job after the request."""


@dataclass(frozen=True)
class PauseJob:
    """Pause the job for the user (its trainer saves a checkpoint and stops); the reply is
    the job after the request: ``paused``, or ``running`` with ``Pausing: ...``."""


@dataclass(frozen=True)
class ResumeJob:
    """Queue a paused job again; the reply is the job after the request (``queued``)."""


@dataclass(frozen=True)
class _PauseOverdue:
    """The trainer has not stopped within the pause's grace period: stop it."""

    run: trio.CancelScope | None
    """The run it was asked of (its cancel scope: a later run is not stopped)."""


@dataclass(frozen=True)
class RescheduleJob:
    """Move the job to other capacity (its node drains or was lost); it continues
    from its latest checkpoint."""

    reason: str


@dataclass(frozen=True)
class _Waiting:
    position: int


@dataclass(frozen=True)
class _NotAvailable:
    lower_precision_fits: bool
    detail: str | None = None


@dataclass(frozen=True)
class _RunStarting:
    config_hash: str
    resume_step: int | None
    cause: str | None
    grant: Grant


@dataclass(frozen=True)
class _CannotAfford:
    detail: str


@dataclass(frozen=True)
class _TrainerLine:
    text: str


@dataclass(frozen=True)
class _TrainerEnded:
    returncode: int | None
    node_lost: str | None = None

    @classmethod
    def of(cls, end: RunEnd | None) -> _TrainerEnded:
        """How a run ended (None: it never started)."""
        return cls(None) if end is None else cls(end.returncode, end.node_lost)


@dataclass(frozen=True)
class _LimitReached:
    limit: Literal["budget", "time_limit"]


JobMessage = (CancelJob | PauseJob | ResumeJob | _PauseOverdue | RescheduleJob
              | _Waiting | _NotAvailable | _RunStarting | _CannotAfford
              | _TrainerLine | _TrainerEnded | _LimitReached)
