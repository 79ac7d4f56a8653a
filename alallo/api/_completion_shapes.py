"""The answers of ``POST /v1/chat/completions`` and ``POST /v1/completions``: OpenAI's
shapes, so that the ``openai`` SDK reads them as it reads OpenAI's (issue 17).

A streamed answer sends the same objects as ``chat.completion.chunk`` (each choice with a
``delta`` instead of a ``message``) and ``text_completion`` chunks, as SSE ``data:`` lines
ending in ``data: [DONE]`` (docs/api.md).
"""

# No ``from __future__ import annotations``: see :mod:`alallo.api._shapes`.
from typing import Literal

from typing_extensions import TypedDict

__all__ = ["AssistantMessage", "ChatChoice", "ChatCompletion", "TextChoice", "TextCompletion",
           "Usage"]


class Usage(TypedDict):
    """Tokens of one request, as the model's tokenizer counts them."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class AssistantMessage(TypedDict):
    """The model's answer to a conversation."""

    role: Literal["assistant"]
    content: str


class ChatChoice(TypedDict):
    """The one answer of a chat completion (``n`` is always 1 here)."""

    index: int
    message: AssistantMessage
    finish_reason: Literal["stop", "length"]
    """``stop``: the model ended, or a stop sequence came; ``length``: ``max_tokens`` ran out."""
    logprobs: None


class ChatCompletion(TypedDict):
    """The answer to ``POST /v1/chat/completions`` without ``stream``."""

    id: str
    """``chatcmpl-`` and 24 hex digits."""
    object: Literal["chat.completion"]
    created: int
    """Unix time (s)."""
    model: str
    choices: list[ChatChoice]
    usage: Usage


class TextChoice(TypedDict):
    """The one continuation of a text completion."""

    index: int
    text: str
    finish_reason: Literal["stop", "length"]
    logprobs: None


class TextCompletion(TypedDict):
    """The answer to ``POST /v1/completions`` without ``stream``."""

    id: str
    """``cmpl-`` and 24 hex digits."""
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[TextChoice]
    usage: Usage
