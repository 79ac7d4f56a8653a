"""The runtime's completions, on the engines this node has (:mod:`alallo.serving`): vLLM
where its environment is ready and ``serving_engine`` allows it, transformers always; and
the devices vLLM engines hold, taken from the capacity pool through the scheduler as a job's
are, so that training and serving never hold the same device (issue 33)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import trio
from actors import ActorRef, ActorStopped

from .._errors import Unavailable
from ..capacity import Acquire, Grant, Placement, Pool, Release, SchedulerMessage
from ..executors import Services
from ..jobs import Plan
from ..serving import Completions, InferenceWorkers, ModelFiles, VllmEngines, VllmEnvironment
from ..serving import default_venv
from ..settings import Settings
from ..store import Store

__all__ = ["SERVING", "device_holder", "open_completions", "serving_engines"]

SERVING = "serving:"
"""How the holder of a vLLM engine's device is named in the pool (``serving:vllm-N``)."""

Hold = Callable[[str], AbstractAsyncContextManager[Placement | None]]


def serving_engines(settings: Settings) -> tuple[VllmEnvironment | None, str | None]:
    """vLLM's environment when this node serves with it, else None and why not (words a
    user acts on: ``alallo serve`` prints them)."""
    if settings.serving_engine == "transformers":
        return None, "serving_engine is transformers (ALALLO_SERVING_ENGINE)"
    environment = VllmEnvironment(settings.vllm_venv or default_venv())
    problem = environment.problem
    return (None, problem) if problem is not None else (environment, None)


def device_holder(settings: Settings, pool: Pool,
                  scheduler_of: Callable[[], ActorRef[SchedulerMessage] | None]) -> Hold:
    """``hold(name)``: an engine's device for as long as it runs, queued for like a job's
    (a GPU node's first, else the CPU), for at most ``vllm_device_wait_s``.

    The plan it queues with lasts ``inference_idle_s`` (an engine is let go of after that
    idle), so the estimates of the jobs behind it count it so.

    Raises (on entry):
        Unavailable: no device came free in time (jobs hold them all).
    """

    @asynccontextmanager
    async def hold(name: str) -> AsyncIterator[Placement | None]:
        scheduler = scheduler_of()
        types = pool.device_types()
        if scheduler is None or not types:
            yield None
            return
        device = max(types, key=lambda t: (t.name != "cpu", t.memory_gb))
        plan = Plan(device_type=device.name, devices=1, memory_gb=device.memory_gb,
                    price_per_hour=device.price_per_hour, step_time_s=settings.inference_idle_s,
                    startup_s=30.0, max_steps=1)
        holder = SERVING + name
        send, receive = trio.open_memory_channel[Grant](1)
        try:
            await scheduler.tell(Acquire(holder, (plan,), "fastest_finish", send,
                                         lambda _position: None))
            grant: Grant | None = None
            with trio.move_on_after(settings.vllm_device_wait_s):
                grant = await receive.receive()
            if grant is None:
                raise Unavailable(f"no {device.name} device came free for a vLLM engine in "
                                  f"{settings.vllm_device_wait_s:.0f} s (jobs hold them): "
                                  "ask again later")
            yield grant.placement
        finally:
            with trio.CancelScope(shield=True), contextlib.suppress(ActorStopped):
                await scheduler.tell(Release(holder))  # stopped: the server is going

    return hold


def open_completions(settings: Settings, store: Store,
                     resolve: Callable[[str, str], Awaitable[ModelFiles]],
                     hold: Hold | None = None,
                     services: tuple[Services, Path] | None = None) -> Completions:
    """The completions of a runtime: both engines where vLLM is ready, else transformers;
    vLLM engines hold a device each through ``hold``, and start through ``services`` (where,
    and the folder of their folders: :func:`~alallo.runtime._devices.open_services`)."""
    environment, why_not = serving_engines(settings)
    place, home = services or (None, None)
    engines = VllmEngines(settings, environment, hold, place, home) \
        if environment is not None else None
    return Completions(settings, store, resolve, InferenceWorkers(settings), engines, why_not)
