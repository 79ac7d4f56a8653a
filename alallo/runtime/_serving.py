"""The runtime's completions, on the engines this node has (:mod:`alallo.serving`): vLLM
where its environment is ready and ``serving_engine`` allows it, transformers always."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..serving import Completions, InferenceWorkers, ModelFiles, VllmEngines, VllmEnvironment
from ..serving import default_venv
from ..settings import Settings
from ..store import Store

__all__ = ["open_completions", "serving_engines"]


def serving_engines(settings: Settings) -> tuple[VllmEnvironment | None, str | None]:
    """vLLM's environment when this node serves with it, else None and why not (words a
    user acts on: ``alallo serve`` prints them)."""
    if settings.serving_engine == "transformers":
        return None, "serving_engine is transformers (ALALLO_SERVING_ENGINE)"
    environment = VllmEnvironment(settings.vllm_venv or default_venv())
    problem = environment.problem
    return (None, problem) if problem is not None else (environment, None)


def open_completions(settings: Settings, store: Store,
                     resolve: Callable[[str, str], Awaitable[ModelFiles]]) -> Completions:
    """The completions of a runtime: both engines where vLLM is ready, else transformers."""
    environment, why_not = serving_engines(settings)
    engines = VllmEngines(settings, environment) if environment is not None else None
    return Completions(settings, store, resolve, InferenceWorkers(settings), engines, why_not)
