"""The job spec a client sends to ``create_job`` and ``estimate`` (API.md, Jobs)."""

from __future__ import annotations

from typing import Any, Literal, Required, TypedDict

from alallo._types import FileId

__all__ = ["HyperparameterFields", "JobSpecFields", "clean_spec"]

JsonObject = dict[str, Any]


class HyperparameterFields(TypedDict, total=False):
    """Training settings of a job spec; the server fills in what is left out (or None)."""

    n_epochs: int | None
    """Passes over the training file (when ``max_steps`` is not given)."""
    max_steps: int | None
    """Optimizer steps to train; wins over ``n_epochs``."""
    batch_size: int | None
    """Examples per step."""
    learning_rate: float | None
    """The optimizer's learning rate."""
    learning_rate_multiplier: float | Literal["auto"] | None
    """OpenAI's way: the default learning rate times this (``"auto"``: 1)."""
    lora_rank: int | None
    """Rank of the LoRA matrices (``adapter="lora"`` only)."""
    lora_alpha: int | None
    lora_dropout: float | None
    lora_target_modules: list[str] | Literal["all-linear"] | None
    warmup_ratio: float | None
    weight_decay: float | None
    logging_steps: int | None
    """Log the loss every this many steps (default 10)."""
    eval_steps: int | None
    """With a ``validation_file``: evaluate every this many steps (default: at each
    checkpoint)."""
    beta: float | None
    """DPO's beta (``method="dpo"`` only)."""
    compute_multiplier: float | None
    """Reinforcement only: how much exploring each prompt gets; the answers sampled per
    prompt in a step are 4 × this (0.5 to 8, default 1)."""
    eval_interval: int | None
    """Reinforcement only, with a ``validation_file``: grade answers to its prompts every
    this many steps (default: at each checkpoint)."""
    eval_samples: int | None
    """Reinforcement only: answers sampled per validation prompt at each evaluation."""
    reasoning_effort: Literal["default", "low", "medium", "high"] | None
    """Reinforcement only (OpenAI's): the models here do not reason first, so only
    ``"default"`` is taken."""
    max_completion_tokens: int | None
    """Reinforcement only: the longest answer sampled, in tokens (default 128)."""


class JobSpecFields(TypedDict, total=False):
    """What ``create_job`` and ``estimate`` accept (API.md, Jobs).

    Only the keys given are sent: a key given as None is left out, so callers
    such as the command line can pass every option they have.
    """

    model: Required[str]
    """A catalogue id from ``list_models``, e.g. ``alallo/tiny-gpt2``."""
    training_file: FileId | None
    """An uploaded file's id (``file-…``); required to create a job."""
    validation_file: FileId | None
    """An uploaded file to evaluate on."""
    name: str | None
    """A name to show in the Jobs tab."""
    method: Literal["supervised", "dpo", "reinforcement"] | None
    """Supervised fine-tuning on examples, DPO on preference pairs, or reinforcement
    fine-tuning (OpenAI's RFT) on prompts, whose answers ``grader`` scores."""
    grader: JsonObject | None
    """With ``method="reinforcement"`` (and needed there): OpenAI's grader, as its JSON
    object, e.g. ``{"type": "string_check", "name": "exact", "input": "{{ sample.output_text
    }}", "reference": "{{ item.answer }}", "operation": "eq"}``. A dict, not a path: read a
    file with ``json.load`` (``validate_grader`` checks one before a job pays for it)."""
    early_stopping: JsonObject | None
    """``{"patience": N, "min_delta": x}``: stop when the validation loss stops improving."""
    from_checkpoint: str | None
    """Start from a checkpoint of one of the account's jobs (``ftckpt-…`` or ``ft-…:STEP``)."""
    metadata: dict[str, str] | None
    """Key-value pairs returned as they are."""
    suffix: str | None
    """Added to the fine-tuned model's name."""
    adapter: Literal["lora", "full"] | None
    """Train a LoRA adapter or all weights."""
    precision: Literal["16-bit", "4-bit"] | None
    """Weights' precision while training."""
    goal: Literal["lowest_cost", "fastest_finish"] | None
    """Which plan the scheduler picks."""
    hyperparameters: HyperparameterFields | None
    """Training settings; see :class:`HyperparameterFields`."""
    integrations: list[JsonObject] | None
    """E.g. ``[{"type": "wandb", "wandb": {"project": ..., "api_key": ...}}]``."""
    seed: int | None
    """Random seed of the training run (0 to 2**31 - 1); the server draws one when none is
    given, and the job shows it."""
    trainer: str | JsonObject | None
    """``"trl"``, ``"simulated"`` or ``{"command": [...]}``."""


def clean_spec(spec: JobSpecFields) -> JsonObject:
    """The request body of a spec: the keys given, less those given as None (nested too)."""
    body: JsonObject = {key: value for key, value in spec.items() if value is not None}
    if "hyperparameters" in body:
        given = {k: v for k, v in body.pop("hyperparameters").items() if v is not None}
        if given:
            body["hyperparameters"] = given
    return body
