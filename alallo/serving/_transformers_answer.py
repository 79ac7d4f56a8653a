"""A request answered by the transformers engine (:mod:`alallo.serving._transformers`), in
OpenAI's answer shapes: one JSON object, or its stream of SSE ``data:`` lines.

Without ``stream`` the answer is one ``chat.completion`` (or ``text_completion``). With
``stream: true`` it is OpenAI's stream: chunks, the first with the assistant's role, the last
with the ``finish_reason``; then, when ``stream_options.include_usage``, a chunk with no
choices and the ``usage``; then ``data: [DONE]``. An error part way is sent as
``data: {"error": {...}}`` and ends the stream, as OpenAI does.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import trio

from .. import api
from .._errors import ApiError
from ._requests import ChatRequest, TextRequest

__all__ = ["TransformersAnswer", "error_chunk"]


def error_chunk(exc: ApiError) -> bytes:
    """An error part way through a stream, as OpenAI sends it: ``data: {"error": {...}}``."""
    error = {"message": exc.message,
             "type": "server_error" if exc.status_code >= 500 else "invalid_request_error",
             "param": exc.param, "code": exc.code}
    return f"data: {json.dumps({'error': error})}\n\n".encode()


class TransformersAnswer:
    """One request under way on a transformers worker: its text as it comes, then
    ``finish_reason`` and ``usage``; charged through ``charge(id, tokens)`` at the end.

    Args:
        request: the checked request.
        completion_id: ``chatcmpl-…`` or ``cmpl-…``.
        answers: the worker's answers (:meth:`InferenceWorkers.submit`), its first one read.
        first: that first answer.
        charge: ``await charge(completion_id, total_tokens)``.
    """

    engine = "transformers"

    def __init__(self, request: ChatRequest | TextRequest, completion_id: str,
                 answers: trio.MemoryReceiveChannel[dict[str, Any] | Exception],
                 first: dict[str, Any], charge: Callable[[str, int], Awaitable[None]]) -> None:
        self.request = request
        self.id = completion_id
        self.created = int(time.time())
        self.model = request.model
        self.finish_reason: str | None = None
        self.usage: api.Usage | None = None
        self._chat = isinstance(request, ChatRequest)
        self._answers = answers
        self._first: dict[str, Any] | None = first
        self._charge = charge

    @property
    def stream(self) -> bool:
        """Whether the caller asked for a stream."""
        return self.request.stream

    async def pieces(self) -> AsyncIterator[str]:
        """The generated text, piece by piece; closes the request on the way out.

        Raises:
            InvalidRequest, Unavailable: the worker failed the request part way.
        """
        async with self._answers:
            while True:
                if self._first is not None:
                    message, self._first = self._first, None
                else:
                    try:
                        item = await self._answers.receive()
                    except trio.EndOfChannel:
                        return
                    if isinstance(item, Exception):
                        raise item
                    message = item
                if "text" in message:
                    text, done = self._more(message["text"])
                    yield text
                    if done is not None:
                        await self._finish(done)
                        return
                elif "done" in message:
                    await self._finish(message["done"])
                    return

    def _more(self, text: str) -> tuple[str, dict[str, Any] | None]:
        """``text`` and the pieces already waiting behind it, as one (a reader slower than
        the model gets fewer, longer pieces), and the ``done`` if it came among them."""
        pieces = [text]
        while True:
            try:
                item = self._answers.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                return "".join(pieces), None
            if isinstance(item, Exception):
                raise item
            if "done" in item:
                return "".join(pieces), item["done"]
            pieces.append(item["text"])

    async def body(self) -> dict[str, Any]:
        """The whole answer: a ``chat.completion`` or a ``text_completion``.

        Raises:
            InvalidRequest, Unavailable: the worker failed the request.
        """
        text = "".join([piece async for piece in self.pieces()])
        assert self.usage is not None
        common = {"id": self.id, "created": self.created, "model": self.model,
                  "usage": self.usage}
        if self._chat:
            chat: api.ChatCompletion = {
                **common, "object": "chat.completion",  # type: ignore[typeddict-item]
                "choices": [{"index": 0, "finish_reason": self._finish_reason,
                             "logprobs": None,
                             "message": {"role": "assistant", "content": text}}]}
            return dict(chat)
        continuation: api.TextCompletion = {
            **common, "object": "text_completion",  # type: ignore[typeddict-item]
            "choices": [{"index": 0, "text": text, "finish_reason": self._finish_reason,
                         "logprobs": None}]}
        return dict(continuation)

    async def events(self) -> AsyncIterator[bytes]:
        """The answer as OpenAI's stream, ``data: [DONE]`` last; an error part way is an
        ``error`` event that ends it. Closing it early cancels the request."""
        if self._chat:
            yield self._chunk({"delta": {"role": "assistant", "content": ""},
                               "finish_reason": None})
        try:
            async for piece in self.pieces():
                yield self._chunk({"delta": {"content": piece}, "finish_reason": None}
                                  if self._chat else {"text": piece, "finish_reason": None})
        except ApiError as exc:
            yield error_chunk(exc)
            return
        finish = self._finish_reason
        yield self._chunk({"delta": {}, "finish_reason": finish} if self._chat
                          else {"text": "", "finish_reason": finish})
        if self.request.include_usage:
            yield self._chunk(None, usage=self.usage)
        yield b"data: [DONE]\n\n"

    @property
    def _finish_reason(self) -> str:
        return "length" if self.finish_reason == "length" else "stop"

    def _chunk(self, choice: dict[str, Any] | None, **extra: Any) -> bytes:
        data = {"id": self.id,
                "object": "chat.completion.chunk" if self._chat else "text_completion",
                "created": self.created, "model": self.model,
                "choices": [] if choice is None else [{"index": 0, "logprobs": None, **choice}],
                **extra}
        return f"data: {json.dumps(data)}\n\n".encode()

    async def _finish(self, done: dict[str, Any]) -> None:
        self.finish_reason = str(done["finish_reason"])
        prompt, completion = int(done["prompt_tokens"]), int(done["completion_tokens"])
        self.usage = {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion}
        await self._charge(self.id, prompt + completion)

    async def aclose(self) -> None:
        """Cancel the request if it is still under way."""
        await self._answers.aclose()
