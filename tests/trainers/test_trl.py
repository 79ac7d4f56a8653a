"""The TRL trainer, run for real as ``python -m alallo.trainers.trl`` on the tiny model.

Each run is a subprocess, as the runtime starts it, and most of its cost is
importing torch, transformers and TRL, so the runs are few and short.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alallo.trainers import (
    Checkpoint,
    Done,
    Error,
    Log,
    Progress,
    Stage,
    TrainerConfig,
    parse_line,
)
from alallo.trainers._data import load_training_dataset

_Message = Log | Stage | Progress | Checkpoint | Done | Error


@dataclass(frozen=True)
class _Run:
    returncode: int
    messages: list[_Message]
    stderr: str

    def of(self, kind: type[Any]) -> list[Any]:
        return [m for m in self.messages if isinstance(m, kind)]

    @property
    def logs(self) -> list[str]:
        return [m.text for m in self.of(Log)]


def _config(tmp_path: Path, model: Path, data: Path, **overrides: Any) -> TrainerConfig:
    fields: dict[str, Any] = {
        "job_id": "ft-test",
        "model": str(model),
        "model_name": "alallo/tiny-gpt2",
        "training_file": str(data),
        "data_format": "text",
        "output_dir": str(tmp_path / "model"),
        "checkpoint_dir": str(tmp_path / "checkpoints"),
        "max_steps": 20,
        "logging_steps": 10,
        "save_steps": 10,
        "batch_size": 4,
        "max_seq_length": 128,
    }
    return TrainerConfig.model_validate({**fields, **overrides})


def _run(config: TrainerConfig, tmp_path: Path) -> _Run:
    config_file = tmp_path / f"config-{len(list(tmp_path.glob('config-*')))}.json"
    config_file.write_text(config.model_dump_json())
    done = subprocess.run(
        [sys.executable, "-m", "alallo.trainers.trl", str(config_file)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = done.stdout.splitlines()
    # stdout carries protocol lines only; library chatter goes to stderr.
    assert all(json.loads(line)["type"] for line in lines), done.stdout
    return _Run(done.returncode, [parse_line(line) for line in lines], done.stderr)


def _assert_trained(run: _Run, config: TrainerConfig, *, first_step: int = 1) -> None:
    assert run.returncode == 0, run.stderr
    stages = run.of(Stage)
    assert [s.stage for s in stages] == ["model_loaded", "data_loaded", "training_start"]
    assert all(len(s.hash or "") == 16 for s in stages[:2])
    steps = [p.step for p in run.of(Progress)]
    assert steps == list(range(first_step, config.max_steps + 1))
    assert {p.max_steps for p in run.of(Progress)} == {config.max_steps}
    logged = [
        step for step in steps if step % config.logging_steps == 0 or step == config.max_steps
    ]
    losses = {p.step: p.loss for p in run.of(Progress) if p.loss is not None}
    assert sorted(losses) == logged
    assert all(math.isfinite(loss) for loss in losses.values())
    for step, loss in losses.items():
        assert f"Step {step}/{config.max_steps}: loss {loss:.4f}" in run.logs
    saved = [c.step for c in run.of(Checkpoint)]
    assert saved == [s for s in steps if s % config.save_steps == 0 or s == config.max_steps]
    for checkpoint in run.of(Checkpoint):
        assert Path(checkpoint.path) == Path(config.checkpoint_dir) / f"checkpoint-{checkpoint.step}"
        assert (Path(checkpoint.path) / "trainer_state.json").is_file()
        assert f"Checkpoint saved at step {checkpoint.step}" in run.logs
    assert run.logs[-1] == "Training complete"
    done = run.messages[-1]
    assert isinstance(done, Done)
    assert done.model_path == config.output_dir
    assert done.hash is not None


def test_lora_run_speaks_the_protocol(tiny_model: Path, text_file: Path, tmp_path: Path) -> None:
    config = _config(tmp_path, tiny_model, text_file, adapter="lora", lora_rank=4)
    run = _run(config, tmp_path)
    _assert_trained(run, config)
    assert [c.step for c in run.of(Checkpoint)] == [10, 20]
    output = Path(config.output_dir)
    adapter = json.loads((output / "adapter_config.json").read_text())
    assert adapter["r"] == 4
    assert "c_attn" in adapter["target_modules"]
    assert (output / "adapter_model.safetensors").is_file()
    assert (output / "tokenizer.json").is_file()
    assert not (output / "model.safetensors").exists()


def test_full_run_saves_a_changed_model(tiny_model: Path, text_file: Path, tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    config = _config(tmp_path, tiny_model, text_file, adapter="full")
    run = _run(config, tmp_path)
    _assert_trained(run, config)
    output = Path(config.output_dir)
    assert (output / "tokenizer.json").is_file()
    trained = AutoModelForCausalLM.from_pretrained(output)
    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert not torch.equal(
        trained.transformer.h[0].attn.c_attn.weight, base.transformer.h[0].attn.c_attn.weight
    )


def test_resume_continues_after_the_checkpoint(
    tiny_model: Path, text_file: Path, tmp_path: Path
) -> None:
    first = _config(tmp_path, tiny_model, text_file, max_steps=10)
    _assert_trained(_run(first, tmp_path), first)
    checkpoint = Path(first.checkpoint_dir) / "checkpoint-10"
    second = first.model_copy(update={"max_steps": 20, "resume_from": str(checkpoint)})
    run = _run(second, tmp_path)
    _assert_trained(run, second, first_step=11)
    assert "Resuming from checkpoint at step 10" in run.logs
    assert run.of(Progress)[0].step == 11
    assert [c.step for c in run.of(Checkpoint)] == [20]


def test_messages_data_trains(tiny_model: Path, messages_file: Path, tmp_path: Path) -> None:
    config = _config(
        tmp_path, tiny_model, messages_file, data_format="messages",
        max_steps=4, logging_steps=2, save_steps=4,
    )
    _assert_trained(_run(config, tmp_path), config)


def test_prompt_completion_data_trains(
    tiny_model: Path, prompt_completion_file: Path, tmp_path: Path
) -> None:
    config = _config(
        tmp_path, tiny_model, prompt_completion_file, data_format="prompt_completion",
        max_steps=4, logging_steps=2, save_steps=4,
    )
    _assert_trained(_run(config, tmp_path), config)


def test_missing_column_is_a_user_error(
    tiny_model: Path, missing_column_file: Path, tmp_path: Path
) -> None:
    run = _run(_config(tmp_path, tiny_model, missing_column_file), tmp_path)
    assert run.returncode == 1
    assert run.messages == [Error(kind="user", message='line 3: missing column "text"')]


def test_wrong_format_names_the_expected_column(
    tiny_model: Path, text_file: Path, tmp_path: Path
) -> None:
    run = _run(_config(tmp_path, tiny_model, text_file, data_format="messages"), tmp_path)
    assert run.returncode == 1
    assert run.messages == [Error(kind="user", message='line 1: missing column "messages"')]


def test_four_bit_without_a_gpu_is_a_user_error(
    tiny_model: Path, text_file: Path, tmp_path: Path
) -> None:
    run = _run(_config(tmp_path, tiny_model, text_file, precision="4-bit"), tmp_path)
    assert run.returncode == 1
    error = run.messages[-1]
    assert isinstance(error, Error)
    assert error.kind == "user"
    assert "4-bit" in error.message and "GPU" in error.message


def test_bad_config_is_a_user_error(tmp_path: Path) -> None:
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({"job_id": "x", "max_steps": 0}))
    done = subprocess.run(
        [sys.executable, "-m", "alallo.trainers.trl", str(config_file)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 1
    error = parse_line(done.stdout.splitlines()[-1])
    assert isinstance(error, Error)
    assert error.kind == "user"
    assert "max_steps" in error.message


def test_load_training_dataset_has_trl_columns(
    text_file: Path, messages_file: Path, prompt_completion_file: Path
) -> None:
    text = load_training_dataset(text_file, "text")
    assert text.column_names == ["text"] and len(text) == 32
    messages = load_training_dataset(messages_file, "messages")
    assert messages.column_names == ["messages"]
    assert messages[0]["messages"][1] == {"role": "assistant", "content": "It is 1."}
    pairs = load_training_dataset(prompt_completion_file, "prompt_completion")
    assert pairs.column_names == ["prompt", "completion"]
