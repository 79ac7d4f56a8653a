"""What a user asks for: the job spec of ``POST /v1/fine_tuning/jobs``.

Validated at the edge (rule 6 of the design): a bad spec raises pydantic's
``ValidationError``, which the gateway answers with 422 naming the field.
The OpenAI SDK's forms are accepted too: ``method`` as
``{"type": "supervised", "supervised": {"hyperparameters": {...}}}`` and
``"auto"`` for any hyperparameter (meaning: alallo chooses).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

__all__ = [
    "CommandTrainer",
    "EarlyStopping",
    "Hyperparameters",
    "JobSpec",
    "NamedTrainer",
    "SimulatedTrainer",
    "WandbIntegration",
]

MAX_EPOCHS = 100
MAX_BATCH_SIZE = 1024
MAX_LORA_RANK = 1024
LORA_ONLY = ("lora_rank", "lora_alpha", "lora_dropout", "lora_target_modules")
"""The hyperparameters of a LoRA adapter: refused for full fine-tuning."""


class Hyperparameters(BaseModel):
    """Training settings; None (or ``"auto"``) lets alallo choose."""

    model_config = ConfigDict(extra="forbid")

    n_epochs: int | None = Field(default=None, ge=1, le=MAX_EPOCHS)
    """Passes over the training file; default 3 when ``max_steps`` is not set."""
    max_steps: int | None = Field(default=None, ge=1)
    """Optimizer steps in all; wins over ``n_epochs``."""
    batch_size: int | None = Field(default=None, ge=1, le=MAX_BATCH_SIZE)
    """Examples per step; default 4."""
    learning_rate: float | None = Field(default=None, gt=0, le=1)
    """Peak learning rate; default 1e-3 for LoRA, 1e-4 for full fine-tuning."""
    learning_rate_multiplier: float | None = Field(default=None, gt=0, le=100)
    """OpenAI's way to set it: the default learning rate times this (``"auto"``: 1);
    not together with ``learning_rate``."""
    lora_rank: int | None = Field(default=None, ge=1, le=MAX_LORA_RANK,
                                  validation_alias=AliasChoices("lora_rank", "lora_r"))
    """Rank of the LoRA matrices (``lora_r`` too, as Together names it); default 8."""
    lora_alpha: int | None = Field(default=None, ge=1, le=4 * MAX_LORA_RANK)
    """LoRA's scale numerator (the update is scaled by alpha / rank); default twice the
    rank."""
    lora_dropout: float | None = Field(default=None, ge=0, lt=1)
    """Dropout on the LoRA path; default 0."""
    lora_target_modules: list[str] | Literal["all-linear"] | None = Field(
        default=None, min_length=1)
    """The modules LoRA adapts, by name (``["q_proj", "v_proj"]``) or ``"all-linear"``;
    default: those peft knows for the architecture, else every linear layer."""
    warmup_ratio: float | None = Field(default=None, ge=0, lt=1)
    """The share of the steps over which the learning rate climbs to its peak; default 0."""
    weight_decay: float | None = Field(default=None, ge=0, le=1)
    """AdamW's weight decay; default 0."""
    logging_steps: int | None = Field(default=None, ge=1, le=100_000)
    """Log the loss every this many steps (and at the last); default 10, as the seeds do."""
    eval_steps: int | None = Field(default=None, ge=1, le=100_000)
    """With a ``validation_file``: evaluate on it every this many steps (and at the last);
    default: at every checkpoint."""
    beta: float | None = Field(default=None, gt=0, le=10)
    """DPO only: how far the trained model may move from the reference model (the KL
    penalty's weight, Rafailov et al. 2023); default 0.1, as TRL's."""

    @field_validator("learning_rate_multiplier")
    @classmethod
    def _one_way_to_the_rate(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and info.data.get("learning_rate") is not None:
            raise PydanticCustomError(
                "learning_rate_twice",
                "give learning_rate or learning_rate_multiplier, not both")
        return value

    @model_validator(mode="before")
    @classmethod
    def _auto_means_default(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: (None if v == "auto" else v) for k, v in data.items()}
        return data


class EarlyStopping(BaseModel):
    """Stop when the validation loss stops improving (Keras's ``EarlyStopping``, run by
    transformers' ``EarlyStoppingCallback``): after ``patience`` evaluations in a row that
    did not lower the best validation loss by more than ``min_delta``. The job then
    succeeds with the best checkpoint as its model, charged for the steps it ran."""

    model_config = ConfigDict(extra="forbid")

    patience: int = Field(ge=1, le=1000)
    """Evaluations without improvement before training stops."""
    min_delta: float = Field(default=0.0, ge=0)
    """How much lower than the best the validation loss must be to count as better."""


class SimulatedTrainer(BaseModel):
    """The simulated trainer with its knobs (for tests and load runs)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["simulated"] = "simulated"
    step_delay_s: float = Field(default=0.05, ge=0, le=60)
    """Seconds each simulated step takes."""
    fail_at_step: int | None = Field(default=None, ge=1)
    """Crash with a platform error at this step (for failure drills)."""
    memory_surprise: float = Field(default=1.0, ge=1.0, le=100.0)
    """From step 3, report this many times the planned memory (drills re-scheduling)."""
    step_noise: float = Field(default=0.0, ge=0.0, le=2.0)
    """Spread of step times: each step takes ``step_delay_s`` × a log-normal factor of
    this sigma (mean 1)."""
    slow_step_every: int | None = Field(default=None, ge=1)
    """Every this many steps, one step takes ``slow_step_factor`` times longer."""
    slow_step_factor: float = Field(default=10.0, ge=1.0, le=1000.0)


class CommandTrainer(BaseModel):
    """A command of the account's own that speaks the trainer protocol
    (``docs/trainer-protocol.md``).

    Only accounts the operator allows may send one (``Forbidden`` otherwise,
    checked by the runtime): an account never chooses an executable on the server.
    """

    model_config = ConfigDict(extra="forbid")

    command: list[str] = Field(min_length=1)


class NamedTrainer(BaseModel):
    """A trainer the operator registered, by name (``GET /v1/trainers``)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")


TrainerChoice = Literal["trl"] | SimulatedTrainer | CommandTrainer | NamedTrainer
"""What ``JobSpec.trainer`` holds once validated."""


WANDB_KEY_LENGTH = 40


class WandbSettings(BaseModel):
    """Where a job reports its metrics on Weights & Biases."""

    model_config = ConfigDict(extra="forbid")

    project: str = Field(min_length=1)
    api_key: str
    """The W&B API key: 40 characters (checked here, as W&B checks it); required."""
    name: str | None = None
    entity: str | None = None

    @field_validator("api_key")
    @classmethod
    def _key_length(cls, value: str) -> str:
        if len(value) != WANDB_KEY_LENGTH:
            raise PydanticCustomError(
                "wandb_api_key",
                "API key must be {expected} characters long, yours was {length}",
                {"expected": WANDB_KEY_LENGTH, "length": len(value)},
            )
        return value


class WandbIntegration(BaseModel):
    """``{"type": "wandb", "wandb": {...}}``, as the OpenAI API spells it."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["wandb"]
    wandb: WandbSettings


class JobSpec(BaseModel):
    """A fine-tuning job as submitted; see API.md for each field."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    training_file: str = Field(min_length=1)
    validation_file: str | None = None
    from_checkpoint: str | None = Field(default=None, min_length=1, max_length=200)
    """Start from a checkpoint of one of the account's jobs: its id (``ftckpt-…``) or
    ``ft-…:STEP`` (Together's form); ``model`` is then that job's base model or model."""
    name: str | None = Field(default=None, max_length=200)
    suffix: str | None = Field(default=None, max_length=64)
    method: Literal["supervised", "dpo"] = "supervised"
    """``supervised`` (SFT) trains on examples; ``dpo`` (Direct Preference Optimization,
    Rafailov et al. 2023) on preference pairs."""
    adapter: Literal["lora", "full"] = "lora"
    precision: Literal["16-bit", "4-bit"] = "16-bit"
    goal: Literal["lowest_cost", "fastest_finish"] = "lowest_cost"
    hyperparameters: Hyperparameters = Field(default_factory=Hyperparameters)
    early_stopping: EarlyStopping | None = None
    """Stop early on the validation loss; needs a ``validation_file``."""
    integrations: list[WandbIntegration] = Field(default_factory=list)
    seed: int | None = Field(default=None, ge=0, le=2**31 - 1)
    trainer: TrainerChoice = "trl"
    metadata: dict[str, str] | None = None

    @model_validator(mode="before")
    @classmethod
    def _openai_method_form(cls, data: Any) -> Any:
        """Unfold OpenAI's ``method`` object into ``method`` + ``hyperparameters``, and
        Together's ``training_method`` (``{"method": "dpo", "dpo_beta": 0.1}``) alike."""
        if isinstance(data, dict) and isinstance(data.get("training_method"), dict):
            data = dict(data)
            together = data.pop("training_method")
            kind = together.get("method", "sft")
            data["method"] = {"type": "supervised" if kind == "sft" else kind}
            if together.get("dpo_beta") is not None:
                hyper = data["hyperparameters"] = dict(data.get("hyperparameters") or {})
                hyper.setdefault("beta", together["dpo_beta"])
        if not isinstance(data, dict) or not isinstance(data.get("method"), dict):
            return data
        data = dict(data)
        method = data.pop("method")
        kind = method.get("type", "supervised")
        stray = sorted(set(method) - {"type", kind})
        if stray:  # e.g. {"type": "dpo", "supervised": {...}}: its settings would be lost
            raise PydanticCustomError(
                "method_mismatch", "method.{key} does not go with method type '{kind}': "
                "give the settings under method.{kind}",
                {"key": stray[0], "kind": kind})
        data["method"] = kind
        nested = method.get(kind) or {}
        if isinstance(nested, dict) and isinstance(nested.get("hyperparameters"), dict):
            merged = dict(nested["hyperparameters"])
            if isinstance(data.get("hyperparameters"), dict):
                merged.update(data["hyperparameters"])
            data["hyperparameters"] = merged
        return data

    @field_validator("hyperparameters")
    @classmethod
    def _hyperparameters_fit(cls, value: Hyperparameters,
                             info: ValidationInfo) -> Hyperparameters:
        if value.beta is not None and info.data.get("method", "supervised") != "dpo":
            raise PydanticCustomError(
                "beta_without_dpo", "beta applies to method dpo only, not supervised")
        if value.eval_steps is not None and not info.data.get("validation_file"):
            raise PydanticCustomError(
                "eval_without_validation", "eval_steps needs a validation_file to evaluate on")
        if info.data.get("adapter") == "full":
            given = [name for name in LORA_ONLY if getattr(value, name) is not None]
            if given:
                raise PydanticCustomError(
                    "lora_without_lora", "{name} applies to adapter lora only, not full",
                    {"name": given[0]})
        return value

    @field_validator("early_stopping")
    @classmethod
    def _stops_on_validation(cls, value: EarlyStopping | None,
                             info: ValidationInfo) -> EarlyStopping | None:
        if value is not None and not info.data.get("validation_file"):
            raise PydanticCustomError(
                "early_stopping_without_validation",
                "early_stopping watches the validation loss: give a validation_file")
        return value

    @field_validator("precision")
    @classmethod
    def _four_bit_is_lora(cls, value: str, info: ValidationInfo) -> str:
        if value == "4-bit" and info.data.get("adapter") == "full":
            raise PydanticCustomError(
                "precision_adapter",
                'precision "4-bit" trains a LoRA adapter on quantized weights (QLoRA): '
                'use adapter "lora", or precision "16-bit" for full fine-tuning')
        return value

    @field_validator("trainer", mode="before")
    @classmethod
    def _trainer_choice(cls, value: Any) -> Any:
        """``"trl"``, ``"simulated"`` or a registered name as a string, or one of the
        objects: ``{"type": "simulated", ...}``, ``{"name": ...}``, ``{"command": [...]}``.

        One kind is picked by its keys and validated alone, so an error names the
        field of that kind (``trainer: command: ...``), not every kind it is not.
        """
        if isinstance(value, str):
            value = {"name": value}
        if isinstance(value, BaseModel):
            return value
        if not isinstance(value, dict):
            raise PydanticCustomError(
                "invalid_trainer", "give a trainer's name (GET /v1/trainers) or an object")
        if "name" in value and "command" in value:
            raise PydanticCustomError(
                "invalid_trainer", "give a registered trainer's name or a command, not both")
        if set(value) == {"name"} and value["name"] == "trl":
            return "trl"
        if set(value) == {"name"} and value["name"] == "simulated":
            return SimulatedTrainer()
        kind: type[BaseModel] = (CommandTrainer if "command" in value
                                 else NamedTrainer if "name" in value else SimulatedTrainer)
        try:
            return kind.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise PydanticCustomError(
                "invalid_trainer", "{where}: {reason}",
                {"where": where or kind.__name__, "reason": first["msg"]}) from None
