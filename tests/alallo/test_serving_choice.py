"""Which engine serves a model, and what each engine takes (issue 33): read from the model's
files and the request, no engine started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from alallo.serving import ChatRequest, ModelFiles, TextRequest, VllmEnvironment
from alallo.serving._models import lora_rank, tool_call_parser, vllm_refusal
from alallo.serving._requests import transformers_refusal
from alallo.serving._vllm_process import reap_stale
from alallo.serving.install import main as install_main

pytestmark = pytest.mark.unit

CHAT = [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize(("body", "refused"), [
    ({}, None),
    ({"n": 1, "tools": [], "logprobs": False, "response_format": {"type": "text"},
      "frequency_penalty": 0, "parallel_tool_calls": True}, None),
    ({"n": 2, "logprobs": True, "top_logprobs": 3, "logit_bias": {"12": 5},
      "presence_penalty": 0.5, "frequency_penalty": -1}, None),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
    ({"tool_choice": "required"}, "tool_choice"),
])
def test_the_transformers_engine_names_what_it_cannot_honour(
        body: dict[str, Any], refused: str | None) -> None:
    request = ChatRequest.model_validate({"model": "m", "messages": CHAT, **body})
    assert transformers_refusal(request) == refused


def test_a_list_of_prompts_needs_vllm_and_one_prompt_in_a_list_does_not() -> None:
    assert transformers_refusal(TextRequest.model_validate(
        {"model": "m", "prompt": ["a", "b"]})) == "prompt"
    assert transformers_refusal(TextRequest.model_validate(
        {"model": "m", "prompt": ["a"]})) is None


def model(tmp_path: Path, config: dict[str, Any], tokens: list[str] = ()) -> Path:  # type: ignore[assignment]
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "tokenizer.json").write_text(json.dumps(
        {"added_tokens": [{"id": i, "content": t} for i, t in enumerate(tokens)]}))
    return tmp_path


LLAMA = {"model_type": "llama", "hidden_size": 128, "num_attention_heads": 4,
         "max_position_embeddings": 256}


def test_vllm_serves_llama_adapters_and_says_why_not_gpt2_or_small_heads(tmp_path: Path) -> None:
    llama = model(tmp_path / "llama", LLAMA)
    adapter = tmp_path / "adapter"
    assert vllm_refusal(ModelFiles(llama, adapter=adapter), cpu=True) is None
    gpt2 = model(tmp_path / "gpt2", {"model_type": "gpt2", "n_embd": 64, "n_head": 2})
    assert "LoRA" in (vllm_refusal(ModelFiles(gpt2, adapter=adapter), cpu=True) or "")
    assert vllm_refusal(ModelFiles(gpt2), cpu=True) is None, "a whole GPT-2 model it serves"
    small = model(tmp_path / "small", {**LLAMA, "num_attention_heads": 8})
    assert "heads of 32" in (vllm_refusal(ModelFiles(small), cpu=True) or "")
    assert vllm_refusal(ModelFiles(small), cpu=False) is None, "a GPU's attention takes 16"
    assert "config.json" in (vllm_refusal(ModelFiles(tmp_path / "none"), cpu=True) or "")
    assert ModelFiles(llama).context_length == 256


def test_the_tool_call_parser_follows_the_tokenizer(tmp_path: Path) -> None:
    assert tool_call_parser(model(tmp_path / "a", LLAMA, ["<tool_call>"])) == "hermes"
    assert tool_call_parser(model(tmp_path / "b", LLAMA, ["<|python_tag|>"])) == "llama3_json"
    assert tool_call_parser(model(tmp_path / "c", LLAMA)) == "pythonic"


def test_an_adapters_rank_is_its_greatest(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text(json.dumps(
        {"r": 8, "rank_pattern": {"q_proj": 32}}))
    assert lora_rank(tmp_path) == 32
    assert lora_rank(tmp_path / "missing") == 0


def test_an_environment_not_installed_says_how_to_install_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        ) -> None:
    problem = VllmEnvironment(tmp_path / "venv").problem or ""
    assert "not installed" in problem and "python -m alallo.serving.install" in problem
    monkeypatch.setenv("ALALLO_SERVING_ENGINE", "transformers")
    assert install_main([str(tmp_path / "venv")]) == 0
    assert "skipped" in capsys.readouterr().out
    assert not (tmp_path / "venv").exists()


def test_engines_a_killed_server_left_behind_are_reaped_and_nothing_else(tmp_path: Path) -> None:
    # A server killed with SIGKILL takes its engines' API servers with it, not their engine
    # cores (vLLM's own children): the next server kills the groups its pid files name.
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "vllm"],
                              start_new_session=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             start_new_session=True)
    try:
        (tmp_path / "vllm-1.pid").write_text(str(engine.pid))
        (tmp_path / "vllm-2.pid").write_text(str(other.pid))  # a reused id: not vLLM's
        reap_stale(tmp_path)
        assert engine.wait(timeout=10) == -signal.SIGKILL
        assert other.poll() is None
        assert not list(tmp_path.glob("*.pid"))
    finally:
        engine.kill()
        other.kill()
        engine.wait()
        other.wait()


def test_the_socket_folders_of_servers_that_are_gone_are_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    import trio

    from alallo.executors import LocalServices

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / f"alallo-services-{gone.pid}-x").mkdir()  # its server was killed
    (tmp_path / f"alallo-services-{os.getpid()}-y").mkdir()  # a server still running
    (tmp_path / "alallo-services-z").mkdir()  # not one of ours
    trio.run(LocalServices().reap_stale)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"alallo-services-{os.getpid()}-y", "alallo-services-z"]
