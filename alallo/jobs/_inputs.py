"""The inputs of the job state machine (:func:`alallo._lifecycle.apply`): what can happen
to a job, each with the facts it brings (times come in the input), and the
:class:`Transition` an input makes. Data only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..trainers import Checkpoint, Done, Error, Integration, Metrics, Stage
from ..trainers import Progress as TrainerProgress
from ._billing import LedgerEntry
from ._job import Event, Job
from ._plan import Plan

__all__ = [
    "ActorFailed",
    "AutoCancel",
    "CancelRequested",
    "CheckpointNotShared",
    "Created",
    "Input",
    "LimitReached",
    "NotAvailable",
    "PauseRequested",
    "Rescheduled",
    "ResumeRequested",
    "Started",
    "TrainerExited",
    "TrainerReported",
    "Transition",
    "WaitingForCapacity",
]


@dataclass(frozen=True)
class Created:
    """The job was accepted (``POST /v1/fine_tuning/jobs``)."""

    now: float
    warnings: tuple[str, ...] = ()
    """What the job's data loses, said before it runs (examples cut to the model's
    context): each a ``WARNING`` event after ``JOB_PENDING``."""


@dataclass(frozen=True)
class WaitingForCapacity:
    """The job is ready to start but no capacity is free; ``position`` 1 is next."""

    now: float
    position: int | None = None


@dataclass(frozen=True)
class NotAvailable:
    """No capacity could ever run the job (or only at a lower precision)."""

    now: float
    lower_precision_fits: bool = False
    detail: str | None = None
    """Why, in words (:func:`alallo._plans.why_not`): the event and the error say it."""


@dataclass(frozen=True)
class Started:
    """A trainer process is starting for the job (a new run)."""

    now: float
    config_hash: str | None = None
    resume_step: int | None = None
    """The checkpoint step the run resumes from, or None for a fresh start."""
    cause: str | None = None
    """Why the job restarts (for JOB_RESTARTED), when it is not the first run."""
    plan: Plan | None = None
    """The plan the scheduler placed the run under."""
    placement: dict[str, object] | None = None


@dataclass(frozen=True)
class TrainerReported:
    """The trainer printed a protocol message (other than a log line)."""

    message: Stage | TrainerProgress | Metrics | Checkpoint | Done | Error | Integration
    now: float


@dataclass(frozen=True)
class TrainerExited:
    """The trainer process ended (``returncode``), or never ran (None).

    ``max_restarts`` bounds the restarts after platform errors.
    """

    returncode: int | None
    now: float
    max_restarts: int = 0
    result_file: str | None = None
    """The metrics CSV the runtime stored for the account, when the run finished well."""


@dataclass(frozen=True)
class CheckpointNotShared:
    """A checkpoint the trainer saved could not be copied to the shared storage
    (``storage_url``): it is not recorded, and the user is told."""

    now: float
    step: int
    reason: str


@dataclass(frozen=True)
class CancelRequested:
    """The user asked to cancel the job."""

    now: float


@dataclass(frozen=True)
class PauseRequested:
    """The user asked to pause the job: a running one saves a checkpoint and stops, a
    queued one leaves the queue (``docs/api.md``, "Pause and resume")."""

    now: float


@dataclass(frozen=True)
class ResumeRequested:
    """The user asked a paused job to go on: it is queued again, and continues from the
    checkpoint it was paused at."""

    now: float


@dataclass(frozen=True)
class AutoCancel:
    """alallo cancels the job for the user (seed 000): money or W&B.

    ``detail`` completes the event's message: the amounts, or W&B's reason.
    """

    now: float
    reason: Literal["balance", "billing_limit", "wandb"]
    detail: str


@dataclass(frozen=True)
class Rescheduled:
    """The job needs more capacity than planned and is being moved (it restarts from
    its latest checkpoint on the new placement)."""

    now: float
    reason: str


@dataclass(frozen=True)
class LimitReached:
    """The job ran far longer than planned (budget) or hit the time limit."""

    now: float
    limit: Literal["budget", "time_limit"]


@dataclass(frozen=True)
class ActorFailed:
    """The job's actor is gone for good: its supervisor gave it up after too many crashes,
    or it could not start. A platform error, with no run left to try: the job fails now
    (a job being cancelled ends cancelled, as asked)."""

    now: float
    reason: str
    """Why, in words, for the event and the operator (e.g. the actor's last error)."""


Input = (Created | WaitingForCapacity | NotAvailable | Started | TrainerReported
         | TrainerExited | CancelRequested | AutoCancel | LimitReached | Rescheduled
         | CheckpointNotShared | ActorFailed | PauseRequested | ResumeRequested)


@dataclass(frozen=True)
class Transition:
    """What an input did: the new job, the events and ledger entries to add, in order."""

    job: Job
    events: tuple[Event, ...] = ()
    ledger: tuple[LedgerEntry, ...] = ()
    changed: bool = True
    """False when the input changed nothing: there is nothing to persist."""
