"""The training settings of a job spec (``hyperparameters``), and how every model of a
request is checked (:data:`REQUEST`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

__all__ = ["LORA_ONLY", "MAX_BATCH_SIZE", "MAX_EPOCHS", "MAX_LORA_RANK", "REQUEST",
           "REINFORCEMENT_ONLY", "Hyperparameters"]

REQUEST = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
"""How each model of a job spec checks what it is sent: unknown fields refused, no
conversion between types (pydantic's strict mode: a boolean or a string is no number;
an integer is a float), and no ``NaN`` or infinite number."""

MAX_EPOCHS = 100
MAX_BATCH_SIZE = 1024
MAX_LORA_RANK = 1024
LORA_ONLY = ("lora_rank", "lora_alpha", "lora_dropout", "lora_target_modules")
"""The hyperparameters of a LoRA adapter: refused for full fine-tuning."""
REINFORCEMENT_ONLY = ("compute_multiplier", "eval_interval", "eval_samples", "reasoning_effort",
                      "max_completion_tokens")
"""The hyperparameters of reinforcement fine-tuning (OpenAI's
``ReinforcementHyperparameters``, and alallo's ``max_completion_tokens``): refused for the
other methods."""


def _schema_as_checked(schema: dict[str, Any]) -> None:
    """:class:`Hyperparameters`' JSON Schema (``/openapi.json``) says what its validators
    take beyond the fields' types: ``"auto"`` for any of them, ``lora_r`` for ``lora_rank``
    (not both), not ``learning_rate`` with ``learning_rate_multiplier``; and a
    ``lora_target_modules`` list holds at least one name (pydantic writes that bound on the
    union, as ``minLength``)."""
    properties = schema["properties"]
    targets = properties["lora_target_modules"]["anyOf"][0]
    targets.pop("minLength", None)
    targets["anyOf"][0]["minItems"] = 1
    properties["lora_r"] = {**properties["lora_rank"], "title": "Lora R",
                            "description": "``lora_rank`` by Together's name (not both)."}
    for field in properties.values():
        field["anyOf"] = [*field["anyOf"], {"const": "auto"}]
    both_rates = {"required": ["learning_rate", "learning_rate_multiplier"], "properties": {
        "learning_rate": {"type": "number"}, "learning_rate_multiplier": {"type": "number"}}}
    schema["not"] = {"anyOf": [{"required": ["lora_rank", "lora_r"]}, both_rates]}


class Hyperparameters(BaseModel):
    """Training settings; None (or ``"auto"``) lets alallo choose."""

    model_config = ConfigDict(**REQUEST, json_schema_extra=_schema_as_checked)

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
    compute_multiplier: float | None = Field(default=None, ge=0.5, le=8)
    """Reinforcement only (OpenAI's): how much exploring each prompt gets: the answers
    sampled per prompt in a step (GRPO's group, Shao et al. 2024) are 4 × this, rounded,
    at least 2; default 1."""
    eval_interval: int | None = Field(default=None, ge=1, le=100_000)
    """Reinforcement only (OpenAI's): with a ``validation_file``, grade answers to its
    prompts every this many steps (and at the last); default: at every checkpoint."""
    eval_samples: int | None = Field(default=None, ge=1, le=16)
    """Reinforcement only (OpenAI's): answers sampled per validation prompt at each
    evaluation; default 1."""
    reasoning_effort: Literal["default", "low", "medium", "high"] | None = None
    """Reinforcement only (OpenAI's): for reasoning models. The models here do not reason
    before answering, so only ``"default"`` (or ``"auto"``) is taken."""
    max_completion_tokens: int | None = Field(default=None, ge=1, le=32_768)
    """Reinforcement only: the longest answer sampled, in tokens (cut to what the model's
    context leaves after the longest prompt); default 128."""

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
