"""``POST /v1/chat/completions`` and ``POST /v1/completions``: OpenAI's shapes, for the
account's fine-tuned models and the base models (:mod:`alallo.runtime._completions`).

Without ``stream`` the answer is one JSON object (:class:`alallo.api.ChatCompletion`,
:class:`alallo.api.TextCompletion`). With ``stream: true`` it is OpenAI's stream: SSE
``data:`` lines, each a ``chat.completion.chunk`` (or a ``text_completion`` piece), the
first with the assistant's role, the last with the ``finish_reason``; then, when
``stream_options.include_usage``, a chunk with no choices and the ``usage``; then
``data: [DONE]``. A request the model refuses is refused before the stream starts (a 4xx);
an error part way is sent as ``data: {"error": {...}}`` and ends the stream, as OpenAI does.
A client that goes away cancels the generation.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from alallo import ApiError
from alallo.api import ChatCompletion, TextCompletion
from alallo.runtime import Completion

from ._auth import account_of, runtime_of
from ._body import json_object
from ._errors import error_type

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
    completion = await runtime_of(request).completions.start(account, body, chat=chat)
    if completion.request.stream:
        return StreamingResponse(_stream(completion, chat), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache",
                                          "X-Accel-Buffering": "no"})
    text = await completion.text()
    return JSONResponse(_whole(completion, text, chat))


def _whole(completion: Completion, text: str, chat: bool) -> ChatCompletion | TextCompletion:
    assert completion.usage is not None
    finish: Literal["stop", "length"] = "length" if completion.finish_reason == "length" \
        else "stop"
    if chat:
        answer: ChatCompletion = {
            "id": completion.id, "object": "chat.completion", "created": completion.created,
            "model": completion.model, "usage": completion.usage,
            "choices": [{"index": 0, "finish_reason": finish, "logprobs": None,
                         "message": {"role": "assistant", "content": text}}]}
        return answer
    continuation: TextCompletion = {
        "id": completion.id, "object": "text_completion", "created": completion.created,
        "model": completion.model, "usage": completion.usage,
        "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None}]}
    return continuation


async def _stream(completion: Completion, chat: bool) -> AsyncIterator[str]:
    def chunk(choice: dict[str, Any] | None, **extra: Any) -> str:
        data = {"id": completion.id,
                "object": "chat.completion.chunk" if chat else "text_completion",
                "created": completion.created, "model": completion.model,
                "choices": [] if choice is None else [{"index": 0, "logprobs": None, **choice}],
                **extra}
        return f"data: {json.dumps(data)}\n\n"

    if chat:
        yield chunk({"delta": {"role": "assistant", "content": ""}, "finish_reason": None})
    try:
        async for piece in completion.pieces():
            yield chunk({"delta": {"content": piece}, "finish_reason": None} if chat
                        else {"text": piece, "finish_reason": None})
    except ApiError as exc:
        error = {"message": exc.message, "type": error_type(exc.status_code),
                 "param": exc.param, "code": exc.code}
        yield f"data: {json.dumps({'error': error})}\n\n"
        return
    finish = "length" if completion.finish_reason == "length" else "stop"
    yield chunk({"delta": {}, "finish_reason": finish} if chat
                else {"text": "", "finish_reason": finish})
    if completion.request.include_usage:
        yield chunk(None, usage=completion.usage)
    yield "data: [DONE]\n\n"
