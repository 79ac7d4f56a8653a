"""A job's state and the records it produces (events, log lines).

These are the values the state machine (:mod:`alallo._lifecycle`) passes
around; they are also what the HTTP API shows, through :meth:`Job.public`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .._status import EventLevel, EventType, JobStatus
from ._plan import Plan
from ._spec import JobSpec
from ._timetext import TimeRange

__all__ = ["Event", "Job", "JobError", "LogLine", "Progress", "SavedCheckpoint"]


class Progress(BaseModel):
    """Steps done out of the job's max steps."""

    model_config = ConfigDict(frozen=True)

    step: int = 0
    max_steps: int
    epoch: float | None = None
    loss: float | None = None
    """The latest loss the trainer reported (every 10 steps)."""

    @property
    def percent(self) -> float:
        """Share of steps done, 0 to 100, rounded to one decimal."""
        return round(100.0 * self.step / self.max_steps, 1) if self.max_steps else 0.0


class SavedCheckpoint(BaseModel):
    """The latest checkpoint a job can resume from."""

    model_config = ConfigDict(frozen=True)

    step: int
    path: str
    created_at: int
    hash: str | None = None


CHECKPOINT_EVERY = 10
"""Steps between checkpoints (the trainer's ``save_steps``); evaluations default to it."""

DPO_BETA = 0.1
"""DPO's beta when the job names none (TRL's default)."""


class StartingWeights(BaseModel):
    """Where a job's training starts when not from its base model's own weights: a
    fine-tuned model of the account (``model: "ft:…"``) or a checkpoint of one of its jobs
    (``from_checkpoint``), resolved when the job is created."""

    model_config = ConfigDict(frozen=True)

    source: str
    """What the job named: the model id (``ft:…``) or the checkpoint id (``ftckpt-…``)."""
    base_model: str
    """The catalogue or hub model under it: what the job plans, prices and loads."""
    base_revision: str | None = None
    """The base's hub commit hash, pinned as for any job."""
    path: str
    """The directory: a LoRA adapter (``adapter_config.json``) or whole weights."""
    kind: Literal["adapter", "full"]


class JobError(BaseModel):
    """Why a job failed; null or complete in the API, never ``{}``."""

    model_config = ConfigDict(frozen=True)

    code: str
    message: str
    param: str | None = None


class Job(BaseModel):
    """Everything alallo knows about one job; only its actor changes it.

    ``seq`` is the last sequence number handed out for this job: to an
    event, a log line, or the job itself when it changed.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    account_id: str
    spec: JobSpec
    max_steps: int
    status: JobStatus = JobStatus.QUEUED
    message: str | None = None
    progress: Progress
    plan: Plan
    """The plan the job runs under (the one chosen at creation, until it is placed)."""
    options: tuple[Plan, ...] = ()
    """Every plan the pool offers for the job; the scheduler picks by goal."""
    verdict: Literal["ok", "not_available", "choose_lower_precision"] = "ok"
    """Whether any node could ever run the job (decided at creation)."""
    placement: dict[str, Any] | None = None
    """Where the current run runs: ``{"node", "device_type", "devices"}``."""
    queue_position: int | None = None
    """Place in the queue while waiting for capacity (1 = next)."""
    memory_factor: float = 1.0
    """Measured memory over planned memory, once a run showed more was needed."""
    estimate: TimeRange
    """Training time as estimated at creation."""
    price_estimate: tuple[float, float]
    """(low, high) USD as estimated at creation."""
    charged: float = 0.0
    refunded: float = 0.0
    created_at: int
    started_at: int | None = None
    """When training first started (Unix seconds)."""
    run_started_at: float | None = None
    """When the current run's trainer started (Unix seconds, fractional)."""
    first_step_at: float | None = None
    """When the current run reported its first step; the pace counts from here."""
    first_step: int = 0
    last_step_at: float | None = None
    """When the current run last reported a step."""
    step_s_mean: float | None = None
    """Moving average of recent step times, seconds (the pace's spread comes from it)."""
    step_s_var: float = 0.0
    """Moving variance of recent step times, seconds squared."""
    finished_at: int | None = None
    attempt: int = 0
    """How many runs the job has started; the log is kept per attempt."""
    checkpoint: SavedCheckpoint | None = None
    fine_tuned_model: str | None = None
    model_revision: str | None = None
    """A hub model's commit hash, resolved at creation: every run trains these weights."""
    init_from: StartingWeights | None = None
    """The weights training starts from, when not the base model's (continued training)."""
    error: JobError | None = None
    seq: int = 0
    state_seq: int = 0
    """The sequence number of this state of the job (log lines do not change it)."""
    log_lines: int = 0
    """Lines in the current attempt's log."""
    last_log_line: str | None = None
    """The last line of the current run's log, for ``Training failed: ...``."""
    charged_through: int = 0
    """The last step charged; steps up to it are never charged again."""
    restarts: int = 0
    """Runs restarted after platform errors (bounded by ``Settings.max_restarts``)."""
    restart_cause: str | None = None
    """Set while a restart is due: why the last run ended."""
    stop_reason: str | None = None
    """Set when alallo stopped the job (budget, time limit): its ``failed`` message."""
    cancel_free: bool = False
    """The cancel request came when cancelling is free (see ``docs/cancelling.md``)."""
    ran_s: float = 0.0
    """Seconds of running in finished runs (the time limit counts all runs)."""
    trainer_error: tuple[Literal["user", "platform"], str] | None = None
    """The error the current run's trainer reported, applied when it exits."""
    final_hash: str | None = None
    """Hash of the fine-tuned model, once the trainer reported it."""
    stopped_early: tuple[int, int | None] | None = None
    """``(last step run, best step)`` when training stopped early (``early_stopping``)."""
    result_files: tuple[str, ...] = ()
    """Files the job made for the account: its metrics CSV, once it succeeded."""

    @property
    def trainer_name(self) -> str:
        """``"trl"``, ``"simulated"``, a registered trainer's name, or ``"command"``."""
        trainer = self.spec.trainer
        if isinstance(trainer, str):
            return trainer
        return str(getattr(trainer, "name", None) or getattr(trainer, "type", "command"))

    @property
    def base_model(self) -> str:
        """The catalogue or hub model the job trains: its own ``model``, or the base under
        the fine-tuned model or checkpoint it continues."""
        return self.init_from.base_model if self.init_from else self.spec.model

    def resolved_hyperparameters(self) -> dict[str, Any]:
        """The hyperparameters the trainer gets, defaults filled in."""
        hp = self.spec.hyperparameters
        full = self.spec.adapter == "full"
        return {
            "n_epochs": hp.n_epochs or 3,
            "max_steps": self.max_steps,
            "batch_size": hp.batch_size or 4,
            "learning_rate": hp.learning_rate or ((1e-4 if full else 1e-3)
                                                  * (hp.learning_rate_multiplier or 1.0)),
            "lora_rank": None if full else (hp.lora_rank or 8),
            "warmup_ratio": hp.warmup_ratio or 0.0,
            "weight_decay": hp.weight_decay or 0.0,
            "logging_steps": hp.logging_steps or 10,
        } | ({} if full else {
            "lora_alpha": hp.lora_alpha or 2 * (hp.lora_rank or 8),
            "lora_dropout": hp.lora_dropout or 0.0,
            "lora_target_modules": hp.lora_target_modules,  # None: peft's choice
        }) | ({"beta": hp.beta or DPO_BETA} if self.spec.method == "dpo" else {}) | (
            {"eval_steps": hp.eval_steps or CHECKPOINT_EVERY} if self.spec.validation_file
            else {})


class Event(BaseModel):
    """One entry of a job's events list."""

    model_config = ConfigDict(frozen=True)

    seq: int
    created_at: int
    type: EventType
    message: str
    level: EventLevel = EventLevel.INFO
    hash: str | None = None
    step: int | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class LogLine(BaseModel):
    """One line of a job's training log; ``n`` is its sequence number."""

    model_config = ConfigDict(frozen=True)

    n: int
    at: float
    text: str
    attempt: int = 1

ItemKind = Literal["job", "event", "log"]
