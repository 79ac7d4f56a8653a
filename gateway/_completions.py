"""``POST /v1/chat/completions`` and ``POST /v1/completions``: OpenAI's shapes, for the
account's fine-tuned models and the base models (:mod:`alallo.serving`).

Without ``stream`` the answer is one JSON object (:class:`alallo.api.ChatCompletion`,
:class:`alallo.api.TextCompletion`). With ``stream: true`` it is OpenAI's stream: SSE
``data:`` lines, each a ``chat.completion.chunk`` (or a ``text_completion`` piece); then,
when ``stream_options.include_usage``, a chunk with no choices and the ``usage``; then
``data: [DONE]``. A request the model refuses is refused before the stream starts (a 4xx);
an error part way is sent as ``data: {"error": {...}}`` and ends the stream, as OpenAI does.
A client that goes away cancels the generation in the engine.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from alallo.serving import Answer

from ._auth import account_of, runtime_of
from ._body import json_object

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
        return StreamingResponse(_events(answer), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache",
                                          "X-Accel-Buffering": "no"})
    try:
        return JSONResponse(await answer.body())
    finally:
        await answer.aclose()


async def _events(answer: Answer) -> AsyncIterator[bytes]:
    try:
        async for data in answer.events():
            yield data
    finally:
        await answer.aclose()
