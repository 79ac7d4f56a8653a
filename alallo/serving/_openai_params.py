"""OpenAI's completion parameters that no engine of alallo's honours: each taken only with
the value that asks for nothing (``audio: null``, ``functions: []``, ``best_of: 1``...), and
refused naming it with any other (issue 32: nothing a user sends is silently ignored; OpenAI's
chat and legacy completions references name them). The parameters one engine honours and the
other does not are the requests' own fields (:mod:`alallo.serving._requests`), checked against
the engine that serves the model (:func:`alallo.serving._requests.transformers_refusal`).

The value that asks for nothing is what OpenAI does when the parameter is left out, so a
request that sends it means what one without it means. A parameter that changes no answer
(``user``, ``safety_identifier``, ``prompt_cache_key``: ids and hints for the provider) is
taken with any string. ``/openapi.json`` states exactly what is taken (each field's schema
is its no-op values), so a client reads there what this server does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, Field, ValidationInfo, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

__all__ = ["HINTS", "ChatOptions", "TextOptions"]


def _same(value: Any, noop: Any) -> bool:
    """``value`` is ``noop`` as JSON reads it (``false`` is no ``0``; ``0.0`` is ``0``)."""
    if isinstance(noop, bool) or isinstance(value, bool):
        return type(value) is type(noop) and value == noop
    if isinstance(noop, int | float):
        return isinstance(value, int | float) and value == noop
    return bool(value == noop)


_NULL = {"type": "null"}


@dataclass(frozen=True)
class _Noop:
    """The values of a field that ask for nothing (none: only ``null`` is taken)."""

    values: tuple[Any, ...]


def _noop(*values: Any) -> Any:
    """A field taken with ``null`` or one of ``values``; its schema says exactly that."""
    schema = {"anyOf": [{"const": value} for value in values] + [_NULL]}
    return Annotated[Any, _Noop(values), WithJsonSchema(schema), Field(default=None)]


_HINT = Annotated[str | None, Field(default=None, max_length=512)]


class _Options(BaseModel):
    @field_validator("*", mode="before")
    @classmethod
    def _asks_for_nothing(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.field_name or ""
        noop = next((m for m in cls.model_fields[name].metadata if isinstance(m, _Noop)), None)
        if noop is None or value is None or any(_same(value, n) for n in noop.values):
            return value
        taken = " or ".join(json.dumps(n) for n in noop.values)
        raise PydanticCustomError(
            "unsupported", "{name} is not supported by this server: leave it out" +
            (f" (or send {taken})" if taken else ""), {"name": name})


_NOT_SUPPORTED = _noop()
_FALSE, _ONE = _noop(False), _noop(1)
_NO_LIST, _NO_OBJECT, _NONE_CHOSEN = _noop([]), _noop({}), _noop("none")
_TEXT_ONLY = _noop(["text"])
_ONE_TIER = _noop("auto", "default")


class ChatOptions(_Options):
    """OpenAI's chat parameters that are taken only when they ask for nothing."""

    functions: _NO_LIST
    function_call: _NONE_CHOSEN
    modalities: _TEXT_ONLY
    store: _FALSE
    metadata: _NO_OBJECT
    service_tier: _ONE_TIER
    audio: _NOT_SUPPORTED
    prediction: _NOT_SUPPORTED
    reasoning_effort: _NOT_SUPPORTED
    web_search_options: _NOT_SUPPORTED
    verbosity: _NOT_SUPPORTED
    user: _HINT
    safety_identifier: _HINT
    prompt_cache_key: _HINT


class TextOptions(_Options):
    """OpenAI's legacy completions parameters that are taken only when they ask for nothing."""

    best_of: _ONE
    suffix: _NOT_SUPPORTED
    user: _HINT


HINTS = frozenset({"user", "safety_identifier", "prompt_cache_key"})
"""Ids and hints for the provider: taken with any string, changing no answer."""
