"""The JSON of a fine-tuning job and what belongs to it: progress, price, events,
checkpoints and log lines (API.md, Jobs), as TypedDicts; see :mod:`alallo.api._shapes`."""

# No ``from __future__ import annotations`` (PEP 655; see ``_shapes``).
from typing import Any, Literal

from typing_extensions import TypedDict

from ._shapes import EstimatePlan, JobError, TimeRange, document

__all__ = [
    "Checkpoint",
    "CheckpointList",
    "CheckpointMetrics",
    "FineTuningJob",
    "JobEvent",
    "JobEventList",
    "JobList",
    "JobStatusName",
    "LatestCheckpoint",
    "LogPage",
    "Price",
    "PriceRange",
    "Progress",
    "TrainingLogLine",
]

JobStatusName = Literal["queued", "running", "re-scheduling", "cancelling", "cancelled",
                        "succeeded", "failed"]
"""The values of a job's ``status`` (:class:`alallo.JobStatus`)."""


class Progress(TypedDict):
    """Steps done of a job."""

    step: int
    max_steps: int
    percent: float
    """0 to 100."""
    epoch: float | None
    loss: float | None
    """The latest training loss; None before the first."""


class PriceRange(TypedDict):
    """A price range, in the enclosing :class:`Price`'s ``currency``."""

    low: float
    high: float


class Price(TypedDict):
    """What a job is estimated to cost, and what was charged and refunded."""

    estimate: PriceRange
    charged: float
    refunded: float
    currency: str


class LatestCheckpoint(TypedDict):
    """A job's latest checkpoint (its ``checkpoint``); see :class:`Checkpoint` for the list."""

    step: int
    created_at: int


class FineTuningJob(TypedDict):
    """A fine-tuning job (``create_job``, ``get_job``, ``cancel_job``, ``iter_jobs``; API.md)."""

    id: str
    """``ft-…``."""
    object: Literal["fine_tuning.job"]
    name: str | None
    model: str
    training_file: str
    validation_file: str | None
    suffix: str | None
    method: str
    """``supervised``."""
    adapter: Literal["lora", "full"]
    precision: Literal["16-bit", "4-bit"]
    goal: Literal["lowest_cost", "fastest_finish"]
    trainer: str
    """``trl``, ``simulated`` or ``command``."""
    hyperparameters: dict[str, Any]
    """The settings the trainer gets, defaults filled in."""
    status: JobStatusName
    message: str | None
    """What users read next to the status, e.g. ``Starting``."""
    progress: Progress
    time_left: TimeRange | None
    """Estimated time left; None when not running."""
    estimate: TimeRange
    """The whole run's estimated duration, from its plan."""
    price: Price
    plan: EstimatePlan
    """The devices the job runs on."""
    placement: dict[str, Any] | None
    """The node and devices it holds now; None when none."""
    queue_position: int | None
    """Place in the queue while waiting for devices (1: next)."""
    created_at: int
    started_at: int | None
    finished_at: int | None
    estimated_finish: int | None
    """Unix seconds, the long end of ``time_left`` from now."""
    attempt: int
    """1, then one more each time the job is moved or resumed."""
    checkpoint: LatestCheckpoint | None
    fine_tuned_model: str | None
    error: JobError | None
    seq: int
    """The job's sequence number of this state (the stream's ``id``)."""
    integrations: list[dict[str, Any]]
    """As given, without secrets (a W&B ``api_key`` is left out)."""
    seed: int | None
    metadata: dict[str, str] | None


class JobList(TypedDict):
    """A page of the account's jobs, newest first (``list_jobs``)."""

    object: Literal["list"]
    data: list[FineTuningJob]
    has_more: bool


class JobEvent(TypedDict):
    """One entry of a job's events list (``iter_events``, and ``event`` stream items)."""

    id: str
    object: Literal["fine_tuning.job.event"]
    seq: int
    """Its place in the job's sequence (``after`` of ``list_events``)."""
    created_at: int
    level: Literal["info", "warning", "error"]
    type: str
    message: str
    hash: str | None
    step: int | None
    data: dict[str, Any]


class JobEventList(TypedDict):
    """A page of a job's events, oldest first (``list_events``)."""

    object: Literal["list"]
    data: list[JobEvent]
    has_more: bool


class CheckpointMetrics(TypedDict):
    """What was known at a checkpoint's step."""

    step: int
    train_loss: float | None


class Checkpoint(TypedDict):
    """One checkpoint a job's trainer saved (``iter_checkpoints``; OpenAI's
    ``fine_tuning.job.checkpoint``)."""

    id: str
    """``ftckpt-…``."""
    object: Literal["fine_tuning.job.checkpoint"]
    created_at: int
    fine_tuned_model_checkpoint: str | None
    """The directory it was saved in."""
    fine_tuning_job_id: str
    step_number: int
    metrics: CheckpointMetrics


class CheckpointList(TypedDict):
    """A page of a job's checkpoints, newest first (``list_checkpoints``)."""

    object: Literal["list"]
    data: list[Checkpoint]
    has_more: bool
    first_id: str | None
    last_id: str | None


class TrainingLogLine(TypedDict):
    """One line of a job's training log (``iter_log``, and ``log`` stream items)."""

    n: int
    """Its place in the job's sequence (``after`` of ``read_log``)."""
    at: float
    """Unix seconds."""
    text: str
    attempt: int
    """The attempt that wrote it."""


class LogPage(TypedDict):
    """A page of the training log, oldest first (``read_log``); ``lines`` is ``data`` again."""

    object: Literal["list"]
    data: list[TrainingLogLine]
    has_more: bool

    lines: list[TrainingLogLine]


document(*(value for value in list(globals().values())
           if isinstance(value, type) and value.__module__ == __name__))
