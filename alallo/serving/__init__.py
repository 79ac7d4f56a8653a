"""Serving: fine-tuned and base models answering OpenAI's chat and completions requests
(issue 33). :class:`Completions` picks each model's engine, vLLM (:class:`VllmEngines`: one
engine per base model, its LoRA models loaded at run time) or transformers
(:class:`InferenceWorkers`: a worker process per model), and maps OpenAI's requests and
answers; :class:`VllmEnvironment` is vLLM's own virtual environment. ``docs/architecture.md``
draws it.

Names load on first use (PEP 562), so importing one module of the wing does not
import the rest of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alallo._lazy import lazy_names

if TYPE_CHECKING:
    from ._completions import Answer as Answer
    from ._completions import Completions as Completions
    from ._models import ModelFiles as ModelFiles
    from ._requests import ChatRequest as ChatRequest
    from ._requests import TextRequest as TextRequest
    from ._transformers import InferenceWorkers as InferenceWorkers
    from ._vllm import VllmEngines as VllmEngines
    from ._vllm_process import server_command as server_command
    from ._vllm_process import server_env as server_env
    from ._vllm_env import VllmEnvironment as VllmEnvironment
    from ._vllm_env import default_venv as default_venv

_ORIGINS: dict[str, tuple[str, str | None]] = {
    "Answer": ("._completions", "Answer"),
    "ChatRequest": ("._requests", "ChatRequest"),
    "Completions": ("._completions", "Completions"),
    "InferenceWorkers": ("._transformers", "InferenceWorkers"),
    "ModelFiles": ("._models", "ModelFiles"),
    "TextRequest": ("._requests", "TextRequest"),
    "VllmEngines": ("._vllm", "VllmEngines"),
    "VllmEnvironment": ("._vllm_env", "VllmEnvironment"),
    "default_venv": ("._vllm_env", "default_venv"),
    "server_command": ("._vllm_process", "server_command"),
    "server_env": ("._vllm_process", "server_env"),
}
"""Each public name: the module it comes from, and its name there (None: the module)."""

__all__ = ["Answer", "ChatRequest", "Completions", "InferenceWorkers", "ModelFiles",
           "TextRequest", "VllmEngines", "VllmEnvironment", "default_venv", "server_command",
           "server_env"]

__getattr__, __dir__ = lazy_names(__name__, _ORIGINS, __all__)
