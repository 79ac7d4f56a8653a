"""The shapes of the API's answers, as pydantic models, for ``/openapi.json``.

The endpoints build their answers from the domain objects' ``public()``
methods; these models describe those answers (API.md), and the OpenAPI
document is generated from them with pydantic's JSON Schema. A test runs
schemathesis against the live server, so a model that drifts from what the
server sends fails the suite. Models allow extra fields: the server may add
a field before the schema names it, never remove one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

__all__ = [
    "ApiErrorBody", "CatalogueModelObject", "DashboardLink", "Estimate", "EventList", "EventObject",
    "FileDeleted", "FileList", "FileObject", "Health", "JobCheckpointList",
    "JobCheckpointObject", "JobList", "JobObject",
    "LogPage", "ModelList", "TrainerList", "TrainerObject",
]


class ErrorDetail(BaseModel):
    """What went wrong."""

    code: str
    message: str
    param: str | None


class ApiErrorBody(BaseModel):
    """Every error answer (4xx)."""

    error: ErrorDetail


class Health(BaseModel):
    """``GET /healthz``."""

    status: Literal["ok"]


class DashboardLink(BaseModel):
    """A one-time sign-in link to the dashboard."""

    path: str
    """``/signin/<token>``, to open on the server's address."""
    expires_in: int
    """Seconds it stays valid (it also stops working once used)."""


class FileObject(BaseModel):
    """An uploaded training file."""

    id: str
    object: Literal["file"]
    filename: str
    bytes: int
    purpose: str
    created_at: int
    line_count: int
    format: Literal["text", "messages", "prompt_completion"]
    status: Literal["processed", "error"]
    status_details: str | None


class FileList(BaseModel):
    """The account's files."""

    object: Literal["list"]
    data: list[FileObject]
    has_more: bool


class FileDeleted(BaseModel):
    """The answer to ``DELETE /v1/files/{file_id}``."""

    id: str
    object: Literal["file"]
    deleted: bool


class CatalogueModelObject(BaseModel):
    """A model of the catalogue."""

    id: str
    object: Literal["model"]
    owned_by: str
    """``alallo`` (the built-in catalogue) or ``local`` (weights on this server's disk)."""
    parameters: int
    context_length: int
    adapters: list[str]
    precisions: list[str]
    runnable_here: bool


class ModelList(BaseModel):
    """The catalogue."""

    object: Literal["list"]
    data: list[CatalogueModelObject]
    has_more: bool


class TrainerObject(BaseModel):
    """A trainer a job may name (``"trainer": {"name": ...}``); its command is not shown."""

    object: Literal["trainer"]
    name: str
    description: str
    built_in: bool


class TrainerList(BaseModel):
    """The trainers of this server, built-in ones first."""

    object: Literal["list"]
    data: list[TrainerObject]
    has_more: bool


class TimeRangeObject(BaseModel):
    """A time range: ``text`` as users read it, e.g. ``40 min to 1.3 h``."""

    low_s: int
    high_s: int
    text: str
    basis: str


class Progress(BaseModel):
    """Steps done."""

    step: int
    max_steps: int
    percent: float
    epoch: float | None
    loss: float | None


class PriceRange(BaseModel):
    """A price range in ``currency``."""

    low: float
    high: float


class Price(BaseModel):
    """What a job is estimated to cost, and what was charged and refunded."""

    estimate: PriceRange
    charged: float
    refunded: float
    currency: str


class CheckpointObject(BaseModel):
    """The latest checkpoint."""

    step: int
    created_at: int


class JobObject(BaseModel):
    """A fine-tuning job (API.md, Jobs)."""

    id: str
    object: Literal["fine_tuning.job"]
    name: str | None
    model: str
    training_file: str
    validation_file: str | None
    suffix: str | None
    method: str
    adapter: Literal["lora", "full"]
    precision: Literal["16-bit", "4-bit"]
    goal: Literal["lowest_cost", "fastest_finish"]
    trainer: str
    """``trl``, ``simulated`` or ``command``."""
    hyperparameters: dict[str, Any]
    status: Literal["queued", "running", "re-scheduling", "cancelling", "cancelled",
                    "succeeded", "failed"]
    message: str | None
    progress: Progress
    time_left: TimeRangeObject | None
    estimate: TimeRangeObject
    price: Price
    plan: EstimatePlan
    """The devices the job runs on."""
    placement: dict[str, Any] | None
    """The node and devices it holds now; null when none."""
    queue_position: int | None
    created_at: int
    started_at: int | None
    finished_at: int | None
    estimated_finish: int | None
    attempt: int
    checkpoint: CheckpointObject | None
    fine_tuned_model: str | None
    error: ErrorDetail | None
    seq: int
    integrations: list[dict[str, Any]]
    """As given, without secrets (a W&B ``api_key`` is left out)."""
    seed: int | None
    metadata: dict[str, str] | None


class JobList(BaseModel):
    """A page of jobs, newest first."""

    object: Literal["list"]
    data: list[JobObject]
    has_more: bool


class EventObject(BaseModel):
    """One entry of a job's events list."""

    id: str
    object: Literal["fine_tuning.job.event"]
    seq: int
    created_at: int
    level: Literal["info", "warning", "error"]
    type: str
    message: str
    hash: str | None
    step: int | None
    data: dict[str, Any]


class EventList(BaseModel):
    """A page of a job's events, oldest first."""

    object: Literal["list"]
    data: list[EventObject]
    has_more: bool


class CheckpointMetrics(BaseModel):
    """What was known at a checkpoint's step."""

    step: int
    train_loss: float | None
    """The training loss of the last logging step at or before ``step``; null if none."""


class JobCheckpointObject(BaseModel):
    """One checkpoint a job's trainer saved (OpenAI's ``fine_tuning.job.checkpoint``)."""

    id: str
    """``ftckpt-…``, stable for the job and step."""
    object: Literal["fine_tuning.job.checkpoint"]
    created_at: int
    fine_tuned_model_checkpoint: str | None
    """The directory the checkpoint was saved in (older ones may be deleted since)."""
    fine_tuning_job_id: str
    step_number: int
    metrics: CheckpointMetrics


class JobCheckpointList(BaseModel):
    """A page of a job's checkpoints, newest first."""

    object: Literal["list"]
    data: list[JobCheckpointObject]
    has_more: bool
    first_id: str | None
    last_id: str | None


class LogLineObject(BaseModel):
    """One line of the training log."""

    n: int
    at: float
    text: str
    attempt: int


class LogPage(BaseModel):
    """A page of the training log (``lines`` is ``data`` again, API.md's name)."""

    object: Literal["list"]
    data: list[LogLineObject]
    lines: list[LogLineObject]
    has_more: bool


class EstimatePrice(BaseModel):
    """The price range of an estimate."""

    low: float
    high: float
    currency: str


class EstimatePlan(BaseModel):
    """The devices a job would use."""

    devices: int
    device_type: str
    memory_gb: float


class CapacityNode(BaseModel):
    """A node of the pool and what runs on it."""

    name: str
    device_type: str
    devices: int
    free: int
    busy: dict[str, int]
    """Devices held, by job id of the account; other accounts' jobs together as ``others``."""
    simulated: bool
    draining: bool
    memory_gb: float
    price_per_hour: float


class Capacity(BaseModel):
    """The capacity pool and the queue."""

    nodes: list[CapacityNode]
    queue_length: int
    queue: list[str]
    """The account's job ids waiting for capacity, next first (other accounts'
    waiting jobs count in ``queue_length`` only)."""


class NodeDrain(BaseModel):
    """A node drained (or opened again), and the jobs moved off it."""

    node: str
    draining: bool
    moved: list[str]


class Estimate(BaseModel):
    """The answer to "Estimate time and price"."""

    available: bool
    reason: str | None
    """Why the job cannot run (``Not available right now.`` ...), or None."""
    detail: str | None = None
    """The cause, in words, when it cannot run, e.g. ``The job needs about 181 GB of memory;
    the most one node here can give a job is 14 GB (cpu)`` or ``4-bit needs a GPU; this
    server has only CPU nodes``; None when it can."""
    time: TimeRangeObject | None
    price: EstimatePrice | None
    capacity_free: bool
    note: str | None
    plan: EstimatePlan | None
    allowed_to_proceed: bool
