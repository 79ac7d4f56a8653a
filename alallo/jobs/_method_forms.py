"""OpenAI's ``method`` object and Together's ``training_method`` in a job spec: each
checked as strictly as the spec (:data:`~alallo.jobs._hyperparameters.REQUEST`), so that
a field in them alallo does not run is refused by its path (``method.supervised.trainer``)
rather than dropped, then unfolded into the spec's ``method`` and ``hyperparameters``
(:func:`unfold_method_forms`)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from ..trainers.graders import Grader
from ._hyperparameters import REQUEST, Hyperparameters

__all__ = ["MethodSettings", "OpenAIMethod", "ReinforcementSettings", "TogetherMethod",
           "unfold_method_forms"]


class MethodSettings(BaseModel):
    """What ``method.supervised`` and ``method.dpo`` hold (OpenAI's)."""

    model_config = REQUEST

    hyperparameters: Hyperparameters | None = None


class ReinforcementSettings(MethodSettings):
    """What ``method.reinforcement`` holds (OpenAI's ``ReinforcementMethod``): the grader
    that scores the model's answers, and the hyperparameters."""

    grader: Grader


class OpenAIMethod(BaseModel):
    """OpenAI's ``method``: ``{"type": KIND, KIND: {"hyperparameters": {...}}}`` (and the
    ``grader`` of ``reinforcement``)."""

    model_config = REQUEST

    type: Literal["supervised", "dpo", "reinforcement"] = "supervised"
    supervised: MethodSettings | None = None
    dpo: MethodSettings | None = None
    reinforcement: ReinforcementSettings | None = None

    @field_validator("supervised", "dpo", "reinforcement")
    @classmethod
    def _of_its_type(cls, value: MethodSettings | None,
                     info: ValidationInfo) -> MethodSettings | None:
        kind = info.data.get("type")
        if value is not None and kind is not None and info.field_name != kind:
            # e.g. {"type": "dpo", "supervised": {...}}: its settings would be lost
            raise PydanticCustomError(
                "method_mismatch", "method.{key} does not go with method type '{kind}': "
                "give the settings under method.{kind}",
                {"key": info.field_name, "kind": kind})
        return value


_ALALLO_DECIDES = ("train_on_inputs", "dpo_normalize_logratios_by_length",
                   "dpo_reference_free", "rpo_alpha", "simpo_gamma")


class TogetherMethod(BaseModel):
    """Together's ``training_method``. Of its DPO variants and its prompt masking, alallo
    runs none: each is accepted at the value that says so (what Together's SDK sends
    when they are not asked for: ``"auto"``, ``false``, ``0``) and refused at any other,
    rather than dropped."""

    model_config = REQUEST

    method: Literal["sft", "dpo"] = "sft"
    dpo_beta: float | None = Field(default=None, gt=0, le=10)
    train_on_inputs: bool | Literal["auto"] | None = Field(
        default=None, json_schema_extra={"enum": [False, "auto", None]})
    dpo_normalize_logratios_by_length: bool | None = Field(
        default=None, json_schema_extra={"enum": [False, None]})
    dpo_reference_free: bool | None = Field(default=None, json_schema_extra={"enum": [False, None]})
    rpo_alpha: float | None = Field(default=None, json_schema_extra={"enum": [0, None]})
    simpo_gamma: float | None = Field(default=None, json_schema_extra={"enum": [0, None]})

    @field_validator(*_ALALLO_DECIDES)
    @classmethod
    def _as_alallo_trains(cls, value: object, info: ValidationInfo) -> object:
        if value is None or value == "auto" or value is False or value == 0:
            return value
        why = ("it trains on whole conversations, and on the completion of a prompt"
               if info.field_name == "train_on_inputs" else "plain DPO, its beta dpo_beta")
        raise PydanticCustomError(
            "not_supported", "alallo does not run {name}={value}: leave it out ({why})",
            {"name": info.field_name, "value": json.dumps(value), "why": why})


class _MethodForms(BaseModel):
    """The nested method forms of a spec, checked before they are unfolded."""

    model_config = REQUEST

    method: OpenAIMethod | None = None
    training_method: TogetherMethod | None = None


def _refused(loc: tuple[str, ...], kind: str, message: str) -> ValidationError:
    """A refusal at ``loc`` (its ``param``), raised from a validator of the whole spec
    (whose own errors have no place)."""
    return ValidationError.from_exception_data("JobSpec", [InitErrorDetails(
        type=PydanticCustomError(kind, message), loc=loc, input=None)])


def unfold_method_forms(data: Any) -> Any:
    """A spec's fields (``data``, as sent) with OpenAI's ``method`` object or Together's
    ``training_method`` unfolded into ``method`` (``"supervised"``, ``"dpo"``,
    ``"reinforcement"``), ``hyperparameters`` (the form's merged with the top-level ones) and
    ``grader`` (reinforcement's); anything else as it came.

    Raises:
        pydantic.ValidationError: a bad field in the forms, by its whole path; ``method``
            with ``training_method``; a hyperparameter given in both places with two values.
    """
    if not isinstance(data, dict):
        return data
    nested = {key: data[key] for key in ("method", "training_method")
              if isinstance(data.get(key), dict)}
    if not nested:
        return data
    forms = _MethodForms.model_validate(nested)  # its errors carry their whole path
    data = dict(data)
    extra: dict[str, Any] = {}  # hyperparameters given in the method's form
    where = ""
    if forms.training_method is not None:
        if "method" in data:
            raise _refused(("training_method",), "method_twice",
                           "give method or training_method, not both")
        data.pop("training_method")
        data["method"] = "supervised" if forms.training_method.method == "sft" else "dpo"
        if forms.training_method.dpo_beta is not None:
            extra, where = {"beta": nested["training_method"]["dpo_beta"]}, "training_method"
    elif forms.method is not None:
        kind = data["method"] = forms.method.type
        settings = nested["method"].get(kind) or {}
        extra = dict(settings.get("hyperparameters") or {})
        where = f"method.{kind}.hyperparameters"
        if kind == "reinforcement":
            if forms.method.reinforcement is None:
                raise _refused(("method", "reinforcement"), "missing_grader",
                               "method reinforcement needs method.reinforcement.grader: the "
                               "grader that scores the model's answers")
            if "grader" in data:
                raise _refused(("grader",), "grader_twice",
                               "give the grader once, in method.reinforcement.grader")
            data["grader"] = settings["grader"]
    given = data.get("hyperparameters")
    if extra and (given is None or isinstance(given, dict)):
        for key, value in extra.items():
            if given and key in given and given[key] != value:
                source = "dpo_beta" if where == "training_method" else key
                raise _refused(("hyperparameters", key), "hyperparameter_twice",
                               f"hyperparameters.{key} and {where}.{source} differ: "
                               "give it once")
        data["hyperparameters"] = {**extra, **(given or {})}
    return data
