"""A job's state and the records it produces (events, log lines).

These are the values the state machine (:mod:`alallo._lifecycle`) passes
around; they are also what the HTTP API shows, through :meth:`Job.public`.
"""

from __future__ import annotations

import math
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

DEFAULT_EPOCHS = 3
"""Passes over the training file when the job names neither ``n_epochs`` nor ``max_steps``."""

DEFAULT_BATCH_SIZE = 4
"""Examples per step when the job names no ``batch_size``."""

DEFAULT_COMPLETION_TOKENS = 128
"""Reinforcement: the longest answer sampled when the job names no ``max_completion_tokens``."""


def group_size(compute_multiplier: float) -> int:
    """Reinforcement: answers sampled per prompt in a step (GRPO's group, Shao et al. 2024)
    for OpenAI's ``compute_multiplier``: 4 × it, rounded, at least 2 (GRPO's advantage
    compares the answers of a group: one alone has nothing to compare)."""
    return max(2, round(4 * compute_multiplier))


def default_learning_rate(adapter: str) -> float:
    """The peak learning rate of a job that names none (``learning_rate_multiplier`` 1):
    1e-3 for a LoRA adapter, 1e-4 for a full fine-tune."""
    return 1e-4 if adapter == "full" else 1e-3


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
    pause_requested: bool = False
    """The user asked to pause the running job: its trainer is saving a checkpoint to stop."""
    paused_at: float | None = None
    """Unix seconds the job was paused, while it is ``paused``."""
    paused_s: float = 0.0
    """Seconds spent paused before the current stretch (not counted as waiting or late)."""
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
    steps_per_epoch: int | None = None
    """Steps one pass over the training file takes (its examples over the batch size),
    counted at creation; None for jobs created before it was recorded."""

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

    @property
    def n_epochs(self) -> int:
        """Passes over the training file the job's steps make (the last one may be partial,
        when ``max_steps`` is not a whole number of epochs): what ran, not what was asked
        (``max_steps`` wins over ``n_epochs``). Jobs created before the steps of an epoch
        were recorded: the ``n_epochs`` asked for, else 3."""
        if self.steps_per_epoch:
            return max(1, math.ceil(self.max_steps / self.steps_per_epoch))
        return self.spec.hyperparameters.n_epochs or DEFAULT_EPOCHS

    @property
    def learning_rate_multiplier(self) -> float:
        """The peak learning rate over the default one (OpenAI's way of saying it): the
        ``learning_rate_multiplier`` given, or that of the ``learning_rate`` given, else 1."""
        hp = self.spec.hyperparameters
        if hp.learning_rate is not None:
            return float(f"{hp.learning_rate / default_learning_rate(self.spec.adapter):.10g}")
        return hp.learning_rate_multiplier or 1.0

    @property
    def trained_tokens(self) -> int | None:
        """Training tokens the user pays for, once the job is final (OpenAI's
        ``trained_tokens``): each charged step at the tokens its plan priced a step for
        (:attr:`Plan.tokens_per_step`); 0 when all it was charged was refunded (a failed job,
        a free cancel). None while the job is live, or for a plan made before the tokens of a
        step were recorded."""
        if not self.status.is_final:
            return None
        if self.charged_through == 0 or (self.refunded and self.refunded >= self.charged):
            return 0
        if self.plan.tokens_per_step is None:
            return None
        return round(self.charged_through * self.plan.tokens_per_step)

    def resolved_hyperparameters(self) -> dict[str, Any]:
        """The hyperparameters the trainer gets, defaults filled in; ``n_epochs`` and
        ``learning_rate_multiplier`` as they ran (:attr:`n_epochs`,
        :attr:`learning_rate_multiplier`)."""
        hp = self.spec.hyperparameters
        full = self.spec.adapter == "full"
        return {
            "n_epochs": self.n_epochs,
            "max_steps": self.max_steps,
            "batch_size": hp.batch_size or DEFAULT_BATCH_SIZE,
            "learning_rate": hp.learning_rate or (default_learning_rate(self.spec.adapter)
                                                  * (hp.learning_rate_multiplier or 1.0)),
            "learning_rate_multiplier": self.learning_rate_multiplier,
            "lora_rank": None if full else (hp.lora_rank or 8),
            "warmup_ratio": hp.warmup_ratio or 0.0,
            "weight_decay": hp.weight_decay or 0.0,
            "logging_steps": hp.logging_steps or 10,
        } | ({} if full else {
            "lora_alpha": hp.lora_alpha or 2 * (hp.lora_rank or 8),
            "lora_dropout": hp.lora_dropout or 0.0,
            "lora_target_modules": hp.lora_target_modules,  # None: peft's choice
        }) | ({"beta": hp.beta or DPO_BETA} if self.spec.method == "dpo" else {}) | (
            {"eval_steps": hp.eval_steps or hp.eval_interval or CHECKPOINT_EVERY}
            if self.spec.validation_file else {}) | (
            self._reinforcement() if self.spec.method == "reinforcement" else {})

    def _reinforcement(self) -> dict[str, Any]:
        """Reinforcement's hyperparameters as they run (OpenAI's, and the group size and
        answer length they give)."""
        hp = self.spec.hyperparameters
        multiplier = hp.compute_multiplier or 1.0
        return {"compute_multiplier": multiplier, "num_generations": group_size(multiplier),
                "max_completion_tokens": hp.max_completion_tokens or DEFAULT_COMPLETION_TOKENS,
                "eval_samples": hp.eval_samples or 1, "reasoning_effort": "default"} | (
            {"eval_interval": hp.eval_interval or CHECKPOINT_EVERY}
            if self.spec.validation_file else {})


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
