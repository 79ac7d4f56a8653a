"""A request answered by the transformers engine (:mod:`alallo.serving._transformers`), in
OpenAI's answer shapes: one JSON object, or its stream of SSE ``data:`` lines.

Without ``stream`` the answer is one ``chat.completion`` (or ``text_completion``) with its
``n`` choices. With ``stream: true`` it is OpenAI's stream: chunks, each choice's first with
the assistant's role, its last with its ``finish_reason``; then, when
``stream_options.include_usage``, a chunk with no choices and the ``usage``; then ``data:
[DONE]``. An error part way is sent as ``data: {"error": {...}}`` and ends the stream, as
OpenAI does. The worker generates the choices one after the other. Log-probabilities come in
OpenAI's two shapes: chat's ``{"content": [{"token", "logprob", "bytes", "top_logprobs"}]}``,
completions' ``{"tokens", "token_logprobs", "top_logprobs", "text_offset"}``.
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
        """The last choice's (``finish_reasons`` has each one's, by index)."""
        self.finish_reasons: dict[int, str] = {}
        self.usage: api.Usage | None = None
        self._chat = isinstance(request, ChatRequest)
        self._answers = answers
        self._first: dict[str, Any] | None = first
        self._charge = charge

    @property
    def stream(self) -> bool:
        """Whether the caller asked for a stream."""
        return self.request.stream

    async def pieces(self) -> AsyncIterator[tuple[int, str, list[dict[str, Any]] | None]]:
        """The generated text, piece by piece: ``(choice index, text, its tokens'
        log-probabilities or None)``; closes the request on the way out.

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
                    piece, done = self._more(message)
                    yield piece
                    if done is not None:
                        await self._finish(done)
                        return
                elif "done" in message:
                    await self._finish(message["done"])
                    return

    def _more(self, message: dict[str, Any],
              ) -> tuple[tuple[int, str, list[dict[str, Any]] | None], dict[str, Any] | None]:
        """``message``'s piece and the pieces of the same choice already waiting behind it,
        as one (a reader slower than the model gets fewer, longer pieces), and the ``done``
        if it came among them (a piece of the next choice waits for the next call)."""
        index, texts = message.get("index", 0), [message["text"]]
        logprobs = message.get("logprobs")
        while (waiting := self._waiting()) is not None:
            if isinstance(waiting, Exception):
                raise waiting
            if "done" in waiting:
                return (index, "".join(texts), logprobs), waiting["done"]
            if waiting.get("index", 0) != index:
                self._first = waiting
                break
            texts.append(waiting["text"])
            if logprobs is not None:
                logprobs += waiting.get("logprobs") or []
        return (index, "".join(texts), logprobs), None

    def _waiting(self) -> dict[str, Any] | Exception | None:
        if self._first is not None:
            return None  # a piece of the next choice is held: it goes next
        try:
            return self._answers.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            return None

    async def body(self) -> dict[str, Any]:
        """The whole answer: a ``chat.completion`` or a ``text_completion``.

        Raises:
            InvalidRequest, Unavailable: the worker failed the request.
        """
        texts: dict[int, list[str]] = {}
        tokens: dict[int, list[dict[str, Any]]] = {}
        async for index, text, logprobs in self.pieces():
            texts.setdefault(index, []).append(text)
            if logprobs is not None:
                tokens.setdefault(index, []).extend(logprobs)
        assert self.usage is not None
        common = {"id": self.id, "created": self.created, "model": self.model,
                  "usage": self.usage}
        choices = []
        for index in sorted(self.finish_reasons):
            text = "".join(texts.get(index, []))
            logprobs = self._logprobs(tokens.get(index, []), 0) if self._wants_logprobs else None
            choices.append({"index": index, "finish_reason": self._reason(index),
                            "logprobs": logprobs,
                            **({"message": {"role": "assistant", "content": text}}
                               if self._chat else {"text": text})})
        if self._chat:
            chat: api.ChatCompletion = {
                **common, "object": "chat.completion",  # type: ignore[typeddict-item]
                "choices": choices}
            return dict(chat)
        continuation: api.TextCompletion = {
            **common, "object": "text_completion",  # type: ignore[typeddict-item]
            "choices": choices}
        return dict(continuation)

    async def events(self) -> AsyncIterator[bytes]:
        """The answer as OpenAI's stream, ``data: [DONE]`` last; an error part way is an
        ``error`` event that ends it. Closing it early cancels the request."""
        started: set[int] = set()
        offsets: dict[int, int] = {}
        try:
            async for index, text, logprobs in self.pieces():
                if index not in started:
                    started.add(index)
                    if self._chat:
                        yield self._chunk(index, {"delta": {"role": "assistant", "content": ""},
                                                  "finish_reason": None})
                extra = {"logprobs": self._logprobs(logprobs, offsets.get(index, 0))} \
                    if logprobs is not None else {}
                offsets[index] = offsets.get(index, 0) + len(text)
                yield self._chunk(index, {"delta": {"content": text}, "finish_reason": None}
                                  if self._chat else {"text": text, "finish_reason": None},
                                  **extra)
        except ApiError as exc:
            yield error_chunk(exc)
            return
        for index in sorted(self.finish_reasons):  # known once the last choice has ended
            if index not in started and self._chat:
                yield self._chunk(index, {"delta": {"role": "assistant", "content": ""},
                                          "finish_reason": None})
            finish = self._reason(index)
            yield self._chunk(index, {"delta": {}, "finish_reason": finish} if self._chat
                              else {"text": "", "finish_reason": finish})
        if self.request.include_usage:
            yield self._chunk(None, None, usage=self.usage)
        yield b"data: [DONE]\n\n"

    @property
    def _wants_logprobs(self) -> bool:
        return bool(self.request.logprobs) if self._chat else self.request.logprobs is not None

    def _logprobs(self, tokens: list[dict[str, Any]] | None, offset: int) -> dict[str, Any]:
        """The tokens' log-probabilities (the worker's, in chat's shape) in OpenAI's shape for
        this endpoint; ``offset``: where the first token's text starts in the choice's text."""
        tokens = tokens or []
        if self._chat:
            return {"content": tokens, "refusal": None}
        starts, pending = [], b""
        for token in tokens:  # a character's offset; a token inside one shares the next's
            starts.append(offset)
            pending += bytes(token["bytes"])
            text = pending.decode("utf-8", errors="ignore")
            if text:
                offset, pending = offset + len(text), b""
        return {"tokens": [t["token"] for t in tokens],
                "token_logprobs": [t["logprob"] for t in tokens],
                "top_logprobs": [{**{top["token"]: top["logprob"] for top in t["top_logprobs"]},
                                  t["token"]: t["logprob"]} for t in tokens],  # the chosen too
                "text_offset": starts}

    def _reason(self, index: int) -> str:
        return "length" if self.finish_reasons.get(index) == "length" else "stop"

    def _chunk(self, index: int | None, choice: dict[str, Any] | None, **extra: Any) -> bytes:
        logprobs = extra.pop("logprobs", None)
        data = {"id": self.id,
                "object": "chat.completion.chunk" if self._chat else "text_completion",
                "created": self.created, "model": self.model,
                "choices": [] if choice is None else [{"index": index, "logprobs": logprobs,
                                                       **choice}],
                **extra}
        return f"data: {json.dumps(data)}\n\n".encode()

    async def _finish(self, done: dict[str, Any]) -> None:
        choices = done.get("choices") or [{"index": 0, "finish_reason": done["finish_reason"]}]
        self.finish_reasons = {int(c["index"]): str(c["finish_reason"]) for c in choices}
        self.finish_reason = self.finish_reasons[max(self.finish_reasons)]
        prompt, completion = int(done["prompt_tokens"]), int(done["completion_tokens"])
        self.usage = {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion}
        await self._charge(self.id, prompt + completion)

    async def aclose(self) -> None:
        """Cancel the request if it is still under way."""
        await self._answers.aclose()
