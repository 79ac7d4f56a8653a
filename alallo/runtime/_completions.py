"""Completions: the account's fine-tuned models and the base models, asked for text in
OpenAI's request shapes (``POST /v1/chat/completions``, ``POST /v1/completions``; issue 17).

:meth:`Completions.start` checks a request (pydantic: a 422 naming the field), finds the
model's files (a fine-tuned model of the account, or a checkpoint model of its own or shared
with it: its LoRA adapter on its base, or its whole weights; a base model of the catalogue or the Hugging Face cache), queues the request on the
model's worker (:mod:`alallo.runtime._inference`) and waits for its first answer, so that a
request the model refuses (a prompt longer than its context, messages to a model with no
chat template) is answered with a 4xx before any byte of a stream. The
:class:`Completion` it returns yields the text as it comes; at the end it holds the finish
reason and the token counts, and the account is charged for them at
``inference_price_per_1m_tokens`` (default 0: nothing).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import trio
from pydantic import BaseModel, ConfigDict, Field

from .. import api
from .._errors import Forbidden, InvalidRequest, NotFound, Unavailable, shown
from ..capacity import TINY_GPT2
from ..settings import Settings
from ..store import Store
from ._fine_tuned import FineTunedModels
from ._inference import InferenceWorkers, ModelFiles
from ._model_ids import parse_model_id
from ._openai_params import ChatOptions, TextOptions
from ._planning import Planning

__all__ = ["ChatRequest", "Completion", "Completions", "TextRequest"]


_REQUEST = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
"""As a job spec's models check what they are sent (no conversion between types: ``true``
is no number; no ``NaN`` or infinite number; no field it does not know: a 4xx naming the
field). OpenAI's parameters that the worker does not honour are taken only with the value
that asks for nothing (:mod:`alallo.runtime._openai_params`)."""


def _at_most_4_stops(schema: Any) -> None:
    schema["anyOf"][1]["maxItems"] = 4  # checked by _Sampling.stops, as OpenAI does


def _one_prompt(schema: Any) -> None:
    """One prompt, not empty: checked by :attr:`TextRequest.text`."""
    schema["anyOf"][0]["minLength"] = 1
    schema["anyOf"][1].update(minItems=1, maxItems=1, items={"type": "string", "minLength": 1})


class TextPart(BaseModel):
    """A part of a message's ``content`` given as a list: ``{"type": "text", "text": ...}``."""

    model_config = _REQUEST
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    """One message of a conversation; ``content`` a string or a list of text parts."""

    model_config = _REQUEST
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart]

    def as_template_input(self) -> dict[str, str]:
        content = self.content if isinstance(self.content, str) else "".join(
            part.text for part in self.content)
        return {"role": "system" if self.role == "developer" else self.role,
                "content": content}


class _Sampling(BaseModel):
    model_config = _REQUEST
    model: str = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    stop: str | list[str] | None = Field(default=None, json_schema_extra=_at_most_4_stops)
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    """For sampling; a 64-bit integer, as torch's generator takes it."""
    n: int = Field(default=1, ge=1, le=1)
    """How many answers: 1 (``Literal[1]`` would take ``true``, which equals 1)."""
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


class ChatRequest(ChatOptions, _Sampling):
    """The body of ``POST /v1/chat/completions`` (OpenAI's; ``n`` must be 1)."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)


class TextRequest(TextOptions, _Sampling):
    """The body of ``POST /v1/completions`` (OpenAI's; one prompt)."""

    prompt: str | list[str] = Field(json_schema_extra=_one_prompt)

    @property
    def text(self) -> str:
        if isinstance(self.prompt, str):
            prompt = self.prompt
        elif len(self.prompt) != 1:
            raise InvalidRequest("prompt must be one string", param="prompt")
        else:
            prompt = self.prompt[0]
        if not prompt:  # no token to continue from (the model's generate() would fail)
            raise InvalidRequest("prompt is empty: give the text to continue", param="prompt")
        return prompt


class Completion:
    """One request under way: its ids, then its text as it comes (:meth:`pieces`), then
    ``finish_reason`` and ``usage`` (``prompt_tokens``, ``completion_tokens``,
    ``total_tokens``)."""

    def __init__(self, request: ChatRequest | TextRequest, completion_id: str,
                 answers: trio.MemoryReceiveChannel[dict[str, Any] | Exception],
                 first: dict[str, Any], charge: Any) -> None:
        self.request = request
        self.id = completion_id
        self.created = int(time.time())
        self.model = request.model
        self.finish_reason: str | None = None
        self.usage: api.Usage | None = None
        self._answers = answers
        self._first: dict[str, Any] | None = first
        self._charge = charge

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

    async def text(self) -> str:
        """The whole text (a request that does not stream)."""
        return "".join([piece async for piece in self.pieces()])

    async def _finish(self, done: dict[str, Any]) -> None:
        self.finish_reason = str(done["finish_reason"])
        prompt, completion = int(done["prompt_tokens"]), int(done["completion_tokens"])
        self.usage = {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion}
        await self._charge(self.id, prompt + completion)


class Completions:
    """Completions on this server's models (see the module).

    Args:
        settings: ``inference_max_tokens``, ``inference_price_per_1m_tokens``, ``models_dir``.
        store: balances and the ledger.
        planning: the catalogue and the cached hub models.
        models: the account's fine-tuned models.
        workers: the loaded models.
    """

    def __init__(self, settings: Settings, store: Store, planning: Planning,
                 models: FineTunedModels, workers: InferenceWorkers) -> None:
        self._settings = settings
        self._store = store
        self._planning = planning
        self._models = models
        self.workers = workers

    async def start(self, account_id: str, body: dict[str, Any], *, chat: bool) -> Completion:
        """Check ``body`` (a chat or a text completion request), start it, and wait for its
        first answer.

        Raises:
            pydantic.ValidationError: a malformed request (422 naming the field).
            InvalidRequest: ``max_tokens`` over the server's limit, more than 4 ``stop``
                sequences, a prompt longer than the model's context (422).
            NotFound: no such model for this account (404, ``param="model"``).
            Forbidden: tokens cost money here and the account's balance is spent.
            Unavailable: the model could not be loaded.
        """
        request: ChatRequest | TextRequest = (ChatRequest if chat else TextRequest
                                              ).model_validate(body)
        limit = self._settings.inference_max_tokens
        asked = (request.max_completion_tokens or request.max_tokens
                 if isinstance(request, ChatRequest) else request.max_tokens)
        if asked is not None and asked > limit:
            field = "max_completion_tokens" if isinstance(request, ChatRequest) \
                and request.max_completion_tokens else "max_tokens"
            raise InvalidRequest(f"{field} is at most {limit} on this server, got {asked}",
                                 param=field)
        files = await self._files(account_id, request.model)
        await self._check_balance(account_id)
        completion_id = ("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(12)
        job: dict[str, Any] = {
            "id": completion_id, "max_tokens": asked or (None if chat else 16), "limit": limit,
            "temperature": request.temperature, "top_p": request.top_p, "stop": request.stops,
            "seed": request.seed}
        if isinstance(request, ChatRequest):
            job["messages"] = [m.as_template_input() for m in request.messages]
        else:
            job["prompt"] = request.text
        answers = self.workers.submit(files, job)
        first = await answers.receive()
        if isinstance(first, Exception):
            await answers.aclose()
            raise first
        return Completion(request, completion_id, answers, first,
                          lambda usage_id, tokens: self._charge(account_id, usage_id, tokens))

    async def _files(self, account_id: str, name: str) -> ModelFiles:
        """What a worker loads for the model ``name``, as this account sees it."""
        if parse_model_id(name) is not None:  # a fine-tuned or a checkpoint model
            _, directory = await self._models.weights(account_id, name)
            adapter_config = directory / "adapter_config.json"
            if adapter_config.is_file():
                base = json.loads(adapter_config.read_text()).get("base_model_name_or_path")
                if not base or not Path(base).is_dir():
                    raise Unavailable(f"the base model of {name} is not on this server")
                return ModelFiles(Path(base), adapter=directory)
            return ModelFiles(directory)
        if name.startswith(("/", ".", "~")):  # a path on the server is no model of the API's
            raise NotFound(f"no model {shown(name)}", param="model")
        try:
            model = self._planning.model(name)
        except InvalidRequest:
            raise NotFound(f"no model {shown(name)}", param="model") from None
        if not model.weights_here:
            raise InvalidRequest(f"model {name} has no weights on this server", param="model")
        if model.on_hub:  # found on the hub, not downloaded yet
            raise InvalidRequest(f"{name} is not in this server's Hugging Face cache yet (a job "
                                 "that trains it downloads it)", param="model")
        path = model.local_path or self._settings.models_dir.resolve() / name.replace("/", "--")
        return ModelFiles(path, tiny=name == TINY_GPT2)

    async def _check_balance(self, account_id: str) -> None:
        if self._settings.inference_price_per_1m_tokens == 0:
            return
        balance, billing_limit = await self._store.balance(account_id)
        if balance + billing_limit <= 0:
            raise Forbidden("the account's balance is spent; tokens cost money on this server")

    async def _charge(self, account_id: str, usage_id: str, tokens: int) -> None:
        price = self._settings.inference_price_per_1m_tokens
        if price > 0 and tokens > 0:
            await self._store.charge_usage(account_id, usage_id, tokens, tokens * price / 1e6)
