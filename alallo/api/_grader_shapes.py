"""The shapes of OpenAI's grader endpoints (``/v1/fine_tuning/alpha/graders/run`` and
``/validate``, issue 34), as ``openai-python``'s ``types/fine_tuning/alpha/`` reads them."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

__all__ = ["GraderRun", "GraderRunErrors", "GraderRunMetadata", "GraderValidated"]


class GraderRunErrors(TypedDict, total=False):
    """Which of the grader's parts failed (each scores 0), and their details."""

    formula_parse_error: bool
    invalid_variable_error: bool
    model_grader_parse_error: bool
    model_grader_refusal_error: bool
    model_grader_server_error: bool
    model_grader_server_error_details: str
    other_error: bool
    python_grader_runtime_error: bool
    python_grader_runtime_error_details: str
    python_grader_server_error: bool
    sample_parse_error: bool
    truncated_observation_error: bool
    unresponsive_reward_error: bool


class GraderRunMetadata(TypedDict):
    """The grader's name and type, its errors, seconds taken, each (sub-)grader's score."""

    name: str
    type: str
    errors: GraderRunErrors
    execution_time: float
    scores: dict[str, float]
    sampled_model_name: str | None
    token_usage: int | None


class GraderRun(TypedDict):
    """The answer to ``POST /v1/fine_tuning/alpha/graders/run``: the reward (what the trainer
    would use), each sub-grader's, and why a part scored 0."""

    reward: float
    sub_rewards: dict[str, float]
    metadata: GraderRunMetadata
    model_grader_token_usage_per_model: dict[str, Any]


class GraderValidated(TypedDict):
    """The answer to ``POST /v1/fine_tuning/alpha/graders/validate``: the grader as it runs."""

    grader: dict[str, Any]
