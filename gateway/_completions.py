"""``POST /v1/chat/completions`` and ``POST /v1/completions``: OpenAI's shapes, for the
account's fine-tuned models and the base models (:mod:`alallo.serving`).

Without ``stream`` the answer is one JSON object (:class:`alallo.api.ChatCompletion`,
:class:`alallo.api.TextCompletion`). With ``stream: true`` it is OpenAI's stream: SSE
``data:`` lines, each a ``chat.completion.chunk`` (or a ``text_completion`` piece); then,
when ``stream_options.include_usage``, a chunk with no choices and the ``usage``; then
``data: [DONE]``. A request the model refuses is refused before the stream starts (a 4xx);
an error part way is sent as ``data: {"error": {...}}`` and ends the stream, as OpenAI does.
A client that goes away cancels the generation in the engine. The stream's chunks are written
straight to the connection (:class:`gateway._event_stream.EventStreamResponse`, through
:class:`gateway._chunks.ChunkWriter`): a vLLM engine's chunks go on as they come, with no
ASGI round per chunk, and a silence of 15 s (a long prompt's first token) gets a
``: ping`` comment, which SSE readers skip.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import trio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from alallo.serving import Answer

from ._auth import account_of, runtime_of
from ._body import json_object
from ._event_stream import EventStreamResponse

__all__ = ["chat_completions", "completions"]


async def chat_completions(request: Request) -> Response:
    """``POST /v1/chat/completions`` → a ``chat.completion``, or its chunks as SSE."""
    return await _complete(request, chat=True)


async def completions(request: Request) -> Response:
    """``POST /v1/completions`` → a ``text_completion``, or its pieces as SSE."""
    return await _complete(request, chat=False)


async def _complete(request: Request, *, chat: bool) -> Response:
    account = await account_of(request)
    body = await json_object(request)
    answer = await runtime_of(request).completions.start(account, body, chat=chat)
    if answer.stream:
        # Never "stopping": OpenAI's stream has no shutdown event; a server that stops cuts
        # it at its deadline, and the client sees no [DONE].
        return EventStreamResponse(lambda: _events(answer), stopping=trio.Event())
    try:
        return JSONResponse(await answer.body())
    finally:
        await answer.aclose()


async def _events(answer: Answer) -> AsyncGenerator[bytes, None]:
    try:
        async for data in answer.events():
            yield data
    finally:
        await answer.aclose()
