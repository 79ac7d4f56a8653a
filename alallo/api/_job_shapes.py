"""The JSON of a fine-tuning job and what belongs to it: progress, price, events,
checkpoints and log lines (API.md, Jobs), as TypedDicts; see :mod:`alallo.api._shapes`."""

# No ``from __future__ import annotations`` (PEP 655; see ``_shapes``).
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from ._method_shapes import JobMethod
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
    "MetricsReport",
    "Price",
    "PriceRange",
    "Progress",
    "StreamDone",
    "TrainingLogLine",
]

JobStatusName = Literal["queued", "running", "re-scheduling", "cancelling", "paused",
                        "cancelled", "succeeded", "failed"]
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
    """What a job is estimated to cost, and what it costs (USD, to the nano-dollar)."""

    estimate: PriceRange
    """The range quoted at creation; the job never costs more than its ``high``."""
    charged: float
    """What the user pays: the steps charged less what was refunded (a failed job: 0)."""
    refunded: float
    """Given back (a failed job, a free cancel); as the REFUND event says it."""
    gross: float
    """Charged before refunds."""
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
    """Always ``fine_tuning.job``."""
    organization_id: str
    """The account that owns the job (OpenAI's organization)."""
    name: str | None
    """The name given at create, shown in the Jobs tab; None if none."""
    model: str
    """The base model, e.g. ``alallo/tiny-gpt2`` (as ``create_job(model=...)`` took it)."""
    training_file: str
    """The training file's id (``file-…``)."""
    validation_file: str | None
    """The validation file's id, or None."""
    suffix: str | None
    """Up to 64 characters added to the fine-tuned model's name, or None."""
    user_provided_suffix: str | None
    """``suffix`` again, by the name OpenAI's answers give it."""
    method: JobMethod
    """OpenAI's object: the method and its hyperparameters as they run."""
    adapter: Literal["lora", "full"]
    """``lora`` (an adapter on the frozen model) or ``full`` (every weight)."""
    precision: Literal["16-bit", "4-bit"]
    """The weights' precision while training (``4-bit``: QLoRA, on a GPU or the CPU)."""
    goal: Literal["lowest_cost", "fastest_finish"]
    """What the plan was chosen for: the lowest price or the earliest finish."""
    trainer: str
    """``trl``, ``simulated`` or ``command``."""
    hyperparameters: dict[str, Any]
    """The settings the trainer gets, defaults filled in: OpenAI's ``n_epochs`` (as run:
    ``max_steps`` wins), ``batch_size`` and ``learning_rate_multiplier``, and alallo's
    ``max_steps``, ``learning_rate``, ``lora_rank``..."""
    status: JobStatusName
    """``queued``, ``running``, ``re-scheduling``, ``cancelling``, ``paused`` (until resumed);
    final: ``succeeded``, ``failed``, ``cancelled``."""
    message: str | None
    """What users read next to the status, e.g. ``Starting``."""
    progress: Progress
    """Steps done, of how many, and the latest loss."""
    time_left: TimeRange | None
    """Estimated time left; None when not running."""
    estimate: TimeRange
    """The whole run's estimated duration, from its plan."""
    price: Price
    """The estimated price range, and what was charged and refunded (USD)."""
    plan: EstimatePlan
    """The devices the job runs on."""
    placement: dict[str, Any] | None
    """The node and devices it holds now; None when none."""
    queue_position: int | None
    """Place in the queue while waiting for devices (1: next)."""
    created_at: int
    """Unix seconds."""
    started_at: int | None
    """Unix seconds it first started running; None before."""
    finished_at: int | None
    """Unix seconds it reached a final status; None while live."""
    estimated_finish: int | None
    """Unix seconds, the long end of ``time_left`` from now."""
    attempt: int
    """1, then one more each time the job is moved or resumed."""
    checkpoint: LatestCheckpoint | None
    """The latest checkpoint the trainer saved; None before the first."""
    fine_tuned_model: str | None
    """The trained model's id once the job succeeded (``ft:BASE:ACCOUNT:SUFFIX:JOB``, OpenAI's
    five fields, SUFFIX empty without one): what ``GET /v1/models/{id}/content`` downloads;
    None before."""
    fine_tuned_model_path: str | None
    """Where the trained model is on the server (for the operator); None before."""
    model_revision: str | None
    """For a Hugging Face hub model: the commit hash of the weights it trains (resolved when
    the job was created, from the server's cache); None for other models."""
    result_files: list[str]
    """Files the job made (``GET /v1/files/{id}/content``): its metrics CSV once it
    succeeded; empty before."""
    trained_tokens: int | None
    """Once final: the training tokens charged (each charged step at the tokens its plan
    priced a step for; 0 when all was refunded); None while the job is live."""
    early_stopping: dict[str, Any] | None
    """As given: ``{"patience", "min_delta"}``; None when not asked for."""
    error: JobError | None
    """Why the job failed; None unless it did."""
    seq: int
    """The job's sequence number of this state (the stream's ``id``)."""
    integrations: list[dict[str, Any]]
    """As given, without secrets (a W&B ``api_key`` is left out)."""
    seed: int
    """The random seed the trainer uses: the one given, else one drawn at create."""
    metadata: dict[str, str] | None
    """The key-value pairs given at create, returned as they are."""


class JobList(TypedDict):
    """A page of the account's jobs, newest first (``list_jobs``)."""

    object: Literal["list"]
    data: list[FineTuningJob]
    has_more: bool


class JobEvent(TypedDict):
    """One entry of a job's events list, as OpenAI's ``fine_tuning.job.event`` (the ``openai``
    package's ``FineTuningJobEvent`` reads it), plus alallo's ``alallo_type``, ``seq``,
    ``hash`` and ``step`` (``GET /v1/fine_tuning/jobs/{id}/events``, ``iter_events``, and
    ``event`` stream items, which are all of ``type`` ``message``)."""

    id: str
    """``<job id>-event-<seq>`` (``after`` of the next, older page)."""
    object: Literal["fine_tuning.job.event"]
    """Always ``fine_tuning.job.event``."""
    created_at: int
    """Unix seconds."""
    level: Literal["info", "warn", "error"]
    """How much it matters (OpenAI's words)."""
    type: Literal["message", "metrics"]
    """``message``: something happened to the job (its kind in ``alallo_type``);
    ``metrics``: the figures the trainer reported at a step, in ``data``."""
    message: str
    """As users read it, e.g. ``Checkpoint saved at step 10`` or
    ``Step 10/100: training loss=1.23``."""
    data: dict[str, Any]
    """What the event carries beyond its message, by key: a placement's node...; on a
    ``metrics`` event OpenAI's ``step``, ``total_steps``, ``train_loss``,
    ``train_mean_token_accuracy``, ``valid_loss``, ``valid_mean_token_accuracy``,
    ``full_valid_loss``, ``full_valid_mean_token_accuracy`` (those measured), alallo's
    ``epoch``, ``learning_rate``, ``grad_norm``, ``tokens_per_s``, ``reward_accuracy``,
    ``reward_margin``, reinforcement's ``reward``, ``reward_std``, ``valid_reward`` and
    ``scores`` (each grader's, by name) where the trainer reported them."""
    alallo_type: str | None
    """alallo's kind of a ``message`` event: ``JOB_PENDING``, ``CHECKPOINT_SAVE``,
    ``JOB_COMPLETE``... (the seeds' event list; more may come); None on ``metrics`` events."""
    seq: int
    """Its place in the job's sequence (``after`` of the SSE stream and of the ``order=asc``
    list)."""
    hash: str | None
    """A hash of the model, on events that name one; else None."""
    step: int | None
    """The training step it belongs to, on events that have one; else None."""


class JobEventList(TypedDict):
    """A page of a job's events, newest first (``order=asc``: oldest first)."""

    object: Literal["list"]
    data: list[JobEvent]
    has_more: bool


class CheckpointMetrics(TypedDict):
    """The figures at a checkpoint's step, OpenAI's names (None: not measured there)."""

    step: int
    train_loss: float | None
    train_mean_token_accuracy: float | None
    valid_loss: float | None
    """The validation loss evaluated at this step (with a ``validation_file``)."""
    valid_mean_token_accuracy: float | None
    full_valid_loss: float | None
    """At the checkpoint that became the model: its validation loss at the end."""
    full_valid_mean_token_accuracy: float | None


class JobMetrics(TypedDict):
    """A job's figures at one step (``GET …/metrics``, and ``metrics`` stream items, where
    each item holds what one report brought and the rest is left out)."""

    object: Literal["fine_tuning.job.metrics"]
    step: int
    epoch: float | None
    train_loss: float | None
    train_mean_token_accuracy: float | None
    learning_rate: float | None
    grad_norm: float | None
    tokens_per_s: float | None
    """Training tokens per second since the previous logged step."""
    valid_loss: float | None
    valid_mean_token_accuracy: float | None
    full_valid_loss: float | None
    full_valid_mean_token_accuracy: float | None
    reward_accuracy: float | None
    """DPO: how often the preferred answer scores above the other."""
    reward_margin: float | None
    reward: float | None
    """Reinforcement: the grader's mean score of the step's answers."""
    reward_std: float | None
    """Reinforcement: their standard deviation."""
    valid_reward: float | None
    """Reinforcement: the grader's mean score of answers to the validation prompts."""
    scores: dict[str, float] | None
    """Reinforcement: each grader's mean score by name (``valid.<name>`` on validation)."""


class MetricsReport(TypedDict):
    """What one report of the trainer brought (a ``metrics`` stream item): ``step``,
    ``epoch`` and the figures it measured; the others are left out (the series,
    :class:`JobMetrics`, merges the reports of a step)."""

    object: Literal["fine_tuning.job.metrics"]
    step: int
    epoch: float | None
    train_loss: NotRequired[float | None]
    train_mean_token_accuracy: NotRequired[float | None]
    learning_rate: NotRequired[float | None]
    grad_norm: NotRequired[float | None]
    tokens_per_s: NotRequired[float | None]
    valid_loss: NotRequired[float | None]
    valid_mean_token_accuracy: NotRequired[float | None]
    full_valid_loss: NotRequired[float | None]
    full_valid_mean_token_accuracy: NotRequired[float | None]
    reward_accuracy: NotRequired[float | None]
    reward_margin: NotRequired[float | None]
    reward: NotRequired[float | None]
    reward_std: NotRequired[float | None]
    valid_reward: NotRequired[float | None]
    scores: NotRequired[dict[str, float]]


class MetricsList(TypedDict):
    """A job's metrics series, one row per step in step order (``list_metrics``)."""

    object: Literal["list"]
    data: list[JobMetrics]
    has_more: bool


class Checkpoint(TypedDict):
    """One checkpoint a job's trainer saved (``iter_checkpoints``; OpenAI's
    ``fine_tuning.job.checkpoint``)."""

    id: str
    """``ftckpt-…``."""
    object: Literal["fine_tuning.job.checkpoint"]
    created_at: int
    fine_tuned_model_checkpoint: str
    """The checkpoint model's id, ``ft:BASE:ACCOUNT:SUFFIX:JOB:ckpt-step-N`` (OpenAI's): a
    model to chat with, start a job from, retrieve, delete and share (issue 32)."""
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


class StreamDone(TypedDict):
    """The last item of a job's stream (``event: done``), after its final state."""

    id: str
    """The job's id."""
    status: JobStatusName | None
    """Its final status, as the last ``job`` item of the stream said it (None if the stream
    sent no ``job`` item)."""
    seq: int | None
    """That item's ``seq``."""


document(*(value for value in list(globals().values())
           if isinstance(value, type) and value.__module__ == __name__))
