"""A scripted trainer that speaks the trainer protocol without training.

``python -m alallo.trainers.simulated CONFIG.json`` behaves like
``alallo.trainers.trl`` seen from outside: the same stage lines, one
``progress`` line per step, a loss and a ``Step N/M: loss X`` log line every
``logging_steps`` and at the last step, a ``checkpoint-<step>`` directory
every ``save_steps`` and at the last step (the newest three are kept), resume
from a checkpoint, user errors for bad data, and a model directory with a
``done`` line at the end. It imports neither torch nor ``datasets``, so it
starts in a fraction of a second; the runtime's tests and load runs use it.

Two config fields script it: ``step_delay_s`` (each step sleeps that long)
and ``fail_at_step`` (the trainer reports a platform error and exits 1 when
it reaches that step on a fresh start; a run resumed from a checkpoint
goes past it, as a real job restarted after a crash would). It honours a pause
(:mod:`alallo.trainers._pause`) after any step. The loss is a fixed
decreasing function of the step, so runs are reproducible.

A checkpoint holds ``trainer_state.json`` with ``global_step``, the same file
and field as a Hugging Face ``Trainer`` checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import sys
import time
import traceback
from pathlib import Path

from pydantic import ValidationError

from ._data import UserDataError, file_hash, read_rows
from ._fence import exit_if_superseded
from ._pause import pause_requested
from ._protocol import (
    Checkpoint,
    Done,
    Error,
    Log,
    Metrics,
    Progress,
    Stage,
    TrainerConfig,
    emit,
)
from ._wandb import WandbFailed, start_wandb

__all__ = ["MODEL_FILE", "STATE_FILE", "fake_loss", "main"]

STATE_FILE = "trainer_state.json"
"""The checkpoint file holding ``{"global_step": N}``."""
MODEL_FILE = "simulated_model.json"
"""The file the simulated trainer writes into ``output_dir``."""


class _PlatformFailure(RuntimeError):
    """The scripted ``fail_at_step`` was reached, or a checkpoint is unreadable."""


def fake_loss(step: int) -> float:
    """The loss reported at ``step``: 1 + 4 * 0.97^step, rounded to 4 places.

    It falls from 5 towards 1 and depends on the step only, so a resumed run
    reports the losses the uninterrupted run would have.
    """
    return round(1.0 + 4.0 * 0.97**step, 4)


def main(argv: list[str] | None = None) -> int:
    """Run the simulated trainer on the config file ``argv[0]``; return the exit code.

    Returns:
        0 after a ``done`` line; 1 after an ``error`` line; 2 when the
        command line is wrong (a message goes to stderr).
    """
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m alallo.trainers.simulated CONFIG.json", file=sys.stderr)
        return 2
    try:
        config = TrainerConfig.model_validate_json(Path(args[0]).read_bytes())
        _train(config)
    except WandbFailed:
        return 1
    except UserDataError as exc:
        emit(Error(kind="user", message=str(exc)))
        return 1
    except ValidationError as exc:
        emit(Error(kind="user", message=_config_problem(exc)))
        return 1
    except _PlatformFailure as exc:
        emit(Error(kind="platform", message=str(exc)))
        return 1
    except Exception as exc:
        traceback.print_exc()
        emit(Error(kind="platform", message=f"{type(exc).__name__}: {exc}"))
        return 1
    return 0


def _config_problem(exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'config'}: {error['msg']}"
        for error in exc.errors()
    )
    return f"invalid trainer config: {problems}"


def _train(config: TrainerConfig) -> None:
    # Like the TRL trainer: a bad line fails the run before anything loads.
    rows = read_rows(Path(config.training_file), config.data_format)
    emit(Log(text=f"Loading model {config.model_name}"))
    emit(Stage(stage="model_loaded", hash=_model_hash(config)))
    emit(Log(text=f"Loaded {len(rows)} training examples"))
    emit(Stage(stage="data_loaded", hash=file_hash(Path(config.training_file))))
    if config.validation_file:
        valid = read_rows(Path(config.validation_file),
                          config.validation_format or config.data_format)
        emit(Log(text=f"Loaded {len(valid)} validation examples"))
        emit(Stage(stage="validation_loaded", hash=file_hash(Path(config.validation_file))))
    start = 0
    if config.resume_from is not None:
        start = _checkpoint_step(Path(config.resume_from))
        emit(Log(text=f"Resuming from checkpoint at step {start}"))
    run = start_wandb(config.wandb) if config.wandb else None
    emit(Stage(stage="training_start"))
    steps_per_epoch = math.ceil(len(rows) / config.batch_size)
    noise = random.Random(config.seed * 1_000_003 + start)
    for step in range(start + 1, config.max_steps + 1):
        if step == config.fail_at_step and config.resume_from is None:
            raise _PlatformFailure(f"simulated failure at step {step}")
        if config.step_delay_s:
            time.sleep(_step_time(config, step, noise))
        last = step == config.max_steps
        loss = fake_loss(step) if last or step % config.logging_steps == 0 else None
        epoch = step / steps_per_epoch
        memory = None
        if config.memory_gb is not None:
            memory = config.memory_gb * (config.memory_surprise if step >= 3 else 1.0)
        emit(Progress(step=step, max_steps=config.max_steps, epoch=epoch, loss=loss,
                      memory_gb=memory))
        if loss is not None:
            emit(Metrics(step=step, epoch=epoch, train_loss=loss,
                         learning_rate=config.learning_rate))
            emit(Log(text=f"Step {step}/{config.max_steps}: loss {loss:.4f}"))
            if run is not None:
                run.log({"train/loss": loss}, step=step)
        if config.validation_file and (last or step % (config.eval_steps or config.save_steps)
                                       == 0):
            valid_loss = fake_loss(step) + 0.1  # a made-up figure a little above training's
            emit(Metrics(step=step, epoch=epoch, valid_loss=valid_loss,
                         full_valid_loss=valid_loss if last else None))
            emit(Log(text=f"Step {step}/{config.max_steps}: validation loss {valid_loss:.4f}"))
        saves = last or step % config.save_steps == 0
        if saves:
            _checkpoint(config, step)
        if not last and pause_requested():  # the user paused the job: save now, and stop
            if not saves:
                _checkpoint(config, step)
            emit(Log(text=f"Paused at step {step}: the job resumes from this checkpoint"))
            if run is not None:
                run.finish()
            return
    if run is not None:
        run.finish()
    exit_if_superseded()
    model_file = _save_model(config)
    emit(Log(text="Training complete"))
    emit(Done(model_path=config.output_dir, hash=file_hash(model_file)))


def _checkpoint(config: TrainerConfig, step: int) -> None:
    exit_if_superseded()  # a superseded run (a cut-off node's) saves nothing
    path = _save_checkpoint(Path(config.checkpoint_dir), step, config.keep_checkpoints)
    emit(Checkpoint(step=step, path=str(path), hash=file_hash(path / STATE_FILE)))
    emit(Log(text=f"Checkpoint saved at step {step}"))


def _step_time(config: TrainerConfig, step: int, noise: random.Random) -> float:
    """One step's time: the delay, log-normal noise of mean 1, and the scripted slow steps."""
    delay = config.step_delay_s
    if config.step_noise:
        sigma = config.step_noise
        delay *= noise.lognormvariate(-sigma * sigma / 2, sigma)
    if config.slow_step_every and step % config.slow_step_every == 0:
        delay *= config.slow_step_factor
    return delay


def _model_hash(config: TrainerConfig) -> str:
    model_config = Path(config.model) / "config.json"
    if model_config.is_file():
        return file_hash(model_config)
    return hashlib.sha256(config.model_name.encode()).hexdigest()[:16]


def _checkpoint_step(path: Path) -> int:
    try:
        state = json.loads((path / STATE_FILE).read_text())
        return int(state["global_step"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _PlatformFailure(
            f"cannot resume from {path}: expected a checkpoint directory with "
            f"{STATE_FILE} holding global_step ({exc})"
        ) from exc


def _save_checkpoint(checkpoint_dir: Path, step: int, keep: int | None) -> Path:
    path = checkpoint_dir / f"checkpoint-{step}"
    path.mkdir(parents=True, exist_ok=True)
    (path / STATE_FILE).write_text(json.dumps({"global_step": step}))
    if keep is None:
        return path
    # Keep the newest checkpoints only, as the real trainer's save_total_limit does.
    older = sorted(
        (p for p in checkpoint_dir.glob("checkpoint-*") if _suffix_step(p) not in (None, step)),
        key=lambda p: _suffix_step(p) or 0,
    )
    for stale in older[: max(0, len(older) - (keep - 1))]:
        shutil.rmtree(stale, ignore_errors=True)
    return path


def _suffix_step(path: Path) -> int | None:
    suffix = path.name.removeprefix("checkpoint-")
    return int(suffix) if suffix.isdigit() else None


def _save_model(config: TrainerConfig) -> Path:
    output = Path(config.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    model_file = output / MODEL_FILE
    model_file.write_text(
        json.dumps(
            {
                "simulated": True,
                "base_model": config.model_name,
                "job_id": config.job_id,
                "adapter": config.adapter,
                "steps": config.max_steps,
                "final_loss": fake_loss(config.max_steps),
            },
            indent=2,
        )
    )
    return model_file


if __name__ == "__main__":
    sys.exit(main())
