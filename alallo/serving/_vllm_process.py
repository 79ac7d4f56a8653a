"""A vLLM OpenAI server as a process: its command line and environment, the ones a killed
server left behind, and its errors in alallo's words (:mod:`alallo.serving._vllm` runs it)."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import structlog

from .._errors import InvalidRequest, Unavailable
from ..executors import kill_group, scrubbed_environment
from ..settings import Settings
from ._models import ModelFiles, tool_call_parser
from ._vllm_env import VllmEnvironment

__all__ = ["reap_stale", "refusal", "server_command", "server_env", "tail", "vllm_message"]

log = structlog.get_logger("alallo.serving.vllm")


def reap_stale(home: Path) -> None:
    """Kill the vLLM engines a server before this one left running on this machine (``home``'s
    ``vllm-NAME.pid`` files): a server killed with SIGKILL takes its engines' API servers
    with it (they die with their parent), not their engine cores, which are theirs."""
    for pid_file in home.glob("vllm-*.pid"):
        try:
            group = int(pid_file.read_text())
        except (OSError, ValueError):
            group = 0
        if group > 1 and any(_is_vllm(pid, group) for pid in _pids()):
            kill_group(group, signal.SIGKILL)
            log.info("vllm.reaped", process_group=group)
        pid_file.unlink(missing_ok=True)


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _is_vllm(pid: int, group: int) -> bool:
    """Whether ``pid`` is in process group ``group`` and is vLLM's (a reused id is not)."""
    try:
        if os.getpgid(pid) != group:
            return False
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"vllm" in command.lower()


def server_command(environment: VllmEnvironment, settings: Settings, model: Path, served: str,
                   max_lora_rank: int) -> list[str]:
    """vLLM's OpenAI server for ``model``, as alallo starts it (``bench/bench_serving.py``
    starts its baseline with the same), without its address: the place it starts on appends
    ``--host HOST --port PORT`` (:class:`~alallo.executors.Services`).

    Args:
        environment: vLLM's environment.
        settings: ``vllm_max_loras``.
        model: the model's folder.
        served: the name it answers the model itself under.
        max_lora_rank: the greatest adapter rank it takes; 0: no adapters.
    """
    command = [str(environment.python), "-m", "vllm.entrypoints.openai.api_server",
               "--model", str(model), "--served-model-name", served,
               "--max-model-len", str(ModelFiles(model).context_length),
               "--generation-config", "vllm",  # OpenAI's defaults, not the model's
               # JSON answers without the blank space a grammar allows between tokens
               "--structured-outputs-config",
               '{"backend": "xgrammar", "disable_any_whitespace": true}',
               "--enable-auto-tool-choice", "--tool-call-parser", tool_call_parser(model)]
    if max_lora_rank:
        command += ["--enable-lora", "--max-loras", str(settings.vllm_max_loras),
                    "--max-lora-rank", str(max_lora_rank)]
    if "cpu" in environment.package:
        command += ["--dtype", "float32", "--enforce-eager"]
    return command


def server_env(settings: Settings) -> dict[str, str]:
    """The environment of a vLLM server: scrubbed, offline, runtime LoRA updates on (its API
    key, ``VLLM_API_KEY``, is added by the engine)."""
    return {**scrubbed_environment(settings.trainer_env), "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1",
            "VLLM_CPU_KVCACHE_SPACE": str(settings.vllm_kv_cache_gib), "HF_HUB_OFFLINE": "1"}


def vllm_message(content: bytes) -> str:
    """The message of vLLM's error answer ``content``."""
    try:
        error = json.loads(content)
        message = error.get("error", error).get("message") or error.get("message")
        return str(message or error)
    except (ValueError, AttributeError):
        return content.decode(errors="replace")[:500]


def refusal(status: int, content: bytes) -> InvalidRequest | Unavailable:
    """vLLM's error answer as ours: a 4xx is the request's fault (the parameter it names, as
    ``(parameter=max_tokens, value=300)``, is the ``param``), anything else the engine's."""
    if 400 <= status < 500:
        message = vllm_message(content)
        named = re.search(r"\(parameter=(\w+)", message)
        return InvalidRequest(message, param=named.group(1) if named else None)
    return Unavailable(f"the model's engine failed the request: {vllm_message(content)}")


def tail(path: Path, lines: int = 3) -> str:
    """The last ``lines`` lines of a log, on one line."""
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " / ".join(line.strip()[:300] for line in text[-lines:])
