"""The bodies of ``POST /v1/chat/completions`` and ``POST /v1/completions``, as OpenAI's
references give them (issue 33: every parameter that changes an answer is honoured).

Each request is checked as a job spec is (pydantic, strict: ``true`` is no number, no ``NaN``,
no field it does not know: a 400 naming the field). The vLLM engine honours every field here;
the transformers engine honours ``max_tokens``, ``temperature``, ``top_p``, ``stop`` and
``seed``, and :func:`transformers_refusal` names the first other field a request sets to a
value that asks for something, so that a model served by transformers answers 400 naming it
instead of dropping it. OpenAI's parameters that no engine honours are
:mod:`alallo.serving._openai_params`'s.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, WithJsonSchema
from pydantic import field_validator
from pydantic_core import PydanticCustomError

from .._errors import InvalidRequest
from ._openai_params import ChatOptions, TextOptions

__all__ = ["ChatMessage", "ChatRequest", "TextRequest", "transformers_refusal"]

_REQUEST = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
_PART = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)
"""Tool definitions and tool calls are passed on whole: their own fields are OpenAI's."""


def _at_most_4_stops(schema: Any) -> None:
    schema["anyOf"][1]["maxItems"] = 4  # checked by _Sampling.stops, as OpenAI does


class TextPart(BaseModel):
    """A part of a message's ``content`` given as a list: ``{"type": "text", "text": ...}``."""

    model_config = _REQUEST
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    """One message of a conversation: ``content`` a string or a list of text parts (None for
    an assistant's turn that only called tools); ``tool_calls`` an assistant's calls, and
    ``tool_call_id`` the call a ``tool`` message answers."""

    model_config = _REQUEST
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    def as_template_input(self) -> dict[str, str]:
        """``{"role", "content"}`` for a chat template (``developer`` read as ``system``)."""
        content = self.content if isinstance(self.content, str) else "".join(
            part.text for part in self.content or [])
        return {"role": "system" if self.role == "developer" else self.role,
                "content": content}


class FunctionDefinition(BaseModel):
    """A tool's function: ``name``, and the JSON Schema of its ``parameters``."""

    model_config = _PART
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(BaseModel):
    """One tool the model may call: ``{"type": "function", "function": {...}}``."""

    model_config = _REQUEST
    type: Literal["function"]
    function: FunctionDefinition


class JsonSchemaFormat(BaseModel):
    """``response_format.json_schema``: the schema every answer must satisfy."""

    model_config = _REQUEST
    name: str = Field(min_length=1, max_length=64)
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    """``{"type": "text"}``, ``{"type": "json_object"}`` or ``{"type": "json_schema",
    "json_schema": {...}}`` (enforced by structured output: vLLM's xgrammar)."""

    model_config = _REQUEST
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class _Sampling(BaseModel):
    model_config = _REQUEST
    model: str = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    stop: str | list[str] | None = Field(default=None, json_schema_extra=_at_most_4_stops)
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    """For sampling; a 64-bit integer."""
    n: int = Field(default=1, ge=1, le=128)
    """How many answers (choices)."""
    presence_penalty: float = Field(default=0.0, ge=-2, le=2)
    frequency_penalty: float = Field(default=0.0, ge=-2, le=2)
    logit_bias: dict[str, float] | None = None
    """Token id (a string, as JSON keys are) → bias added to its logit, -100..100."""
    stream: bool = False
    stream_options: dict[str, bool] | None = None

    @property
    def stops(self) -> list[str]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if len(stops) > 4:
            raise InvalidRequest("stop holds at most 4 sequences", param="stop")
        return stops

    @property
    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))

    def check_logit_bias(self) -> None:
        """Raises InvalidRequest: a key that is no token id, or a bias outside -100..100."""
        for key, bias in (self.logit_bias or {}).items():
            if not key.isdigit():
                raise InvalidRequest(f"logit_bias: {json.dumps(key)} is no token id",
                                     param="logit_bias")
            if not -100 <= bias <= 100:
                raise InvalidRequest(f"logit_bias: the bias of token {key} must be within "
                                     f"-100 and 100, got {bias}", param="logit_bias")


class ChatRequest(ChatOptions, _Sampling):
    """The body of ``POST /v1/chat/completions`` (OpenAI's)."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    tools: list[Tool] | None = None
    tool_choice: Annotated[Any, WithJsonSchema({"anyOf": [
        {"enum": ["none", "auto", "required"]},
        {"type": "object", "required": ["type", "function"], "properties": {
            "type": {"const": "function"},
            "function": {"type": "object", "required": ["name"],
                         "properties": {"name": {"type": "string"}}}}},
        {"type": "null"}]})] = None
    """``"none"``, ``"auto"``, ``"required"`` or ``{"type": "function", "function":
    {"name": ...}}`` (checked by :meth:`_one_tool_choice`)."""
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None

    @field_validator("top_logprobs")
    @classmethod
    def _with_logprobs(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value and not info.data.get("logprobs"):  # OpenAI's rule
            raise PydanticCustomError("logprobs_needed", "top_logprobs needs logprobs: true")
        return value

    @field_validator("tool_choice")
    @classmethod
    def _one_tool_choice(cls, value: Any) -> Any:
        named = isinstance(value, dict) and value.get("type") == "function" and isinstance(
            value.get("function"), dict) and isinstance(value["function"].get("name"), str)
        if value is None or named or value in ("none", "auto", "required"):
            return value
        raise ValueError('should be "none", "auto", "required" or {"type": "function", '
                         '"function": {"name": "..."}}')

    @property
    def asked_tokens(self) -> tuple[str, int | None]:
        """The field that limits the answer's tokens, and its value."""
        if self.max_completion_tokens is not None:
            return "max_completion_tokens", self.max_completion_tokens
        return "max_tokens", self.max_tokens


class TextRequest(TextOptions, _Sampling):
    """The body of ``POST /v1/completions`` (OpenAI's): one prompt or a list of them."""

    prompt: str | list[str] = Field(min_length=1)
    logprobs: int | None = Field(default=None, ge=0, le=5)
    echo: bool = False

    @property
    def prompts(self) -> list[str]:
        """The prompts, each not empty. Raises InvalidRequest naming ``prompt``."""
        prompts = [self.prompt] if isinstance(self.prompt, str) else self.prompt
        for index, prompt in enumerate(prompts):
            if not prompt:  # no token to continue from
                where = "" if isinstance(self.prompt, str) else f"[{index}]"
                raise InvalidRequest(f"prompt{where} is empty: give the text to continue",
                                     param="prompt")
        return prompts

    @property
    def asked_tokens(self) -> tuple[str, int | None]:
        """The field that limits the answer's tokens, and its value (OpenAI's default 16)."""
        return "max_tokens", self.max_tokens if self.max_tokens is not None else 16


_TRANSFORMERS_TAKES: dict[str, tuple[Any, ...]] = {
    "tools": (None, []),
    "tool_choice": (None, "none"), "parallel_tool_calls": (None, True, False), "echo": (False,),
    "response_format": (None, {"type": "text"})}
"""The fields the transformers engine does not honour, with the values that ask for nothing."""


def transformers_refusal(request: ChatRequest | TextRequest) -> str | None:
    """The first field of ``request`` that the transformers engine cannot honour, or None.

    A field left out, or sent with a value that asks for nothing (``n: 1``, ``tools: []``),
    is no refusal; nor is a list of one prompt.
    """
    if isinstance(request, TextRequest) and len(request.prompts) > 1:
        return "prompt"
    sent = request.model_dump(include=request.model_fields_set & set(_TRANSFORMERS_TAKES),
                              exclude_none=True)
    for name, value in sent.items():
        if value not in _TRANSFORMERS_TAKES[name]:
            return name
    return None
