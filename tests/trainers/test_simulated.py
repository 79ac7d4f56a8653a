"""The simulated trainer, and the torch-free data checks it shares with the TRL trainer.

The trainer runs in-process (``main([config])``, stdout captured, ``sleep``
replaced), so these tests take milliseconds; one test runs it as the runtime
does, as ``python -m alallo.trainers.simulated``, to check what it imports.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
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
from alallo.trainers import simulated
from alallo.trainers._data import UserDataError, file_hash, read_rows, tree_hash

_Message = Log | Stage | Progress | Checkpoint | Done | Error


@dataclass(frozen=True)
class _Run:
    returncode: int
    messages: list[_Message]

    def of(self, kind: type[Any]) -> list[Any]:
        return [m for m in self.messages if isinstance(m, kind)]

    @property
    def logs(self) -> list[str]:
        return [m.text for m in self.of(Log)]


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays the trainer slept, instead of sleeping."""
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


def _config(tmp_path: Path, data: Path, **overrides: Any) -> TrainerConfig:
    fields: dict[str, Any] = {
        "job_id": "ft-sim",
        "model": str(tmp_path / "no-model"),
        "model_name": "alallo/tiny-gpt2",
        "training_file": str(data),
        "data_format": "text",
        "output_dir": str(tmp_path / "model"),
        "checkpoint_dir": str(tmp_path / "checkpoints"),
        "max_steps": 20,
        "logging_steps": 10,
        "save_steps": 10,
    }
    return TrainerConfig.model_validate({**fields, **overrides})


def _run(config: TrainerConfig, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> _Run:
    config_file = tmp_path / "config.json"
    config_file.write_text(config.model_dump_json())
    capsys.readouterr()
    code = simulated.main([str(config_file)])
    lines = capsys.readouterr().out.splitlines()
    assert all(json.loads(line)["type"] for line in lines)
    return _Run(code, [parse_line(line) for line in lines])


def test_run_speaks_the_protocol(
    text_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    config = _config(tmp_path, text_file)
    run = _run(config, tmp_path, capsys)
    assert run.returncode == 0
    assert [s.stage for s in run.of(Stage)] == ["model_loaded", "data_loaded", "training_start"]
    assert run.of(Stage)[1].hash == file_hash(text_file)
    assert [p.step for p in run.of(Progress)] == list(range(1, 21))
    assert run.of(Progress)[7].epoch == 1.0  # 32 examples, batches of 4
    losses = {p.step: p.loss for p in run.of(Progress) if p.loss is not None}
    assert losses == {10: simulated.fake_loss(10), 20: simulated.fake_loss(20)}
    assert losses[20] < losses[10]
    assert f"Step 10/20: loss {losses[10]:.4f}" in run.logs
    checkpoints = tmp_path / "checkpoints"
    assert run.of(Checkpoint) == [
        Checkpoint(
            step=step,
            path=str(checkpoints / f"checkpoint-{step}"),
            hash=file_hash(checkpoints / f"checkpoint-{step}" / simulated.STATE_FILE),
        )
        for step in (10, 20)
    ]
    for step in (10, 20):
        state_file = tmp_path / "checkpoints" / f"checkpoint-{step}" / "trainer_state.json"
        state = json.loads(state_file.read_text())
        assert state == {"global_step": step}
        assert f"Checkpoint saved at step {step}" in run.logs
    assert run.logs[-1] == "Training complete"
    assert run.messages[-1] == Done(
        model_path=config.output_dir, hash=file_hash(tmp_path / "model" / simulated.MODEL_FILE)
    )
    assert sleeps == []


def test_last_step_reports_loss_and_saves(
    text_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    run = _run(_config(tmp_path, text_file, max_steps=35), tmp_path, capsys)
    assert [p.step for p in run.of(Progress) if p.loss is not None] == [10, 20, 30, 35]
    assert [c.step for c in run.of(Checkpoint)] == [10, 20, 30, 35]
    # The newest three are kept (OpenAI keeps 3), as the real trainer's save_total_limit does.
    kept = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert kept == ["checkpoint-20", "checkpoint-30", "checkpoint-35"]


def test_each_step_sleeps_step_delay(
    text_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    run = _run(_config(tmp_path, text_file, max_steps=3, step_delay_s=0.25), tmp_path, capsys)
    assert run.returncode == 0
    assert sleeps == [0.25, 0.25, 0.25]


def test_resume_continues_after_the_checkpoint(
    text_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    first = _config(tmp_path, text_file, max_steps=10)
    assert _run(first, tmp_path, capsys).returncode == 0
    checkpoint = tmp_path / "checkpoints" / "checkpoint-10"
    second = first.model_copy(update={"max_steps": 20, "resume_from": str(checkpoint)})
    run = _run(second, tmp_path, capsys)
    assert run.returncode == 0
    assert "Resuming from checkpoint at step 10" in run.logs
    assert [p.step for p in run.of(Progress)] == list(range(11, 21))
    assert [c.step for c in run.of(Checkpoint)] == [20]
    assert isinstance(run.messages[-1], Done)


def test_fail_at_step_is_a_platform_error(
    text_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    run = _run(_config(tmp_path, text_file, fail_at_step=7), tmp_path, capsys)
    assert run.returncode == 1
    assert [p.step for p in run.of(Progress)] == [1, 2, 3, 4, 5, 6]
    assert run.messages[-1] == Error(kind="platform", message="simulated failure at step 7")
    assert not (tmp_path / "model").exists()


def test_resuming_past_fail_at_step_succeeds(
    text_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    first = _config(tmp_path, text_file, fail_at_step=15)
    assert _run(first, tmp_path, capsys).returncode == 1
    checkpoint = tmp_path / "checkpoints" / "checkpoint-10"
    again = first.model_copy(update={"resume_from": str(checkpoint), "fail_at_step": 5})
    run = _run(again, tmp_path, capsys)
    assert run.returncode == 0
    assert [p.step for p in run.of(Progress)] == list(range(11, 21))


def test_unreadable_checkpoint_is_a_platform_error(
    text_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    config = _config(tmp_path, text_file, resume_from=str(tmp_path / "nowhere"))
    run = _run(config, tmp_path, capsys)
    assert run.returncode == 1
    error = run.messages[-1]
    assert isinstance(error, Error) and error.kind == "platform"
    assert "cannot resume from" in error.message


def test_missing_column_is_a_user_error(
    missing_column_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(_config(tmp_path, missing_column_file), tmp_path, capsys)
    assert run.returncode == 1
    assert run.messages == [Error(kind="user", message='line 3: missing column "text"')]


def test_bad_config_is_a_user_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({"job_id": "x"}))
    assert simulated.main([str(config_file)]) == 1
    error = parse_line(capsys.readouterr().out.splitlines()[-1])
    assert isinstance(error, Error) and error.kind == "user"
    assert "invalid trainer config" in error.message


def test_wrong_arguments_print_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert simulated.main([]) == 2
    assert "usage:" in capsys.readouterr().err


def test_runs_as_a_module_without_torch(text_file: Path, tmp_path: Path) -> None:
    config_file = tmp_path / "config.json"
    config_file.write_text(_config(tmp_path, text_file, max_steps=3).model_dump_json())
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "alallo.trainers.simulated", str(config_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert isinstance(parse_line(done.stdout.splitlines()[-1]), Done)
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert not imported & {"torch", "transformers", "datasets", "trl", "peft", "numpy"}


# The checks below are ``_data.read_rows``, which both trainers use.


def _write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "data.jsonl"
    if isinstance(text, str):
        path.write_text(text)
    else:
        path.write_bytes(text)
    return path


@pytest.mark.parametrize(
    ("data_format", "text", "message"),
    [
        ("text", '{"text": "a"}\n{"txt": "b"}\n', 'line 2: missing column "text"'),
        ("text", '{"text": 3}\n', 'line 1: column "text" must be a string, got a number'),
        ("text", '{"text": "a"}\n{"text": \n', "line 2: not valid JSON (Expecting value)"),
        ("text", '["text"]\n', "line 1: expected a JSON object, got a list"),
        ("text", "\n  \n", "the training file has no examples: expected one JSON object per line"),
        ("prompt_completion", '{"prompt": "a"}\n', 'line 1: missing column "completion"'),
        ("messages", '{"text": "a"}\n', 'line 1: missing column "messages"'),
        (
            "messages",
            '{"messages": []}\n',
            'line 1: column "messages" must be a non-empty list, got an empty list',
        ),
        (
            "messages",
            '{"messages": [{"role": "bot", "content": "x"}]}\n',
            'line 1: column "messages", item 0: "role" must be one of assistant, system, tool, '
            "user, got 'bot'",
        ),
        (
            "messages",
            '{"messages": [{"role": "user"}]}\n',
            'line 1: column "messages", item 0: "content" must be a string, got null',
        ),
    ],
)
def test_bad_rows_name_line_and_column(
    tmp_path: Path, data_format: Any, text: str, message: str
) -> None:
    with pytest.raises(UserDataError) as raised:
        read_rows(_write(tmp_path, text), data_format)
    assert str(raised.value) == message


def test_rows_keep_only_the_format_columns(tmp_path: Path) -> None:
    text = (
        '{"messages": [{"role": "user", "content": "hi", "name": "x"}], "id": 1}\n'
        "\n"
        '{"messages": [{"role": "assistant", "content": "yo"}]}\n'
    )
    rows = read_rows(_write(tmp_path, "\ufeff" + text), "messages")
    assert rows == [
        {"messages": [{"role": "user", "content": "hi"}]},
        {"messages": [{"role": "assistant", "content": "yo"}]},
    ]
    pair = _write(tmp_path, '{"prompt": "a", "completion": "b", "x": 1}\n')
    pairs = read_rows(pair, "prompt_completion")
    assert pairs == [{"prompt": "a", "completion": "b"}]


def test_preference_pairs_become_prompt_chosen_rejected(tmp_path: Path) -> None:
    plain = _write(tmp_path, '{"prompt": "a", "chosen": "b", "rejected": "c", "x": 1}\n')
    assert read_rows(plain, "chosen_rejected") == [{"prompt": "a", "chosen": "b",
                                                    "rejected": "c"}]
    user, good, bad = ({"role": r, "content": c} for r, c in
                       (("user", "hi"), ("assistant", "hello"), ("assistant", "what")))
    openai = _write(tmp_path, json.dumps({"input": {"messages": [user], "tools": []},
                                          "preferred_output": [good],
                                          "non_preferred_output": [bad]}) + "\n")
    assert read_rows(openai, "preference") == [{"prompt": [user], "chosen": [good],
                                                "rejected": [bad]}]
    with pytest.raises(UserDataError, match='line 1: missing column "non_preferred_output"'):
        read_rows(_write(tmp_path, json.dumps({"input": {"messages": [user]},
                                               "preferred_output": [good]}) + "\n"),
                  "preference")


def test_tree_hash_ignores_location_and_skipped_files(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name / "sub").mkdir(parents=True)
        (tmp_path / name / "sub" / "weights.bin").write_bytes(b"\x00\x01")
        (tmp_path / name / "config.json").write_text("{}")
    (tmp_path / "b" / "optimizer.pt").write_bytes(b"state")
    assert tree_hash(tmp_path / "a") == tree_hash(tmp_path / "b", skip=("optimizer",))
    assert tree_hash(tmp_path / "a") != tree_hash(tmp_path / "b")
    (tmp_path / "b" / "config.json").write_text("{ }")
    assert tree_hash(tmp_path / "a") != tree_hash(tmp_path / "b", skip=("optimizer",))


def test_non_utf8_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserDataError, match="not UTF-8"):
        read_rows(_write(tmp_path, b'{"text": "\xff"}\n'), "text")


def test_noise_and_slow_steps_shape_the_step_times(tmp_path: Path) -> None:
    """Step times follow the configured noise and slow steps (and are reproducible)."""
    import random as _random

    from alallo.trainers._protocol import TrainerConfig
    from alallo.trainers.simulated import _step_time

    config = TrainerConfig(
        job_id="ft-1", model=str(tmp_path), model_name="m", training_file=str(tmp_path / "f"),
        data_format="text", output_dir=str(tmp_path), checkpoint_dir=str(tmp_path),
        max_steps=1000, step_delay_s=0.1, step_noise=0.5, slow_step_every=100,
        slow_step_factor=20)
    rng, rng_again = _random.Random(7), _random.Random(7)
    times = [_step_time(config, step, rng) for step in range(1, 1001)]
    again = [_step_time(config, step, rng_again) for step in range(1, 1001)]
    assert times == again
    slow = [t for step, t in enumerate(times, start=1) if step % 100 == 0]
    fast = [t for step, t in enumerate(times, start=1) if step % 100]
    assert len(slow) == 10 and min(slow) > 0.1
    mean = sum(fast) / len(fast)
    assert 0.08 < mean < 0.12 and max(fast) > 0.2 and min(fast) < 0.05
