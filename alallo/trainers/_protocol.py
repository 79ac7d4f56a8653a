"""The trainer protocol: a JSON config in, JSON lines out.

A trainer is a process. alallo starts it as ``<command> <config.json>``; the
config file holds one :class:`TrainerConfig`. The trainer writes one JSON
object per line to stdout, each one of the :data:`TrainerMessage` kinds below,
and exits 0 after a ``done`` line. Anything else it prints to stdout that is
not a protocol line, and everything on stderr, is kept as a plain log line.

A trainer exits non-zero after an ``error`` line, or without one when it
crashes; the runtime then treats the failure as a platform error unless the
``error`` line says ``"kind": "user"`` (bad data, a bad setting).

The full description, with an example session, is ``docs/trainer-protocol.md``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = [
    "Checkpoint",
    "Done",
    "Error",
    "Integration",
    "JudgeModel",
    "Log",
    "Metrics",
    "Progress",
    "Stage",
    "TrainerConfig",
    "TrainerMessage",
    "WandbConfig",
    "emit",
    "parse_line",
]


class WandbConfig(BaseModel):
    """Report metrics to Weights & Biases (the job's W&B integration)."""

    model_config = ConfigDict(extra="forbid")

    project: str
    api_key: str
    name: str | None = None
    entity: str | None = None
    tags: list[str] | None = None
    """The run's tags (OpenAI's ``wandb.tags``)."""
    mode: Literal["online", "offline"] = "online"
    base_url: str | None = None
    dir: str
    """Where W&B keeps its local files (the offline run, logs)."""


class JudgeModel(BaseModel):
    """A ``score_model`` grader's model, as the trainer loads it."""

    model_config = ConfigDict(extra="forbid")

    model: str
    """A local model directory."""
    adapter: str | None = None
    """A LoRA adapter's directory applied on ``model`` (a fine-tuned model); None: none."""
    tiny: str | None = None
    """The built-in model to build into ``model`` first when it is not there yet."""


class TrainerConfig(BaseModel):
    """What a trainer is asked to do; written as JSON to the config file.

    Paths are absolute. ``max_steps`` is already resolved by the runtime (from
    ``n_epochs`` and the file's line count when the user gave no
    ``max_steps``), so every trainer trains the same number of steps.
    """

    model_config = ConfigDict(extra="forbid")

    job_id: str
    model: str
    """A local Hugging Face model directory, or a hub id when ``hub_revision`` is set."""
    model_name: str
    """The catalogue name the user chose, e.g. ``alallo/tiny-gpt2``."""
    training_file: str
    """A JSONL file already checked on upload."""
    data_format: Literal["text", "messages", "prompt_completion", "preference",
                         "chosen_rejected", "reinforcement"]
    validation_file: str | None = None
    """A JSONL file to evaluate on (checked on upload), or None: no evaluation."""
    validation_format: Literal["text", "messages", "prompt_completion", "preference",
                               "chosen_rejected", "reinforcement"] | None = None
    eval_steps: int | None = Field(default=None, gt=0)
    """Evaluate every this many steps and at the last; None: at every checkpoint."""
    early_stopping_patience: int | None = Field(default=None, gt=0)
    """Stop after this many evaluations without improvement (None: never stop early); a
    checkpoint is saved at every evaluation, and the model is the best one."""
    early_stopping_min_delta: float = Field(default=0.0, ge=0)
    method: Literal["supervised", "dpo", "reinforcement"] = "supervised"
    """``supervised`` (TRL's ``SFTTrainer``), ``dpo`` (its ``DPOTrainer``, on preference
    pairs) or ``reinforcement`` (its ``GRPOTrainer``, on prompts, rewarded by ``grader``)."""
    beta: float = 0.1
    """DPO's beta (the KL penalty's weight); unused by the other methods."""
    grader: dict[str, Any] | None = None
    """Reinforcement: OpenAI's grader (:mod:`alallo.trainers.graders`), as JSON."""
    judges: dict[str, JudgeModel] = Field(default_factory=dict)
    """Reinforcement: the models ``score_model`` graders ask, by name, each loaded by the
    trainer beside the one it trains."""
    num_generations: int = Field(default=4, ge=2)
    """Reinforcement: answers sampled per prompt in a step (GRPO's group)."""
    max_completion_length: int = Field(default=128, gt=0)
    """Reinforcement: the longest answer sampled, in tokens."""
    eval_samples: int = Field(default=1, gt=0)
    """Reinforcement: answers sampled per validation prompt at each evaluation."""
    output_dir: str
    """Where the fine-tuned model goes (created by the trainer)."""
    checkpoint_dir: str
    """Where checkpoints go: one sub-directory ``checkpoint-<step>`` per checkpoint."""
    resume_from: str | None = None
    """A checkpoint directory to continue from, or None for a fresh start."""
    hub_revision: str | None = None
    """Set when ``model`` is a Hugging Face hub id the trainer downloads first, at this
    commit (into the Hugging Face cache: ``HF_HOME``); None when ``model`` is a directory."""
    init_adapter: str | None = None
    """A LoRA adapter to start from (continued training): trained further by a LoRA job,
    merged into the model first by a full fine-tune. None: a fresh adapter, or none."""
    adapter: Literal["lora", "full"] = "lora"
    precision: Literal["16-bit", "4-bit"] = "16-bit"
    max_steps: int = Field(gt=0)
    n_epochs: int = Field(default=1, gt=0)
    batch_size: int = Field(default=4, gt=0)
    learning_rate: float = Field(default=1e-3, gt=0)
    lora_rank: int = Field(default=8, gt=0)
    lora_alpha: int | None = Field(default=None, gt=0)
    """LoRA's alpha; None: twice the rank."""
    lora_dropout: float = Field(default=0.0, ge=0, lt=1)
    lora_target_modules: list[str] | str | None = None
    """Module names or ``"all-linear"``; None: peft's known modules for the architecture."""
    warmup_ratio: float = Field(default=0.0, ge=0, lt=1)
    weight_decay: float = Field(default=0.0, ge=0)
    max_seq_length: int | None = Field(default=None, gt=0)
    """The tokens a training sequence may hold (longer ones are cut, as TRL cuts them);
    None: the model's context, as its ``config.json`` gives it (what the server checks a
    job's data against before it runs, and what its plans count per example)."""
    seed: int = 0
    logging_steps: int = Field(default=10, gt=0)
    """Report the loss every this many steps (the seeds: every 10 steps)."""
    save_steps: int = Field(default=10, gt=0)
    """Save a checkpoint every this many steps."""
    keep_checkpoints: int | None = Field(default=3, gt=0)
    """How many of its newest checkpoints the trainer keeps (it deletes older ones; OpenAI
    keeps a job's last 3 and alallo does too, as checkpoint models); None:
    it deletes none, the server does. On a Ray cluster a run cut off from the cluster
    goes on for a while and must not delete the checkpoint its job resumes from."""
    step_delay_s: float = Field(default=0.0, ge=0)
    """Simulated trainer only: seconds each step takes."""
    fail_at_step: int | None = None
    """Simulated trainer only: exit with a platform error at this step."""
    memory_gb: float | None = None
    """Simulated trainer only: the planned memory per device it reports, GB."""
    memory_surprise: float = Field(default=1.0, ge=1.0)
    """Simulated trainer only: from step 3 it reports this many times the planned memory."""
    step_noise: float = Field(default=0.0, ge=0.0)
    """Simulated trainer only: log-normal sigma of each step's time (mean ``step_delay_s``)."""
    slow_step_every: int | None = None
    """Simulated trainer only: every this many steps, one slow step."""
    slow_step_factor: float = 10.0
    """Simulated trainer only: how much slower a slow step is."""
    wandb: WandbConfig | None = None
    """Report metrics to W&B; the trainer reports an ``Integration`` line first."""


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Log(_Message):
    """A line for the training log, shown to the user as is."""

    type: Literal["log"] = "log"
    text: str


class Stage(_Message):
    """A milestone before training: the model, the training or the validation data is
    loaded, training starts.

    ``hash`` identifies the artifact the stage concerns (model or data), as
    the events list shows it.
    """

    type: Literal["stage"] = "stage"
    stage: Literal["model_loaded", "data_loaded", "validation_loaded", "training_start"]
    hash: str | None = None


class Progress(_Message):
    """One optimizer step is done. ``loss`` is set on logging steps only."""

    type: Literal["progress"] = "progress"
    step: int = Field(ge=0)
    max_steps: int = Field(gt=0)
    epoch: float | None = None
    loss: float | None = None
    memory_gb: float | None = None
    """Peak device memory so far, GB (per device); a job that needs more than its
    placement has is re-scheduled on a bigger one."""


class Metrics(_Message):
    """Figures at ``step``: the training figures of a logging step, or the validation
    figures of an evaluation (names: :data:`alallo.jobs.FIGURES`); each is optional."""

    type: Literal["metrics"] = "metrics"
    step: int = Field(ge=0)
    epoch: float | None = None
    train_loss: float | None = None
    train_mean_token_accuracy: float | None = None
    learning_rate: float | None = None
    grad_norm: float | None = None
    tokens_per_s: float | None = None
    """Training tokens per second since the previous logging step (all devices)."""
    valid_loss: float | None = None
    """Loss on the validation file, evaluated at this step."""
    valid_mean_token_accuracy: float | None = None
    full_valid_loss: float | None = None
    """The validation loss of the model the run ends with (the whole validation file, as
    every evaluation of alallo's is)."""
    full_valid_mean_token_accuracy: float | None = None
    reward_accuracy: float | None = None
    """DPO: how often the preferred answer out-scores the other (training batch)."""
    reward_margin: float | None = None
    """DPO: the mean difference of the two answers' implicit rewards."""
    reward: float | None = None
    """Reinforcement: the grader's mean score of the step's answers."""
    reward_std: float | None = None
    """Reinforcement: their standard deviation."""
    valid_reward: float | None = None
    """Reinforcement: the grader's mean score of answers to the validation prompts."""
    scores: dict[str, float] | None = None
    """Reinforcement: each grader's mean score of the step's answers, by name (a ``multi``
    grader's sub-graders; a single grader's own), as ``valid.<name>`` for an evaluation."""

class Checkpoint(_Message):
    """A checkpoint was saved at ``step``; ``path`` is a directory to resume from."""

    type: Literal["checkpoint"] = "checkpoint"
    step: int = Field(ge=0)
    path: str
    hash: str | None = None


class Done(_Message):
    """Training finished; the fine-tuned model is at ``model_path``."""

    type: Literal["done"] = "done"
    model_path: str
    hash: str | None = None
    stopped_at: int | None = None
    """Set when training stopped early (``early_stopping_patience``): the last step run."""
    best_step: int | None = None
    """With ``stopped_at``: the step of the checkpoint saved as the model (the best
    validation loss)."""


class Integration(_Message):
    """An integration (W&B) started, or failed to: a failure cancels the job."""

    type: Literal["integration"] = "integration"
    name: Literal["wandb"] = "wandb"
    ok: bool
    message: str


class Error(_Message):
    """Training failed. ``kind`` tells a user error from a platform error."""

    type: Literal["error"] = "error"
    kind: Literal["user", "platform"]
    message: str


AnyMessage = Log | Stage | Progress | Metrics | Checkpoint | Done | Error | Integration
TrainerMessage = Annotated[AnyMessage, Field(discriminator="type")]
_ADAPTER: TypeAdapter[AnyMessage] = TypeAdapter(TrainerMessage)


def parse_line(line: str) -> AnyMessage:
    """Parse one line a trainer printed.

    A line that is not a protocol message (plain text, a library's warning)
    becomes a :class:`Log` with that text, so nothing a trainer prints is lost.
    """
    text = line.rstrip("\r\n")
    if text.startswith("{"):
        try:
            return _ADAPTER.validate_python(json.loads(text))
        except ValueError:
            pass
    return Log(text=text)


def emit(message: _Message) -> None:
    """Print one protocol line to stdout and flush it (for trainers)."""
    print(message.model_dump_json(exclude_none=True), flush=True)
