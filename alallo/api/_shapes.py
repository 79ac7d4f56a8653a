"""What the Python clients return: the API's JSON objects as :class:`typing.TypedDict`.

Each type names the keys of one answer of API.md, with their value types, so
an editor completes ``job["time_left"]["text"]`` and a type checker catches
``job["progres"]``. At runtime every result is still the plain ``dict``
that ``json.loads`` made (a TypedDict is a dict), so code written against
the untyped clients keeps working, and a field the server adds before these
types name it is there to read (``typing.TypedDict`` does not drop keys).

The server's side of the same shapes is the pydantic models of
``gateway._schemas``, which generate ``/openapi.json``; alallo cannot import
the gateway (imports go gateway -> alallo -> actors), so these are written
out once more, and ``tests/alallo/test_client_types.py`` checks that every
type's keys, required and optional, equal its schema's properties in
``/openapi.json`` and that a live server's answers carry exactly these keys.
"""

# No ``from __future__ import annotations``: Python 3.11 finds ``NotRequired``
# in a TypedDict's annotations only when they are evaluated (PEP 655).
from typing import Any, Generic, Literal, NotRequired, TypedDict, TypeVar

__all__ = [
    "Capacity",
    "CapacityNode",
    "Checkpoint",
    "CheckpointList",
    "CheckpointMetrics",
    "DashboardLink",
    "Estimate",
    "EstimatePlan",
    "EstimatePrice",
    "FileDeleted",
    "FileList",
    "FileObject",
    "FineTuningJob",
    "Health",
    "JobError",
    "JobEvent",
    "JobEventList",
    "JobList",
    "LatestCheckpoint",
    "LogPage",
    "Model",
    "ModelList",
    "NodeDrain",
    "Page",
    "Price",
    "PriceRange",
    "Progress",
    "TimeRange",
    "Trainer",
    "TrainerList",
    "TrainingLogLine",
]

T = TypeVar("T")

JobStatusName = Literal["queued", "running", "re-scheduling", "cancelling", "cancelled",
                        "succeeded", "failed"]
"""The values of a job's ``status`` (:class:`alallo.JobStatus`)."""


class Page(TypedDict, Generic[T]):
    """One page of a list (``GET /v1/files``, ``/v1/fine_tuning/jobs`` ...).

    ``data`` holds the items in the list's order; ``has_more`` says whether a
    request with ``after`` set to the last item's id (or ``seq``/``n``) finds more.
    """

    object: Literal["list"]
    data: list[T]
    has_more: bool


# -- files ------------------------------------------------------------------------


class FileObject(TypedDict):
    """An uploaded training file (``upload_file``, ``get_file``, ``iter_files``)."""

    id: str
    """``file-…``."""
    object: Literal["file"]
    filename: str
    bytes: int
    """Size in bytes."""
    purpose: str
    """``fine-tune``."""
    created_at: int
    """Unix seconds."""
    line_count: int
    """Examples (JSONL lines) in the file."""
    format: Literal["text", "messages", "prompt_completion"]
    status: Literal["processed", "error"]
    status_details: str | None


class FileList(Page[FileObject]):
    """A page of the account's files, newest first (``list_files``)."""


class FileDeleted(TypedDict):
    """The answer to ``delete_file``."""

    id: str
    object: Literal["file"]
    deleted: bool


# -- models, capacity and estimates ---------------------------------------------------


class Model(TypedDict):
    """A model of the catalogue (``list_models``)."""

    id: str
    """E.g. ``alallo/tiny-gpt2``: what ``create_job(model=...)`` takes."""
    object: Literal["model"]
    owned_by: str
    """``alallo`` (the built-in catalogue) or ``local`` (weights on this server's disk)."""
    parameters: int
    """Number of weights."""
    context_length: int
    """Longest example, in tokens."""
    adapters: list[str]
    """``lora`` and/or ``full``."""
    precisions: list[str]
    """``16-bit`` and/or ``4-bit``."""
    runnable_here: bool
    """Whether this server's nodes can train it."""


class ModelList(Page[Model]):
    """The catalogue (``list_models``)."""


class Trainer(TypedDict):
    """A trainer a job may name (``list_trainers``): built in, or registered by the operator."""

    object: Literal["trainer"]
    name: str
    """What ``create_job(trainer=...)`` takes, e.g. ``trl`` or ``my-sft``."""
    description: str
    built_in: bool


class TrainerList(Page[Trainer]):
    """The trainers of the server (``list_trainers``), built-in ones first."""


class CapacityNode(TypedDict):
    """A node of the pool and what runs on it."""

    name: str
    device_type: str
    """E.g. ``cpu``, ``H200``."""
    devices: int
    free: int
    """Devices not held by a job."""
    busy: dict[str, int]
    """Devices held, by job id of the account; other accounts' jobs together as ``others``."""
    simulated: bool
    draining: bool
    memory_gb: float
    """Memory per device, in GB."""
    price_per_hour: float
    """USD per device-hour."""


class Capacity(TypedDict):
    """The capacity pool and the queue (``capacity``)."""

    nodes: list[CapacityNode]
    queue_length: int
    """Jobs of every account waiting for devices."""
    queue: list[str]
    """The account's job ids waiting for devices, next first."""


class NodeDrain(TypedDict):
    """A node drained or opened again (``drain_node``), and the jobs moved off it."""

    node: str
    draining: bool
    moved: list[str]
    """Job ids moved to other nodes (from their checkpoints)."""


class TimeRange(TypedDict):
    """A time range, as a job's ``time_left`` or ``estimate`` and an estimate's ``time``."""

    low_s: int
    """Seconds, the short end."""
    high_s: int
    """Seconds, the long end."""
    text: str
    """As users read it, e.g. ``40 min to 1.3 h``."""
    basis: str
    """What it rests on, e.g. ``pace`` (measured steps) or ``plan``."""


class EstimatePrice(TypedDict):
    """The price range of an estimate, in ``currency``."""

    low: float
    high: float
    currency: str
    """``USD``."""


class EstimatePlan(TypedDict):
    """The devices a job runs on (or would)."""

    devices: int
    device_type: str
    memory_gb: float


class Estimate(TypedDict):
    """The answer to "Estimate time and price" (``estimate``).

    When ``available`` is false, ``reason`` and ``detail`` say why and
    ``time``, ``price`` and ``plan`` are None.
    """

    available: bool
    reason: str | None
    """E.g. ``Not available right now.``; None when the job can run."""
    detail: NotRequired[str | None]
    """The cause in words when it cannot run (e.g. the memory it needs); None otherwise."""
    time: TimeRange | None
    price: EstimatePrice | None
    capacity_free: bool
    """Whether devices are free now (else ``note`` says the job would wait)."""
    note: str | None
    plan: EstimatePlan | None
    allowed_to_proceed: bool
    """Whether the account's balance (and billing limit) covers the high price."""


# -- jobs ------------------------------------------------------------------------------


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


class JobError(TypedDict):
    """Why a job failed (its ``error``); the shape of every API error's ``error`` too."""

    code: str
    message: str
    param: str | None


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


class JobList(Page[FineTuningJob]):
    """A page of the account's jobs, newest first (``list_jobs``)."""


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


class JobEventList(Page[JobEvent]):
    """A page of a job's events, oldest first (``list_events``)."""


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


class CheckpointList(Page[Checkpoint]):
    """A page of a job's checkpoints, newest first (``list_checkpoints``)."""

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


class LogPage(Page[TrainingLogLine]):
    """A page of the training log, oldest first (``read_log``); ``lines`` is ``data`` again."""

    lines: list[TrainingLogLine]


# -- operations -----------------------------------------------------------------------


class Health(TypedDict):
    """The answer to ``healthz``."""

    status: Literal["ok"]


class DashboardLink(TypedDict):
    """A one-time sign-in link to the dashboard."""

    path: str
    """``/signin/<token>``, to open on the server's address."""
    expires_in: int
    """Seconds it stays valid."""
