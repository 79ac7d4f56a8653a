"""A request answered by a vLLM engine (:mod:`alallo.serving._vllm`): vLLM's own OpenAI
answer, passed on.

vLLM answers in OpenAI's shapes already, under the model id the user asked for (adapters are
loaded under it), so the answer goes on as it came: a whole JSON object, or the stream's bytes
as they arrive, not parsed line by line (a reader slower than the engine gets several chunks
in one write). Only the usage is read, to charge it: a stream is always asked for its usage
chunk, which is dropped again when the user did not ask for it
(``stream_options.include_usage``). Closing the stream early closes vLLM's connection, and
vLLM aborts the request (its slot in the batch is free for the next).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import trio

from .._errors import Unavailable
from ._requests import ChatRequest, TextRequest
from ._transformers_answer import error_chunk
from ._vllm import Engine, VllmEngines

__all__ = ["VllmAnswer"]

_USAGE = b'"usage":{'


class VllmAnswer:
    """vLLM's answer to one request (see the module).

    Args:
        request: the checked request.
        engines: the engines (told when the request ends, or when the engine stopped).
        engine: the engine that answers.
        name: the model name the request asked for.
        response: vLLM's answer, status 200, its body not read yet.
        charge: ``await charge(completion_id, total_tokens)``.
    """

    engine = "vllm"

    def __init__(self, request: ChatRequest | TextRequest, engines: VllmEngines,
                 engine: Engine, name: str, response: httpx.Response,
                 charge: Callable[[str, int], Awaitable[None]]) -> None:
        self.request = request
        self._engines = engines
        self._engine = engine
        self._name = name
        self._response = response
        self._charge = charge
        self._ended = False

    @property
    def stream(self) -> bool:
        """Whether the caller asked for a stream."""
        return self.request.stream

    async def body(self) -> dict[str, Any]:
        """The whole answer (a ``chat.completion`` or a ``text_completion``), charged.

        Raises:
            Unavailable: the engine stopped before it answered.
        """
        try:
            content = await self._response.aread()
        except httpx.TransportError as exc:
            await self._end(crashed=True)
            raise Unavailable("the model's engine stopped; ask again") from exc
        answer: dict[str, Any] = json.loads(content)
        await self._end({**(answer.get("usage") or {}), "id": answer.get("id")})
        return answer

    async def events(self) -> AsyncIterator[bytes]:
        """The stream's bytes as vLLM sends them, its usage chunk read (and dropped unless
        asked for); an engine that stops part way ends it with an ``error`` event."""
        keep_usage = self.request.include_usage
        pending = b""
        usage: dict[str, Any] = {}
        try:
            async for data in self._response.aiter_raw():
                if _USAGE not in data and not pending:
                    yield data
                    continue
                pending += data  # the usage chunk, whole once its blank line has come
                events = pending.split(b"\n\n")
                pending = events.pop()
                out = []
                for event in events:
                    if _USAGE in event and event.startswith(b"data: {"):
                        chunk = json.loads(event[6:])
                        usage = {**(chunk.get("usage") or {}), "id": chunk.get("id")}
                        if not keep_usage:
                            continue
                    out.append(event + b"\n\n")
                if out:
                    yield b"".join(out)
            if pending:
                yield pending
        except httpx.TransportError:
            await self._end(crashed=True)
            yield error_chunk(Unavailable("the model's engine stopped; ask again"))
            return
        finally:
            await self._end(usage)

    async def _end(self, usage: dict[str, Any] | None = None, *, crashed: bool = False) -> None:
        """Tell the engines, close vLLM's answer and charge ``usage`` (with the answer's
        ``id``), once; shielded, as it runs when a stream's reader went away too."""
        if self._ended:
            return
        self._ended = True
        usage = usage or {}
        self._engines.done(self._engine, self._name, int(usage.get("completion_tokens") or 0))
        if crashed:
            self._engines.crashed(self._engine)
        with trio.CancelScope(shield=True):
            await self._response.aclose()
            tokens = int(usage.get("total_tokens") or 0)
            if tokens and usage.get("id"):
                await self._charge(str(usage["id"]), tokens)

    async def aclose(self) -> None:
        """Abort the request if it is still under way."""
        await self._end()
