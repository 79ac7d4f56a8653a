"""The TRL trainer, run for real as ``python -m alallo.trainers.trl`` on the tiny model.

Each run is a subprocess, as the runtime starts it, and most of its cost is
importing torch, transformers and TRL (several seconds of one CPU). So the
runs are few and short, and the module starts them all at once in the
background (:func:`runs`), a few at a time; each test waits for its own.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

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

pytestmark = pytest.mark.slow

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
        "job_id": f"ft-{tmp_path.name}",
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


def _run(config: TrainerConfig) -> _Run:
    config_file = Path(config.checkpoint_dir).parent / f"{config.job_id}.json"
    config_file.parent.mkdir(parents=True, exist_ok=True)
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


@dataclass(frozen=True)
class _Started:
    config: TrainerConfig
    future: Future[_Run]

    def result(self) -> _Run:
        return self.future.result()


@pytest.fixture(scope="module")
def runs(
    tiny_model: Path,
    text_file: Path,
    messages_file: Path,
    prompt_completion_file: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, _Started]]:
    """The module's independent runs, started in the background, by name."""
    root = tmp_path_factory.mktemp("trl")
    short = {"max_steps": 4, "logging_steps": 2, "save_steps": 4}
    configs = {
        # First: the resume test continues from its checkpoint-10 once it ends.
        "lora": _config(root / "lora", tiny_model, text_file, adapter="lora", lora_rank=4),
        "full": _config(root / "full", tiny_model, text_file, adapter="full"),
        "messages": _config(root / "messages", tiny_model, messages_file,
                            data_format="messages", **short),
        # Names a tiny model that is not built yet: the trainer builds it.
        "prompt_completion": _config(root / "pc", root / "models" / "alallo--tiny-gpt2",
                                     prompt_completion_file, data_format="prompt_completion",
                                     **short),
        "4-bit": _config(root / "4bit", tiny_model, text_file, precision="4-bit",
                         max_steps=4, logging_steps=2, save_steps=2),
        "tuned": _config(root / "tuned", tiny_model, text_file, lora_rank=4, lora_alpha=16,
                         lora_dropout=0.05, lora_target_modules=["c_attn"], warmup_ratio=0.25,
                         weight_decay=0.01, **short),
        "bad_targets": _config(root / "bad-targets", tiny_model, text_file,
                               lora_target_modules=["no_such_module"], **short),
        # The user's own model (an absolute path) whose config.json is "{}".
        "users_model": _config(root / "users", _broken_model(root / "users-model"), text_file,
                               model_name=str(root / "users-model")),
    }
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        yield {name: _Started(c, pool.submit(_run, c)) for name, c in configs.items()}


def _broken_model(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / "config.json").write_text("{}")
    return directory


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
        expected = Path(config.checkpoint_dir) / f"checkpoint-{checkpoint.step}"
        assert Path(checkpoint.path) == expected
        assert (Path(checkpoint.path) / "trainer_state.json").is_file()
        assert len(checkpoint.hash or "") == 16
        assert f"Checkpoint saved at step {checkpoint.step}" in run.logs
    assert run.logs[-1] == "Training complete"
    done = run.messages[-1]
    assert isinstance(done, Done)
    assert done.model_path == config.output_dir
    assert done.hash is not None


def test_lora_run_speaks_the_protocol(runs: dict[str, _Started]) -> None:
    config, run = runs["lora"].config, runs["lora"].result()
    _assert_trained(run, config)
    assert [c.step for c in run.of(Checkpoint)] == [10, 20]
    output = Path(config.output_dir)
    adapter = json.loads((output / "adapter_config.json").read_text())
    assert adapter["r"] == 4
    assert "c_attn" in adapter["target_modules"]
    assert (output / "adapter_model.safetensors").is_file()
    assert (output / "tokenizer.json").is_file()
    assert not (output / "model.safetensors").exists()


def test_full_run_saves_a_changed_model(runs: dict[str, _Started], tiny_model: Path) -> None:
    from safetensors.numpy import load_file

    config, run = runs["full"].config, runs["full"].result()
    _assert_trained(run, config)
    output = Path(config.output_dir)
    assert (output / "tokenizer.json").is_file()
    assert not (output / "adapter_config.json").exists()
    trained = load_file(output / "model.safetensors")
    base = load_file(tiny_model / "model.safetensors")
    name = "transformer.h.0.attn.c_attn.weight"
    assert trained[name].shape == base[name].shape
    assert (trained[name] != base[name]).any()


def test_resume_continues_after_the_checkpoint(
    runs: dict[str, _Started], tmp_path: Path
) -> None:
    # As after a crash at step 1x: the LoRA run's checkpoint-10, the same max_steps.
    first = runs["lora"].config
    assert runs["lora"].result().returncode == 0
    checkpoint = Path(first.checkpoint_dir) / "checkpoint-10"
    second = first.model_copy(
        update={
            "resume_from": str(checkpoint),
            "checkpoint_dir": str(tmp_path / "checkpoints"),
            "output_dir": str(tmp_path / "model"),
        }
    )
    run = _run(second)
    _assert_trained(run, second, first_step=11)
    assert "Resuming from checkpoint at step 10" in run.logs
    assert [c.step for c in run.of(Checkpoint)] == [20]
    assert (Path(second.output_dir) / "adapter_model.safetensors").is_file()


def test_messages_data_trains(runs: dict[str, _Started]) -> None:
    _assert_trained(runs["messages"].result(), runs["messages"].config)


def test_prompt_completion_data_trains(runs: dict[str, _Started]) -> None:
    config, run = runs["prompt_completion"].config, runs["prompt_completion"].result()
    _assert_trained(run, config)
    assert run.logs[:2] == ["Building model alallo/tiny-gpt2", "Loading model alallo/tiny-gpt2"]
    assert (Path(config.model) / "config.json").is_file()


def test_four_bit_trains_on_the_cpu_and_resumes_from_its_checkpoint(
        runs: dict[str, _Started], tmp_path: Path) -> None:
    """QLoRA on the CPU (bitsandbytes' CPU kernels): NF4 weights, a LoRA adapter saved as the
    16-bit model's would be, and a run that resumes from a checkpoint as a 16-bit run does."""
    config, run = runs["4-bit"].config, runs["4-bit"].result()
    _assert_trained(run, config)
    assert run.logs[:2] == [
        "Loading model alallo/tiny-gpt2 in 4-bit (NF4, QLoRA)",
        "Quantized 74% of the model's weights to 4-bit; the embeddings, norms and output "
        "layer keep their precision"]
    # bitsandbytes' and kernels' notices of a Hub kernel the offline trainer cannot fetch
    # stay out of the job's log (stderr is part of it).
    assert "kernels-community" not in run.stderr
    adapter = json.loads((Path(config.output_dir) / "adapter_config.json").read_text())
    assert adapter["target_modules"] == ["c_attn"] and adapter["fan_in_fan_out"] is True

    second = config.model_copy(update={
        "resume_from": str(Path(config.checkpoint_dir) / "checkpoint-2"),
        "checkpoint_dir": str(tmp_path / "checkpoints"), "output_dir": str(tmp_path / "model")})
    resumed = _run(second)
    _assert_trained(resumed, second, first_step=3)
    assert "Resuming from checkpoint at step 2" in resumed.logs
    first = {p.step: p.loss for p in run.of(Progress) if p.loss is not None}
    again = {p.step: p.loss for p in resumed.of(Progress) if p.loss is not None}
    assert again[4] == pytest.approx(first[4], rel=1e-3), "the same training, continued"


def test_the_jobs_lora_settings_make_the_adapter(runs: dict[str, _Started]) -> None:
    config, run = runs["tuned"].config, runs["tuned"].result()
    assert run.returncode == 0, run.messages[-3:]
    adapter = json.loads((Path(config.output_dir) / "adapter_config.json").read_text())
    assert (adapter["r"], adapter["lora_alpha"], adapter["lora_dropout"]) == (4, 16, 0.05)
    assert adapter["target_modules"] == ["c_attn"]
    logged = [m.text for m in run.of(Log) if m.text.startswith("Step ")]
    assert [line.split(":")[0] for line in logged] == ["Step 2/4", "Step 4/4"]


def test_lora_target_modules_the_model_lacks_are_a_user_error(
        runs: dict[str, _Started]) -> None:
    run = runs["bad_targets"].result()
    assert run.returncode == 1
    error = run.messages[-1]
    assert isinstance(error, Error) and error.kind == "user"
    assert error.message.startswith("lora_target_modules ['no_such_module']: ")


def test_a_users_model_that_does_not_load_is_a_user_error(runs: dict[str, _Started]) -> None:
    # A platform error would restart the job 3 times and end it "Stopped: the budget
    # was reached"; a user error fails it at once with "Training failed: ...".
    run = runs["users_model"].result()
    assert run.returncode == 1
    error = run.messages[-1]
    assert isinstance(error, Error) and error.kind == "user"
    model = runs["users_model"].config.model_name
    assert error.message.startswith(f"cannot load the model {model}: Unrecognized model")
    assert len(error.message) <= 300


def test_a_users_model_without_config_is_a_user_error(text_file: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty-model"
    empty.mkdir()
    run = _run(_config(tmp_path, empty, text_file, model_name=str(empty)))
    assert run.returncode == 1
    assert run.messages == [
        Error(kind="user", message=f"the model directory {empty} has no config.json")]


def test_a_catalogue_model_that_does_not_load_stays_alallos_fault(
    text_file: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "catalogue-model"
    empty.mkdir()
    run = _run(_config(tmp_path, empty, text_file, model_name="meta-llama/Llama-3.2-1B"))
    assert run.returncode == 1
    assert run.messages == [
        Error(kind="platform", message=f"RuntimeError: model directory {empty} has no config.json")]


def test_missing_column_is_a_user_error(
    tiny_model: Path, missing_column_file: Path, tmp_path: Path
) -> None:
    run = _run(_config(tmp_path, tiny_model, missing_column_file))
    assert run.returncode == 1
    assert run.messages == [Error(kind="user", message='line 3: missing column "text"')]


def test_wrong_format_names_the_expected_column(
    tiny_model: Path, text_file: Path, tmp_path: Path
) -> None:
    run = _run(_config(tmp_path, tiny_model, text_file, data_format="messages"))
    assert run.returncode == 1
    assert run.messages == [Error(kind="user", message='line 1: missing column "messages"')]


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
