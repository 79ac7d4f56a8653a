"""What a user asks for: the job spec of ``POST /v1/fine_tuning/jobs``.

Validated at the edge (rule 6 of the design): a bad spec raises pydantic's
``ValidationError``, which the gateway answers with 422 naming the field.
Every model here is checked as
:data:`~alallo.jobs._hyperparameters.REQUEST` says: an unknown field is refused,
at any depth; a number must be a JSON number (``true`` is no ``1``, ``"3"`` no
``3``) and finite (``NaN``, ``Infinity``, ``1e400``: a job stored with one could
not be answered, and a client retrying the 500 made it twice).
The OpenAI SDK's forms are accepted too: ``method`` as
``{"type": "supervised", "supervised": {"hyperparameters": {...}}}`` and
``"auto"`` for any hyperparameter (meaning: alallo chooses); and Together's
``training_method``. Their nested objects are checked as strictly
(``method.supervised.trainer`` is refused by that name, not dropped:
:mod:`~alallo.jobs._method_forms`).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ..trainers.graders import Grader, check
from ._hyperparameters import LORA_ONLY, REINFORCEMENT_ONLY, REQUEST, Hyperparameters
from ._metadata import check_metadata
from ._method_forms import OpenAIMethod, TogetherMethod, unfold_method_forms

__all__ = [
    "CommandTrainer",
    "EarlyStopping",
    "FAILURE_SWITCHES",
    "JobSpec",
    "NamedTrainer",
    "SUFFIX_PATTERN",
    "SimulatedTrainer",
    "WandbIntegration",
]

SUFFIX_PATTERN = r"^[A-Za-z0-9_-]{0,64}$"
"""OpenAI's rule for ``suffix``: up to 64 letters, digits, ``-`` and ``_``. It goes into
the model's id, which is one segment of a URL path (``/v1/models/{id}``)."""


class EarlyStopping(BaseModel):
    """Stop when the validation loss stops improving (Keras's ``EarlyStopping``, run by
    transformers' ``EarlyStoppingCallback``): after ``patience`` evaluations in a row that
    did not lower the best validation loss by more than ``min_delta``. The job then
    succeeds with the best checkpoint as its model, charged for the steps it ran."""

    model_config = REQUEST

    patience: int = Field(ge=1, le=1000)
    """Evaluations without improvement before training stops."""
    min_delta: float = Field(default=0.0, ge=0)
    """How much lower than the best the validation loss must be to count as better."""


class SimulatedTrainer(BaseModel):
    """The simulated trainer with its knobs (for tests and load runs)."""

    model_config = REQUEST

    type: Literal["simulated"] = "simulated"
    step_delay_s: float = Field(default=0.05, ge=0, le=60)
    """Seconds each simulated step takes."""
    fail_at_step: int | None = Field(default=None, ge=1)
    """Crash with a platform error at this step (for failure drills). A failure switch:
    see :data:`FAILURE_SWITCHES`."""
    memory_surprise: float = Field(default=1.0, ge=1.0, le=100.0)
    """From step 3, report this many times the planned memory (drills re-scheduling). A
    failure switch: see :data:`FAILURE_SWITCHES`."""
    step_noise: float = Field(default=0.0, ge=0.0, le=2.0)
    """Spread of step times: each step takes ``step_delay_s`` × a log-normal factor of
    this sigma (mean 1)."""
    slow_step_every: int | None = Field(default=None, ge=1)
    """Every this many steps, one step takes ``slow_step_factor`` times longer."""
    slow_step_factor: float = Field(default=10.0, ge=1.0, le=1000.0)

    def failure_switch(self) -> str | None:
        """The first of :data:`FAILURE_SWITCHES` this trainer sets, or None."""
        if self.fail_at_step is not None:
            return "fail_at_step"
        if self.memory_surprise != 1.0:
            return "memory_surprise"
        return None


FAILURE_SWITCHES = ("fail_at_step", "memory_surprise")
"""The simulated trainer's knobs that make the platform fail on purpose, for the
operator's drills: ``fail_at_step`` crashes the run as a platform error (restarts, then
"Failed. We've been notified…" and the operator's alert); ``memory_surprise`` reports
more memory than the plan's, as if the platform's memory model were wrong, which
re-schedules the job (and may fail it as "Not available right now."). Only the accounts
the operator trusts with the server may set them (docs/security.md); the pace knobs
(``step_delay_s``, ``step_noise``, ``slow_step_*``) fail nothing and are everyone's."""


class CommandTrainer(BaseModel):
    """A command of the account's own that speaks the trainer protocol
    (``docs/trainer-protocol.md``).

    Only accounts the operator allows may send one (``Forbidden`` otherwise,
    checked by the runtime): an account never chooses an executable on the server.
    """

    model_config = REQUEST

    command: list[str] = Field(min_length=1)


TRAINER_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
"""A trainer's name: what ``trainer`` may be as a string, or ``trainer.name``."""


class NamedTrainer(BaseModel):
    """A trainer the operator registered, by name (``GET /v1/trainers``)."""

    model_config = REQUEST

    name: str = Field(pattern=TRAINER_NAME_PATTERN)


TrainerChoice = Literal["trl"] | SimulatedTrainer | CommandTrainer | NamedTrainer
"""What ``JobSpec.trainer`` holds once validated."""


WANDB_KEY_LENGTH = 40


class WandbSettings(BaseModel):
    """Where a job reports its metrics on Weights & Biases: OpenAI's form (``project``,
    ``entity``, ``name``, ``tags``), logging in with the W&B key the account stored
    (``alallo accounts set --wandb-key``); or with alallo's ``api_key`` given here."""

    model_config = REQUEST

    project: str = Field(min_length=1)
    api_key: str | None = Field(default=None, json_schema_extra={
        "minLength": WANDB_KEY_LENGTH, "maxLength": WANDB_KEY_LENGTH})
    """The W&B API key: 40 characters (checked here, as W&B checks it). Left out (OpenAI's
    form): the key the account stored; a job is refused when it has none. Never shown."""
    name: str | None = None
    """The run's name; None: the job's id."""
    entity: str | None = None
    tags: list[str] | None = Field(default=None, max_length=64)
    """Tags of the W&B run (as OpenAI passes them on)."""

    @field_validator("api_key")
    @classmethod
    def _key_length(cls, value: str | None) -> str | None:
        if value is not None and len(value) != WANDB_KEY_LENGTH:
            raise PydanticCustomError(
                "wandb_api_key",
                "API key must be {expected} characters long, yours was {length}",
                {"expected": WANDB_KEY_LENGTH, "length": len(value)},
            )
        return value


class WandbIntegration(BaseModel):
    """``{"type": "wandb", "wandb": {...}}``, as the OpenAI API spells it."""

    model_config = REQUEST

    type: Literal["wandb"]
    wandb: WandbSettings


def _schema_as_checked(schema: dict[str, Any]) -> None:
    """:class:`JobSpec`'s JSON Schema (``/openapi.json``) says what its validators take
    beyond the fields' types: a trainer by any name (``"simulated"``, a registered one),
    and Together's ``training_method`` (not with ``method``). Rules between fields
    (``beta`` with DPO only...) are left to the fields' descriptions."""
    properties = schema["properties"]
    properties["trainer"]["anyOf"][0] = {
        "type": "string", "pattern": TRAINER_NAME_PATTERN,
        "description": "``trl``, ``simulated``, or a registered trainer's name"}
    properties["training_method"] = {**TogetherMethod.model_json_schema(),
                                     "title": "Training Method"}
    schema["not"] = {"required": ["method", "training_method"]}


class JobSpec(BaseModel):
    """A fine-tuning job as submitted; see API.md for each field."""

    model_config = ConfigDict(**REQUEST, json_schema_extra=_schema_as_checked)

    model: str = Field(min_length=1)
    training_file: str = Field(min_length=1)
    validation_file: str | None = None
    from_checkpoint: str | None = Field(default=None, min_length=1, max_length=200)
    """Start from a checkpoint of one of the account's jobs: its id (``ftckpt-…``) or
    ``ft-…:STEP`` (Together's form); ``model`` is then that job's base model or model."""
    name: str | None = Field(default=None, max_length=200)
    suffix: str | None = Field(default=None, pattern=SUFFIX_PATTERN)
    """Added to the fine-tuned model's id: see :data:`SUFFIX_PATTERN`."""
    method: Literal["supervised", "dpo", "reinforcement"] = "supervised"
    """``supervised`` (SFT) trains on examples; ``dpo`` (Direct Preference Optimization,
    Rafailov et al. 2023) on preference pairs; ``reinforcement`` (OpenAI's RFT, run as
    GRPO, Shao et al. 2024) on prompts, with ``grader`` scoring the model's answers."""
    grader: Grader | None = Field(default=None, validate_default=True)
    """Reinforcement only, and needed there: OpenAI's grader (``string_check``,
    ``text_similarity``, ``python``, ``score_model``, ``multi``), the reward of each answer;
    given in OpenAI's form as ``method.reinforcement.grader``. A ``score_model`` grader's
    model must be a base model on the server (checked when the job is created)."""
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
    """OpenAI's: up to 16 pairs, keys up to 64 characters, values up to 512
    (:func:`~alallo.jobs._metadata.check_metadata`); ``GET /v1/fine_tuning/jobs`` filters
    on them."""

    @field_validator("metadata")
    @classmethod
    def _metadata_limits(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return check_metadata(value)

    @model_validator(mode="before")
    @classmethod
    def _openai_method_form(cls, data: Any) -> Any:
        """OpenAI's ``method`` object and Together's ``training_method``, checked and
        unfolded (:func:`~alallo.jobs._method_forms.unfold_method_forms`)."""
        return unfold_method_forms(data)

    @field_validator("method", mode="before",
                     json_schema_input_type=Literal["supervised", "dpo", "reinforcement"]
                     | OpenAIMethod)
    @classmethod
    def _method_as_sent(cls, value: Any) -> Any:
        """As it came: OpenAI's object form of ``method``, which its JSON Schema names, was
        unfolded by :meth:`_openai_method_form` already."""
        return value

    @field_validator("grader")
    @classmethod
    def _grader_of_reinforcement(cls, value: Grader | None,
                                 info: ValidationInfo) -> Grader | None:
        method = info.data.get("method")
        if method is None:
            return value  # the method was refused already
        if method != "reinforcement":
            if value is not None:
                raise PydanticCustomError(
                    "grader_without_reinforcement",
                    "a grader applies to method reinforcement only, not {method}",
                    {"method": method})
            return value
        if value is None:
            raise PydanticCustomError(
                "missing_grader", "method reinforcement needs a grader: the one that scores "
                "the model's answers (method.reinforcement.grader)")
        try:
            check(value)
        except ValueError as exc:
            raise PydanticCustomError("invalid_grader", "{reason}",
                                      {"reason": str(exc)}) from None
        return value

    @field_validator("hyperparameters")
    @classmethod
    def _hyperparameters_fit(cls, value: Hyperparameters,
                             info: ValidationInfo) -> Hyperparameters:
        method = info.data.get("method", "supervised")
        if value.beta is not None and method != "dpo":
            raise PydanticCustomError(
                "beta_without_dpo", "beta applies to method dpo only, not {method}",
                {"method": method})
        given = [name for name in REINFORCEMENT_ONLY if getattr(value, name) is not None]
        if given and method != "reinforcement":
            raise PydanticCustomError(
                "reinforcement_only", "{name} applies to method reinforcement only, not "
                "{method}", {"name": given[0], "method": method})
        if value.reasoning_effort not in (None, "default"):
            raise PydanticCustomError(
                "reasoning_effort", "reasoning_effort {effort}: the models here answer "
                "without reasoning first, so only \"default\" applies",
                {"effort": json.dumps(value.reasoning_effort)})
        if value.eval_interval is not None and not info.data.get("validation_file"):
            raise PydanticCustomError(
                "eval_without_validation",
                "eval_interval needs a validation_file to evaluate on")
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
        if value is not None and info.data.get("method") == "reinforcement":
            raise PydanticCustomError(
                "early_stopping_reinforcement",
                "early_stopping watches the validation loss, which reinforcement does not "
                "minimise: watch the validation reward (eval_interval) instead")
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
