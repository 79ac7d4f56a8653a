"""vLLM engines: one OpenAI server of vLLM's per base model, every LoRA adapter of that base
served by it (issue 33; multi-LoRA: Punica, arXiv 2310.18547, and S-LoRA, arXiv 2311.03285,
as vLLM implements them).

:class:`VllmEngines` starts ``python -m vllm.entrypoints.openai.api_server`` from vLLM's own
environment (:mod:`alallo.serving._vllm_env`) the first time a request needs a model: for a
base model and all its LoRA models (``--enable-lora``), or for a fully fine-tuned model of its
own. The process gets a scrubbed environment, an API key of its own, its folder in
``data_dir/inference``, and its own session: a child of the server listening on a Unix socket
only the server's user may reach, which dies with it, or a Ray job on the node the scheduler
placed it on, listening on that node's address (:class:`~alallo.executors.Services`). Adapters are loaded at
run time as requests name them (``/v1/load_lora_adapter``, vLLM PR #6566) under the model id
the user asked for, so vLLM's answers already carry it; past ``serving_max_adapters`` the
adapter used longest ago is unloaded. vLLM batches the requests of every adapter of its base
continuously (``max_loras`` of them in one batch).

A process that stops fails the requests it held (503, "ask again"), and the next request
starts it anew; one nobody asked for in ``inference_idle_s`` is let go of.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import structlog
import trio

from .._errors import Unavailable
from ..executors import LocalServices, Service, ServiceLaunch, Services
from ..settings import Settings
from ._idle import let_go_when_idle
from ._meter import TokenMeter
from ._models import ModelFiles, lora_rank, supports_lora
from ._vllm_env import VllmEnvironment
from ._vllm_process import reap_stale, refusal, server_command, server_env, tail, vllm_message

__all__ = ["LORA_RANKS", "Engine", "VllmEngines"]

log = structlog.get_logger("alallo.serving.vllm")

LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
"""The ``--max-lora-rank`` values vLLM takes."""
_HEALTH_EVERY_S = 0.5
_numbers = itertools.count(1)


@dataclass(eq=False)
class Engine:
    """One vLLM server: the model it loaded, its adapters, its requests under way.

    Attributes:
        files: the model it serves (``adapter`` None: adapters come per request).
        served: the name vLLM answers the model itself under.
        max_lora_rank: the greatest adapter rank it takes (0: no adapters).
    """

    files: ModelFiles
    served: str
    max_lora_rank: int
    name: str = field(default_factory=lambda: f"vllm-{next(_numbers)}")
    """Unique in this server: its folder in ``inference/``, its holder in the pool."""
    api_key: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    """What its server asks of every ``/v1`` call (``VLLM_API_KEY``): no process but this
    server's reaches it, a trainer on the same machine included."""
    ready: trio.Event = field(default_factory=trio.Event)
    failure: str | None = None
    process: Service | None = None
    """The server, once started (``host``, ``port``, ``pid``, ``poll()``, ``await wait()``)."""
    adapters: OrderedDict[str, Path] = field(default_factory=OrderedDict)
    """Adapters loaded, by name, the one used longest ago first."""
    adapter_lock: trio.Lock = field(default_factory=trio.Lock)
    in_flight: dict[str, int] = field(default_factory=dict)
    """Requests under way, by the model name they asked for."""
    last_used: float = 0.0
    client: httpx.AsyncClient | None = None
    placement: Any = None
    """The pool's devices it holds (``alallo.capacity.Placement``; None: no pool)."""

    @property
    def busy(self) -> int:
        """Requests under way."""
        return sum(self.in_flight.values())

    def kill(self) -> None:
        """Kill the server and its children (its process group)."""
        if self.process is not None:
            self.process.kill()


class VllmEngines:
    """The vLLM engines of this server (see the module).

    Args:
        settings: ``data_dir``, ``trainer_env``, ``inference_idle_s``,
            ``inference_max_models``, ``serving_max_adapters``, ``vllm_max_loras``,
            ``vllm_kv_cache_gib``, ``vllm_start_timeout_s``.
        environment: vLLM's environment (ready: its ``problem`` is None).
        hold: ``async with hold(name) as placement``: a device of the capacity pool for an
            engine's life (its ``node``, and ``device_indices`` that become
            ``CUDA_VISIBLE_DEVICES`` on this machine; None: no pool); raises
            :class:`Unavailable` when none comes free in time.
        services: where engines start: this machine (the default) or the placed node of a
            Ray cluster (:class:`~alallo.executors.RayServices`).
        home: the folder of the engines' folders (``data_dir/inference``; on Ray, on the
            shared storage).
    """

    def __init__(self, settings: Settings, environment: VllmEnvironment,
                 hold: Callable[[str], AbstractAsyncContextManager[Any]] | None = None,
                 services: Services | None = None, home: Path | None = None) -> None:
        self._settings = settings
        self.environment = environment
        self._hold = hold or (lambda _name: nullcontext())
        self._services = services or LocalServices()
        self.home = home or settings.data_dir / "inference"
        self._engines: dict[Path, Engine] = {}
        """By the folder of the model each one loaded."""
        self._nursery: trio.Nursery | None = None
        self.tokens = TokenMeter()
        """Completion tokens generated (for ``/metrics``)."""

    @property
    def engines(self) -> list[Engine]:
        """The engines started (or starting) now."""
        return list(self._engines.values())

    def requests_on(self, model: Path) -> int:
        """Requests under way on the engine of the model in ``model`` (0 when none runs)."""
        engine = self._engines.get(model)
        return engine.busy if engine is not None else 0

    @property
    def requests(self) -> int:
        """Requests under way (queued or generating in an engine, or waiting for one)."""
        return sum(engine.busy for engine in self._engines.values())

    @asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        """Serve while inside; every engine is stopped on the way out."""
        reap_stale(self.home)
        try:
            await self._services.reap_stale()
        except OSError as exc:  # the cluster does not answer: engines start later, or fail
            log.warning("vllm.reap_failed", error=str(exc))
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(let_go_when_idle, self._engines.values,
                                   lambda engine: bool(engine.busy), self._let_go,
                                   self._settings.inference_idle_s, "vllm")
                try:
                    yield
                finally:
                    self._nursery = None
                    for engine in list(self._engines.values()):
                        self._let_go(engine)
                    nursery.cancel_scope.cancel()
        finally:
            self._services.close()  # every engine has stopped: their tasks were its

    async def send(self, files: ModelFiles, name: str, path: str, body: dict[str, Any],
                   ) -> tuple[Engine, httpx.Response]:
        """Send ``body`` to ``path`` (``/v1/chat/completions``...) of the engine of ``files``,
        as the model ``name``; the answer's body is not read yet.

        Returns:
            The engine (:meth:`done` it with ``name`` once the answer is read) and vLLM's
            answer, status 200.

        Raises:
            InvalidRequest: vLLM refused the request (its message; 400).
            Unavailable: the engine could not start, or stopped.
        """
        for attempt in (1, 2):
            engine = await self._engine(files)
            try:
                return engine, await self._send(engine, files, name, path, body)
            except httpx.ConnectError as exc:
                # Nothing listens on its port: it died between requests (and is not reaped
                # yet). It is let go of, and this request waits for a new one.
                self._let_go(engine)
                if attempt == 2:
                    raise Unavailable("the model's engine stopped; ask again") from exc
        raise AssertionError("unreachable")

    async def _send(self, engine: Engine, files: ModelFiles, name: str, path: str,
                    body: dict[str, Any]) -> httpx.Response:
        engine.in_flight[name] = engine.in_flight.get(name, 0) + 1
        engine.last_used = trio.current_time()
        try:
            if files.adapter is not None:
                await self._load_adapter(engine, name, files.adapter)
                body = {**body, "model": name}
            else:
                body = {**body, "model": engine.served}
            response = await self._post(engine, path, body)
        except httpx.ConnectError:
            self.done(engine, name)
            raise
        except httpx.TransportError as exc:
            self.done(engine, name)
            self.crashed(engine)
            raise Unavailable("the model's engine stopped; ask again"
                              if engine.process is None or engine.process.poll() is not None
                              else f"the model's engine did not answer ({exc!r}); ask again"
                              ) from exc
        except BaseException:
            self.done(engine, name)
            raise
        if response.status_code != 200:
            content = await response.aread()
            await response.aclose()
            self.done(engine, name)
            raise refusal(response.status_code, content)
        return response

    async def _post(self, engine: Engine, path: str, body: dict[str, Any]) -> httpx.Response:
        """POST ``body``, on a connection of its own: kept-alive connections made the first
        token 5-20× later at 64 requests at once (measured: 0.3 k tokens/s instead of 2.8 k;
        httpx's pool handing kept connections out in turn), and a kept connection vLLM had
        closed would fail a request the engine never saw.

        Raises:
            httpx.ConnectError: nothing listens on the engine's port (nothing was sent).
            httpx.TransportError: the engine stopped with the request in it.
        """
        assert engine.client is not None
        request = engine.client.build_request("POST", path, json=body)
        return await engine.client.send(request, stream=True)

    def done(self, engine: Engine, name: str, completion_tokens: int = 0) -> None:
        """One request of ``engine`` for ``name`` ended, having generated
        ``completion_tokens``."""
        left = engine.in_flight.get(name, 0) - 1
        if left > 0:
            engine.in_flight[name] = left
        else:
            engine.in_flight.pop(name, None)
        engine.last_used = trio.current_time()
        self.tokens.add(completion_tokens)

    def crashed(self, engine: Engine) -> None:
        """A connection to ``engine`` failed: when its process has stopped, let go of it (the
        next request starts it anew); one still running is kept (a connection refused under
        load is no crash)."""
        if engine.process is None or engine.process.poll() is not None:
            self._let_go(engine)

    async def _engine(self, files: ModelFiles) -> Engine:
        """The engine of ``files.model``, started when there is none (or when its adapters'
        rank is too small for ``files.adapter``), once it answers."""
        engine = self._engines.get(files.model)
        if engine is not None and engine.ready.is_set() and engine.failure is None \
                and files.adapter is not None and lora_rank(files.adapter) > engine.max_lora_rank:
            self._let_go(engine)  # started for smaller adapters: started again, for all
            engine = None
        if engine is None:
            if self._nursery is None:
                raise Unavailable("the server is stopping")
            self._make_room()
            rank = lora_rank(files.adapter) if files.adapter is not None else 0
            max_rank = next((r for r in LORA_RANKS if r >= max(rank, 16)), LORA_RANKS[-1]) \
                if files.adapter is not None or supports_lora(files.model) else 0
            served = ModelFiles(files.model, tiny=files.tiny, name=files.name)
            engine = self._engines[files.model] = Engine(served, files.name or "model",
                                                         max_rank,
                                                         last_used=trio.current_time())
            self._nursery.start_soon(self._run, engine)
        await engine.ready.wait()
        if engine.failure is not None:
            raise Unavailable(f"the model could not be loaded by vLLM: {engine.failure}")
        return engine

    async def _load_adapter(self, engine: Engine, name: str, adapter: Path) -> None:
        if engine.adapters.get(name) == adapter:  # loaded: no lock (64 requests queued on it
            engine.adapters.move_to_end(name)  # for 0.4 s, each handed it in turn)
            return
        async with engine.adapter_lock:
            if engine.adapters.get(name) == adapter:
                engine.adapters.move_to_end(name)
                return
            assert engine.client is not None
            excess = len(engine.adapters) - self._settings.serving_max_adapters + 1
            for old in [n for n in engine.adapters if n not in engine.in_flight][:max(excess, 0)]:
                await engine.client.post("/v1/unload_lora_adapter", json={"lora_name": old})
                del engine.adapters[old]
            answer = await engine.client.post("/v1/load_lora_adapter", json={
                "lora_name": name, "lora_path": str(adapter)}, timeout=120)
            if answer.status_code != 200:
                raise Unavailable(f"vLLM could not load the adapter of {name}: "
                                  f"{vllm_message(answer.content)}")
            engine.adapters[name] = adapter

    def _make_room(self) -> None:
        idle = sorted((e for e in self._engines.values() if not e.busy),
                      key=lambda e: e.last_used)
        excess = len(self._engines) - self._settings.inference_max_models + 1
        for engine in idle[:max(excess, 0)]:
            self._let_go(engine)

    def _let_go(self, engine: Engine) -> None:
        if self._engines.get(engine.files.model) is engine:
            del self._engines[engine.files.model]
        engine.kill()

    def command(self, engine: Engine) -> list[str]:
        """The command line of ``engine``'s server (:func:`server_command`)."""
        return server_command(self.environment, self._settings, engine.files.model,
                              engine.served, engine.max_lora_rank)

    async def _run(self, engine: Engine) -> None:
        """Hold a device of the pool for ``engine`` while it runs (:meth:`_run_held`); an
        engine that gets none in time fails its requests (503)."""
        try:
            async with self._hold(engine.name) as placement:
                engine.placement = placement
                await self._run_held(engine, placement)
        except Unavailable as exc:
            if engine.process is not None:
                raise
            engine.failure = exc.message
            self._let_go(engine)
            engine.ready.set()

    async def _run_held(self, engine: Engine, placement: Any) -> None:
        """Start ``engine``'s server on ``placement``'s node and devices, wait until it
        answers, and reap it when it ends."""
        self.home.mkdir(parents=True, exist_ok=True)
        env = server_env(self._settings)
        if placement is not None and placement.device_type != "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, placement.device_indices))
        launch = ServiceLaunch(
            engine.name, self.command(engine), self.home / engine.name, env,
            **({"node": placement.node, "device_type": placement.device_type,
                "devices": placement.devices} if placement is not None else {}),
            secrets={"VLLM_API_KEY": engine.api_key})
        try:
            process = await self._services.start(launch)
        except OSError as exc:
            engine.failure = f"{type(exc).__name__}: {exc}"
            self._let_go(engine)
            engine.ready.set()
            return
        engine.process = process
        pid_file = self.home / f"{engine.name}.pid"
        if process.pid is not None:
            pid_file.write_text(str(process.pid))  # its process group, for reap_stale
        engine.client = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=process.uds, limits=httpx.Limits(
                max_connections=None, max_keepalive_connections=0)),
            base_url=f"http://{process.host}:{process.port or 80}",
            headers={"Authorization": f"Bearer {engine.api_key}"},
            timeout=httpx.Timeout(30, read=None))
        try:
            async with engine.client:
                try:
                    await self._until_healthy(engine, process, launch.output)
                finally:
                    if engine.failure is not None:
                        self._let_go(engine)
                    engine.ready.set()
                await process.wait()
        finally:
            engine.kill()  # its whole group: vLLM's engine core is a child of its own
            with trio.CancelScope(shield=True):
                await process.wait()
            pid_file.unlink(missing_ok=True)
        if engine.failure is None:
            log.warning("vllm.stopped", model=str(engine.files.model),
                        returncode=process.poll())
        self._let_go(engine)

    async def _until_healthy(self, engine: Engine, process: Service, output: Path) -> None:
        assert engine.client is not None
        with trio.move_on_after(self._settings.vllm_start_timeout_s) as waited:
            while process.poll() is None:
                with contextlib.suppress(httpx.TransportError):
                    if (await engine.client.get("/health", timeout=5)).status_code == 200:
                        log.info("vllm.ready", model=str(engine.files.model),
                                 address=process.uds or f"{process.host}:{process.port}")
                        return
                await trio.sleep(_HEALTH_EVERY_S)
        last = tail(output)
        engine.failure = (f"it did not answer in {self._settings.vllm_start_timeout_s:.0f} s"
                          if waited.cancelled_caught else f"it stopped at start: {last}")
