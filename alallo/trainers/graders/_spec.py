"""OpenAI's graders, as ``openai-python``'s ``types/graders/`` states them: what a grader is,
checked field by field (a wrong one is a 400 naming it).

``label_model`` is not taken (the issue's list, and OpenAI's RFT, grade with the others).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

__all__ = ["GRADER", "Grader", "GraderRunRequest", "GraderValidateRequest", "MultiGrader", "PythonGrader", "ScoreModelGrader",
           "SamplingParams", "StringCheckGrader", "SubGrader", "TextSimilarityGrader", "judge_models"]

_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

class StringCheckGrader(BaseModel):
    """``input`` against ``reference`` (both templates): ``eq``, ``ne``, ``like`` (the
    reference occurs in the input), ``ilike`` (so, ignoring case); 1 or 0."""

    model_config = _STRICT
    type: Literal["string_check"]
    name: str
    input: str
    reference: str
    operation: Literal["eq", "ne", "like", "ilike"]


class TextSimilarityGrader(BaseModel):
    """How close ``input`` is to ``reference`` (both templates), 0 to 1, by
    ``evaluation_metric``."""

    model_config = _STRICT
    type: Literal["text_similarity"]
    name: str
    input: str
    reference: str
    evaluation_metric: Literal["cosine", "fuzzy_match", "bleu", "gleu", "meteor", "rouge_1",
                               "rouge_2", "rouge_3", "rouge_4", "rouge_5", "rouge_l"]
    pass_threshold: float | None = None
    """Legacy (evals): taken, and the score is still the similarity."""


class PythonGrader(BaseModel):
    """The user's ``source`` defining ``grade(sample, item) -> float``, run sandboxed."""

    model_config = _STRICT
    type: Literal["python"]
    name: str
    source: str = Field(max_length=256_000)
    image_tag: str | None = None
    """OpenAI's image of the grader's runtime; here the server's Python is the only one."""


class SamplingParams(BaseModel):
    """How a ``score_model`` grader's model samples its answer (OpenAI's
    ``ScoreModelGrader.SamplingParams``, its names: ``max_completions_tokens`` is OpenAI's
    spelling)."""

    model_config = _STRICT
    max_completions_tokens: int | None = Field(default=None, ge=1, le=32_768)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    reasoning_effort: None = Field(default=None, json_schema_extra={
        "description": "The models here answer without reasoning first: leave it out."})

    def as_chat(self) -> dict[str, Any]:
        """The chat completions request's parameters they are (those given)."""
        chat = {"max_completion_tokens": self.max_completions_tokens,
                "temperature": self.temperature, "top_p": self.top_p, "seed": self.seed}
        return {name: value for name, value in chat.items() if value is not None}


class ScoreModelGrader(BaseModel):
    """A model asked to score the sample: ``input`` messages (templates), its answer's number
    clamped to ``range``."""

    model_config = _STRICT
    type: Literal["score_model"]
    name: str
    model: str
    input: list[dict[str, Any]] = Field(min_length=1)
    range: list[float] | None = Field(default=None, min_length=2, max_length=2)
    sampling_params: SamplingParams | None = None


SubGrader = Annotated[StringCheckGrader | TextSimilarityGrader | PythonGrader | ScoreModelGrader,
                      Field(discriminator="type")]


class MultiGrader(BaseModel):
    """Sub-graders by name, and ``calculate_output``: a formula over their scores (``+ - * /
    ^``, ``min max abs floor ceil exp sqrt log``)."""

    model_config = _STRICT
    type: Literal["multi"]
    name: str
    graders: dict[str, SubGrader] = Field(min_length=1)
    """Sub-graders by the name the formula calls them (OpenAI's guide); one grader alone (the
    ``openai`` package's type) is taken under its own ``name``."""
    calculate_output: str = Field(min_length=1, max_length=2000)

    @field_validator("graders", mode="before")
    @classmethod
    def _one_grader_alone(cls, value: Any) -> Any:
        if isinstance(value, dict) and isinstance(value.get("type"), str):
            return {str(value.get("name") or value["type"]): value}
        return value


Grader = Annotated[StringCheckGrader | TextSimilarityGrader | PythonGrader | ScoreModelGrader
                   | MultiGrader, Field(discriminator="type")]

class GraderValidateRequest(BaseModel):
    """The body of ``POST /v1/fine_tuning/alpha/graders/validate``."""

    model_config = _STRICT
    grader: Grader


class GraderRunRequest(BaseModel):
    """The body of ``POST /v1/fine_tuning/alpha/graders/run``: the grader, the model's
    answer (``sample.*``), the row of data (``item.*``)."""

    model_config = _STRICT
    grader: Grader
    model_sample: str
    item: dict[str, Any] = Field(default_factory=dict)


def judge_models(grader: Any) -> list[str]:
    """The models a grader's ``score_model`` graders ask (itself, or a ``multi``'s
    sub-graders), each once, in order."""
    subs = grader.graders.values() if isinstance(grader, MultiGrader) else (grader,)
    return list(dict.fromkeys(sub.model for sub in subs if isinstance(sub, ScoreModelGrader)))


GRADER: TypeAdapter[Any] = TypeAdapter(Grader)
"""Validates a grader's JSON (``GRADER.validate_python(body["grader"])``)."""
