"""The answers of ``POST /v1/chat/completions`` and ``POST /v1/completions``: OpenAI's
shapes, so that the ``openai`` SDK reads them as it reads OpenAI's (issue 17).

A streamed answer sends the same objects as ``chat.completion.chunk`` (each choice with a
``delta`` instead of a ``message``) and ``text_completion`` chunks, as SSE ``data:`` lines
ending in ``data: [DONE]`` (docs/api.md).
"""

# No ``from __future__ import annotations``: see :mod:`alallo.api._shapes`.
from typing import Literal, NotRequired

from typing_extensions import TypedDict

from ._shapes import ErrorDetail, document

__all__ = ["AssistantMessage", "ChatChoice", "ChatChunkChoice", "ChatCompletion",
           "ChatCompletionChunk", "ChunkDelta", "StreamError",
           "TextChoice", "TextChunkChoice", "TextCompletion", "TextCompletionChunk", "Usage"]


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


class ChunkDelta(TypedDict):
    """What a chunk adds to the answer: the role (first chunk), then pieces of the text."""

    role: NotRequired[Literal["assistant"]]
    content: NotRequired[str]


class ChatChunkChoice(TypedDict):
    """The one choice of a ``chat.completion.chunk``."""

    index: int
    delta: ChunkDelta
    finish_reason: Literal["stop", "length"] | None
    """None until the last chunk of the text."""
    logprobs: None


class ChatCompletionChunk(TypedDict):
    """One ``data:`` item of a streamed chat completion (OpenAI's)."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChatChunkChoice]
    """One choice; none in the ``usage`` chunk."""
    usage: NotRequired[Usage]
    """Only in the chunk after the last choice, with ``stream_options.include_usage``."""


class TextChunkChoice(TypedDict):
    """The one choice of a streamed ``text_completion`` piece."""

    index: int
    text: str
    finish_reason: Literal["stop", "length"] | None
    logprobs: None


class TextCompletionChunk(TypedDict):
    """One ``data:`` item of a streamed text completion (OpenAI's)."""

    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[TextChunkChoice]
    usage: NotRequired[Usage]
    """As in :class:`ChatCompletionChunk`."""


class StreamError(TypedDict):
    """The last ``data:`` item of a completion stream that failed part way (then no
    ``[DONE]``)."""

    error: ErrorDetail


document(*(value for value in list(globals().values())
           if isinstance(value, type) and value.__module__ == __name__))
