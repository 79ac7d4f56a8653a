"""Completions: the account's fine-tuned models and the base models, asked for text in
OpenAI's request shapes (``POST /v1/chat/completions``, ``POST /v1/completions``; issues 17
and 33), each answered by the engine that serves its model best.

:meth:`Completions.start` checks a request (a 400 naming the field), finds the model's files
(through the runtime's ``resolve``: a fine-tuned model, a checkpoint model, a base model),
picks its engine and starts it there:

- **vLLM** (:mod:`alallo.serving._vllm`) where its environment is ready and it can serve the
  model: every LoRA model of one base on one engine, batched continuously; every OpenAI
  parameter of the requests honoured.
- **transformers** (:mod:`alallo.serving._transformers`) otherwise: a GPT-2 adapter, heads
  too small for vLLM's CPU attention, no vLLM installed, or ``serving_engine:
  transformers``. A parameter it cannot honour is a 400 naming it and saying why the model
  is not on vLLM here.
- and, on a CPU, **one request at a time** of a small model that transformers can answer,
  while the model's worker is free (faster than vLLM with LoRA there); the requests that
  come meanwhile go to vLLM, which batches them.

A request the engine refuses (a prompt longer than the model's context) is refused before any
byte of a stream (a 4xx). The answer (:class:`TransformersAnswer`, :class:`VllmAnswer`)
yields OpenAI's JSON or its stream; at the end the account is charged for the tokens at
``inference_price_per_1m_tokens`` (default 0: nothing).
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import structlog
import trio

from .._errors import Forbidden, InvalidRequest
from ..settings import Settings
from ..store import Store
from ._models import ModelFiles, vllm_refusal
from ._openai_params import ChatOptions, TextOptions
from ._requests import ChatRequest, TextRequest, transformers_refusal
from ._transformers import InferenceWorkers
from ._transformers_answer import TransformersAnswer
from ._vllm import VllmEngines
from ._vllm_answer import VllmAnswer

__all__ = ["Answer", "Completions"]

log = structlog.get_logger("alallo.serving")

Answer = TransformersAnswer | VllmAnswer
"""A request under way: ``stream``, ``await body()`` or ``events()``, ``aclose()``."""

SMALL_MODEL_MB = 1024
"""Weights (MB) up to which one request at a time goes to transformers on a CPU."""

_NOT_FORWARDED = frozenset(ChatOptions.model_fields) | frozenset(TextOptions.model_fields)
"""Parameters taken only with values that ask for nothing: vLLM is not sent them."""


class Completions:
    """Completions on this server's models (see the module).

    Args:
        settings: ``serving_engine``, ``inference_max_tokens``,
            ``inference_price_per_1m_tokens``, ``python``.
        store: balances and the ledger.
        resolve: ``await resolve(account_id, model_name)`` → the model's files; raises
            NotFound (404) or InvalidRequest (400) naming ``model``.
        workers: the transformers engine.
        engines: the vLLM engines; None where vLLM is not installed.
        why_not_vllm: why ``engines`` is None, in words ``alallo serve`` prints.
    """

    def __init__(self, settings: Settings, store: Store,
                 resolve: Callable[[str, str], Awaitable[ModelFiles]],
                 workers: InferenceWorkers, engines: VllmEngines | None,
                 why_not_vllm: str | None = None) -> None:
        self._settings = settings
        self._store = store
        self._resolve = resolve
        self.workers = workers
        self.engines = engines
        self.why_not_vllm = why_not_vllm
        self._refusals: dict[ModelFiles, str | None] = {}
        self._small_models: dict[ModelFiles, bool] = {}

    @asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        """Serve while inside: both engines' processes are stopped on the way out."""
        log.info("serving.engines", why_not_vllm=self.why_not_vllm,
                 vllm=self.engines.environment.package if self.engines else None)
        async with self.workers.open():
            if self.engines is None:
                yield
            else:
                async with self.engines.open():
                    yield

    def statistics(self) -> dict[str, dict[str, float]]:
        """Per engine (``transformers``, ``vllm``): ``requests`` under way, ``models``
        loaded, ``tokens`` generated in all and ``tokens_per_second`` lately."""
        engines: dict[str, Any] = {"transformers": self.workers}
        if self.engines is not None:
            engines["vllm"] = self.engines
        loaded = {"transformers": len(self.workers.loaded),
                  "vllm": len(self.engines.engines) if self.engines else 0}
        return {name: {"requests": engine.requests, "models": loaded[name],
                       "tokens": engine.tokens.total,
                       "tokens_per_second": engine.tokens.per_second}
                for name, engine in engines.items()}

    async def start(self, account_id: str, body: dict[str, Any], *, chat: bool) -> Answer:
        """Check ``body`` (a chat or a text completion request), start it, and wait for its
        engine to take it.

        Raises:
            pydantic.ValidationError: a malformed request (400 naming the field).
            InvalidRequest: ``max_tokens`` over the server's limit, more than 4 ``stop``
                sequences, a parameter the model's engine cannot honour, a prompt longer
                than the model's context (400).
            NotFound: no such model for this account (404, ``param="model"``).
            Forbidden: tokens cost money here and the account's balance is spent.
            Unavailable: the model could not be loaded, or its engine stopped.
        """
        request: ChatRequest | TextRequest = (ChatRequest if chat else TextRequest
                                              ).model_validate(body)
        field, asked = request.asked_tokens
        limit = self._settings.inference_max_tokens
        if asked is not None and asked > limit:
            raise InvalidRequest(f"{field} is at most {limit} on this server, got {asked}",
                                 param=field)
        _ = request.stops  # each property raises InvalidRequest naming its field
        request.check_logit_bias()
        if isinstance(request, TextRequest):
            _ = request.prompts
        files = await self._resolve(account_id, request.model)
        await self._check_balance(account_id)

        async def charge(usage_id: str, tokens: int) -> None:
            await self._charge(account_id, usage_id, tokens)

        why_not = await self.why_not_on_vllm(files)
        if why_not is None and not self._alone_on_transformers(request, files):
            assert self.engines is not None
            forward = {k: v for k, v in body.items() if k not in _NOT_FORWARDED}
            if request.stream:
                forward["stream_options"] = {**(request.stream_options or {}),
                                             "include_usage": True}
            path = "/v1/chat/completions" if chat else "/v1/completions"
            engine, response = await self.engines.send(files, request.model, path, forward)
            return VllmAnswer(request, self.engines, engine, request.model, response, charge)
        refused = transformers_refusal(request)
        if refused is not None:
            raise InvalidRequest(f"{refused} is not supported for {request.model} on this "
                                 f"server: it is served by transformers here ({why_not}); "
                                 "leave it out", param=refused)
        return await self._on_transformers(request, files, asked, charge)

    def _alone_on_transformers(self, request: ChatRequest | TextRequest,
                               files: ModelFiles) -> bool:
        """Whether a request vLLM could serve goes to transformers instead: one request at a
        time of a small model on a CPU is faster there (measured on the tiny Llama with
        LoRA adapters: 738 tokens/s against vLLM's 240), so a request of one answer that
        transformers can honour goes there while the model's worker is free and its base's
        vLLM engine has nothing to do; the others, those that come meanwhile and those of
        ``n`` answers (which transformers generates one after the other, vLLM in one batch),
        go to vLLM (``serving_transformers_alone``)."""
        assert self.engines is not None
        return (self._settings.serving_transformers_alone
                and "cpu" in self.engines.environment.package
                and self._small(files)
                and request.n == 1 and transformers_refusal(request) is None
                and not self.engines.requests_on(files.model)
                and self.workers.free(files))

    def _small(self, files: ModelFiles) -> bool:
        """Whether ``files`` weigh at most :data:`SMALL_MODEL_MB` (read once per model)."""
        if files not in self._small_models:
            self._small_models[files] = files.weights_mb <= SMALL_MODEL_MB
        return self._small_models[files]

    async def why_not_on_vllm(self, files: ModelFiles) -> str | None:
        """Why ``files`` is not served by vLLM here (None: it is)."""
        if self.engines is None:
            return self.why_not_vllm or "vLLM is not installed"
        if files not in self._refusals:
            if files.tiny and not (files.model / "config.json").is_file():
                await trio.run_process([self._settings.python, "-m", "alallo.trainers.tiny",
                                        files.tiny, str(files.model)],
                                       stdout=subprocess.DEVNULL, check=False)
            cpu = "cpu" in self.engines.environment.package
            self._refusals[files] = vllm_refusal(files, cpu=cpu)
            if self._refusals[files] is not None:
                log.info("serving.transformers", model=str(files.model),
                         adapter=str(files.adapter or ""), why=self._refusals[files])
        return self._refusals[files]

    async def _on_transformers(self, request: ChatRequest | TextRequest, files: ModelFiles,
                               asked: int | None,
                               charge: Callable[[str, int], Awaitable[None]],
                               ) -> TransformersAnswer:
        chat = isinstance(request, ChatRequest)
        completion_id = ("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(12)
        job: dict[str, Any] = {
            "id": completion_id, "max_tokens": asked,
            "limit": self._settings.inference_max_tokens,
            "temperature": request.temperature, "top_p": request.top_p,
            "stop": request.stops, "seed": request.seed, "logit_bias": request.logit_bias,
            "presence_penalty": request.presence_penalty,
            "frequency_penalty": request.frequency_penalty, "n": request.n,
            "logprobs": ((request.top_logprobs or 0) if request.logprobs else None)
            if isinstance(request, ChatRequest) else request.logprobs}
        if isinstance(request, ChatRequest):
            job["messages"] = [m.as_template_input() for m in request.messages]
        else:
            job["prompt"] = request.prompts[0]
        answers = self.workers.submit(files, job)
        first = await answers.receive()
        if isinstance(first, Exception):
            await answers.aclose()
            raise first
        return TransformersAnswer(request, completion_id, answers, first, charge)

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

