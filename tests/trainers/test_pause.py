"""A trainer asked to pause (its ``ALALLO_PAUSE_FILE`` exists) saves a checkpoint at its
step and exits 0 without a model; resumed from that checkpoint it goes on to the end. The
simulated trainer in-process, the TRL one as the runtime starts it (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from alallo.trainers import Checkpoint, Done, Log, Progress, TrainerConfig, parse_line
from alallo.trainers import simulated
from alallo.trainers._pause import PAUSE_FILE_ENV


def _config(tmp_path: Path, model: Path, data: Path, **overrides: Any) -> TrainerConfig:
    return TrainerConfig.model_validate({
        "job_id": "ft-pause", "model": str(model), "model_name": "alallo/tiny-gpt2",
        "training_file": str(data), "data_format": "text",
        "output_dir": str(tmp_path / "model"), "checkpoint_dir": str(tmp_path / "checkpoints"),
        "max_steps": 4, "logging_steps": 2, "save_steps": 2, "batch_size": 4,
        "max_seq_length": 64, **overrides})


def _messages(out: str) -> list[Any]:
    return [parse_line(line) for line in out.splitlines()]


@pytest.mark.unit
@pytest.mark.parametrize(("save_steps", "saved"), [(10, [3]), (3, [3])],
                         ids=["between-saves", "on-a-save"])
def test_the_simulated_trainer_saves_once_at_the_paused_step_and_exits_without_a_model(
        tmp_path: Path, text_file: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, save_steps: int, saved: list[int]) -> None:
    pause = tmp_path / "pause-requested"
    monkeypatch.setenv(PAUSE_FILE_ENV, str(pause))
    steps = 0

    def sleep(_: float) -> None:  # the user pauses during step 3
        nonlocal steps
        steps += 1
        if steps == 3:
            pause.touch()

    monkeypatch.setattr(time, "sleep", sleep)
    config = _config(tmp_path, tmp_path / "no-model", text_file, max_steps=20,
                     save_steps=save_steps, step_delay_s=0.01)
    (tmp_path / "config.json").write_text(config.model_dump_json())
    capsys.readouterr()
    assert simulated.main([str(tmp_path / "config.json")]) == 0
    messages = _messages(capsys.readouterr().out)
    assert [m.step for m in messages if isinstance(m, Checkpoint)] == saved
    assert [m.step for m in messages if isinstance(m, Progress)][-1] == 3
    assert not any(isinstance(m, Done) for m in messages)
    assert messages[-1] == Log(text="Paused at step 3: the job resumes from this checkpoint")

    resumed = config.model_copy(update={"resume_from": str(tmp_path / "checkpoints" /
                                                           "checkpoint-3")})
    pause.unlink()
    (tmp_path / "config.json").write_text(resumed.model_dump_json())
    assert simulated.main([str(tmp_path / "config.json")]) == 0
    progress = [m.step for m in _messages(capsys.readouterr().out) if isinstance(m, Progress)]
    assert progress == list(range(4, 21))


@pytest.mark.slow
def test_the_trl_trainer_saves_a_checkpoint_when_paused_and_exits_without_a_model(
        tmp_path: Path, tiny_model: Path, text_file: Path) -> None:
    pause = tmp_path / "pause-requested"
    pause.touch()  # asked before its first step: it stops after step 1
    config = _config(tmp_path, tiny_model, text_file)

    path = tmp_path / "config.json"
    path.write_text(config.model_dump_json())
    done = subprocess.run([sys.executable, "-m", "alallo.trainers.trl", str(path)],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, PAUSE_FILE_ENV: str(pause)})
    assert done.returncode == 0, done.stderr
    assert all(json.loads(line)["type"] for line in done.stdout.splitlines()), done.stderr
    messages = _messages(done.stdout)
    checkpoints = [m for m in messages if isinstance(m, Checkpoint)]
    assert [c.step for c in checkpoints] == [1], messages
    assert (Path(checkpoints[0].path) / "trainer_state.json").is_file()
    assert not any(isinstance(m, Done) for m in messages)
    assert not (tmp_path / "model").exists(), "a paused run saves no model"
    # Resuming from a checkpoint of the TRL trainer: tests/trainers/test_trl.py.
