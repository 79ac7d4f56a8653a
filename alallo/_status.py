"""Job statuses, event types and the user-facing messages of the seeds, verbatim."""

from __future__ import annotations

import enum

__all__ = ["EventLevel", "EventType", "JobStatus", "Message"]


class JobStatus(str, enum.Enum):
    """A job's status, as the seeds' status table names it."""

    QUEUED = "queued"
    RUNNING = "running"
    RE_SCHEDULING = "re-scheduling"
    CANCELLING = "cancelling"
    PAUSED = "paused"
    """alallo's own: the user paused the job (``POST .../pause``); it holds no capacity and
    costs nothing until resumed (``POST .../resume``), then continues from its checkpoint."""
    CANCELLED = "cancelled"
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    @property
    def is_final(self) -> bool:
        """True for the statuses a job never leaves."""
        return self in _FINAL


_FINAL = frozenset({JobStatus.CANCELLED, JobStatus.SUCCEEDED, JobStatus.FAILED})


class Message(str, enum.Enum):
    """The messages a job can carry, from the seeds' message table.

    ``Training failed: ...`` is completed with the last relevant line of the
    training log, so it is built by :func:`training_failed` instead.
    """

    STARTING = "Starting"
    WAITING_FOR_CAPACITY = "Waiting for capacity"
    RE_SCHEDULING = "Re-scheduling"
    NOT_AVAILABLE = "Not available right now."
    CHOOSE_LOWER_PRECISION = "Not available right now. Choose a lower precision."
    BUDGET_REACHED = "Stopped: the budget was reached"
    TIME_LIMIT_REACHED = "Stopped: the time limit was reached"
    PLATFORM_ERROR = "Failed. We've been notified and are looking into it."
    PAUSING = "Pausing: saving a checkpoint"

    @staticmethod
    def paused(step: int) -> str:
        """A paused job's message: how to resume it, and from which step."""
        if step <= 0:
            return "Paused. Resume it to queue it again; it starts from the beginning."
        return f"Paused at step {step}. Resume it to continue from step {step}."

    @staticmethod
    def training_failed(last_line: str) -> str:
        """``Training failed: <the last relevant line of the training log>``."""
        return f"Training failed: {last_line.strip()}"


class EventLevel(str, enum.Enum):
    """How loudly an event speaks in the events list."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class EventType(str, enum.Enum):
    """The types of the events list (seed 000 plus those alallo adds).

    Clients must accept types they do not know: more may be added.
    """

    JOB_PENDING = "JOB_PENDING"
    JOB_START = "JOB_START"
    MODEL_DOWNLOADING = "MODEL_DOWNLOADING"
    MODEL_DOWNLOAD_COMPLETE = "MODEL_DOWNLOAD_COMPLETE"
    TRAINING_DATA_DOWNLOADING = "TRAINING_DATA_DOWNLOADING"
    TRAINING_DATA_DOWNLOAD_COMPLETE = "TRAINING_DATA_DOWNLOAD_COMPLETE"
    VALIDATION_DATA_DOWNLOAD_COMPLETE = "VALIDATION_DATA_DOWNLOAD_COMPLETE"
    WANDB_INIT = "WANDB_INIT"
    TRAINING_START = "TRAINING_START"
    CHECKPOINT_SAVE = "CHECKPOINT_SAVE"
    EPOCH_COMPLETE = "EPOCH_COMPLETE"
    EVAL_COMPLETE = "EVAL_COMPLETE"
    TRAINING_COMPLETE = "TRAINING_COMPLETE"
    JOB_COMPLETE = "JOB_COMPLETE"
    JOB_ERROR = "JOB_ERROR"
    JOB_USER_ERROR = "JOB_USER_ERROR"
    CANCEL_REQUESTED = "CANCEL_REQUESTED"
    JOB_STOPPED = "JOB_STOPPED"
    JOB_RESCHEDULED = "JOB_RESCHEDULED"
    JOB_RESTARTED = "JOB_RESTARTED"
    PAUSE_REQUESTED = "PAUSE_REQUESTED"
    JOB_PAUSED = "JOB_PAUSED"
    JOB_RESUMED = "JOB_RESUMED"
    ESTIMATE_REVISED = "ESTIMATE_REVISED"
    BILLING_LIMIT = "BILLING_LIMIT"
    REFUND = "REFUND"
    WARNING = "WARNING"
