"""What a TRL run tells the server (the trainer protocol, :mod:`alallo.trainers._protocol`):
protocol lines on the real stdout, each step's progress and loss from a ``TrainerCallback``,
checkpoints with their hashes.

Part of :mod:`alallo.trainers.trl`; imported in the trainer's process only.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from ._data import tree_hash
from ._fence import exit_if_superseded
from ._pause import pause_requested
from ._protocol import AnyMessage, Checkpoint, Log, Metrics, Progress, emit
from ._wandb import WandbRun

__all__ = ["NOT_HASHED", "ProtocolOut", "checkpoint_step", "model_hash", "progress_callback"]

NOT_HASHED = ("optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state", "training_args.bin")
"""Files of a checkpoint left out of its hash: optimizer, scheduler and RNG state serve
resuming only; the pickled arguments hold paths."""


class ProtocolOut:
    """Writes protocol lines to the real stdout, given when entered.

    Inside ``with ProtocolOut() as out:`` ``sys.stdout`` is stderr: libraries
    print to stdout now and then (``Trainer``'s log printer, stray warnings),
    and this keeps stdout protocol lines only. A ``silent`` one writes nothing (the
    ranks other than 0 of a torchrun).
    """

    def __init__(self, *, silent: bool = False) -> None:
        self._stream: TextIO = sys.stdout
        self._silent = silent

    def __enter__(self) -> ProtocolOut:
        self._stream = sys.stdout
        sys.stdout = sys.stderr
        return self

    def __exit__(self, *exc_info: object) -> None:
        sys.stdout = self._stream

    def __call__(self, message: AnyMessage) -> None:
        if self._silent:  # a rank other than 0 of a torchrun: rank 0 speaks for all
            return
        with contextlib.redirect_stdout(self._stream):
            emit(message)


def model_hash(directory: Path) -> str:
    """The hash of a saved model or checkpoint directory, less :data:`NOT_HASHED`: identical
    runs hash alike."""
    # Optimizer, scheduler and RNG state are big and only serve resuming; the
    # pickled arguments hold paths. Without them, identical runs hash alike.
    return tree_hash(directory, skip=NOT_HASHED)


DPO_FIGURES = (("rewards/accuracies", "reward accuracy"), ("rewards/margins", "reward margin"),
               ("rewards/chosen", "rewards/chosen"), ("rewards/rejected", "rewards/rejected"))
"""TRL's DPO metrics and the words the log gives them: how often the preferred answer out-
scores the other, by how much, and each side's implicit reward (beta × log-ratio to the
reference model)."""

_TRAIN_FIGURES = (("loss", "train_loss"), ("mean_token_accuracy", "train_mean_token_accuracy"),
                  ("learning_rate", "learning_rate"), ("grad_norm", "grad_norm"),
                  ("rewards/accuracies", "reward_accuracy"), ("rewards/margins", "reward_margin"),
                  ("reward", "reward"), ("reward_std", "reward_std"))
"""``Trainer``/TRL log keys of a logging step, and the protocol's names for them."""


def _number(logs: dict[str, Any], key: str) -> float | None:
    value = logs.get(key)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def progress_callback(out: ProtocolOut, run: WandbRun | None, *, evaluates: bool = False) -> Any:
    """A ``transformers.TrainerCallback`` that reports each step once, in order (a
    ``progress`` line, with the loss on logging steps), the figures of each logging step
    and evaluation (``metrics`` lines), each checkpoint with its hash, and the loss to W&B
    when ``run`` is given. With ``evaluates``, the last step is evaluated too, and the
    model's validation figures are reported as ``full_valid_*`` at the end."""
    from transformers import TrainerCallback

    class _ProgressCallback(TrainerCallback):
        """Reports each step once, in order, with its loss on logging steps.

        ``on_step_end`` runs before ``Trainer`` logs the step, so a logging
        step is held back until ``on_log`` brings its loss; any hook after
        that (save, next step, end) reports a held step without one.
        """

        def __init__(self) -> None:
            self._reported = -1
            self._held: int | None = None
            self._tokens = 0.0  # TRL's num_tokens at the previous logging step
            self._busy_s = 0.0  # seconds in steps since then (no evaluation, no saving)
            self._step_began = 0.0
            self._evaluated: dict[int, Metrics] = {}
            self.reward: Any = None
            """Reinforcement: the reward function (:class:`~alallo.trainers._trl_rft.
            GraderReward`), whose graders' means each report takes."""
            self.paused = False
            """The run stopped for a pause (:mod:`alallo.trainers._pause`): no model."""

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._step_began = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._busy_s += time.perf_counter() - self._step_began
            if state.global_step < state.max_steps and pause_requested():
                self.paused = True  # the user paused the job: save this step, and stop
                control.should_save = control.should_training_stop = True
            if control.should_save:  # a superseded run saves nothing (a cut-off node's)
                exit_if_superseded()
            self._flush(state)
            if state.global_step >= state.max_steps:
                control.should_log = True  # the last step's loss, not just every logging_steps
                control.should_evaluate = control.should_evaluate or evaluates
            if control.should_save or control.should_evaluate:
                control.should_log = True  # each checkpoint and evaluation: the loss at its step
            if control.should_log:
                self._held = state.global_step
            else:
                self._report(state, None)

        def on_log(
            self,
            args: Any,
            state: Any,
            control: Any,
            logs: dict[str, Any] | None = None,
            **kwargs: Any,
        ) -> None:
            if logs is None:
                return
            if "eval_loss" in logs or "eval_reward" in logs:
                self._evaluation(state, logs)
            elif self._held == state.global_step and "loss" in logs:
                self._held = None
                self._report(state, float(logs["loss"]), logs)

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._flush(state)
            path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            out(Checkpoint(step=state.global_step, path=str(path), hash=model_hash(path)))
            out(Log(text=f"Checkpoint saved at step {state.global_step}"))

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._flush(state)
            best = getattr(state, "best_global_step", None)
            step = best if best in self._evaluated else max(self._evaluated, default=None)
            if step is not None and self.reward is None:  # the model's own figures: the best checkpoint's, or the last
                final = self._evaluated[step]
                out(Metrics(step=step, full_valid_loss=final.valid_loss,
                            full_valid_mean_token_accuracy=final.valid_mean_token_accuracy))

        def _flush(self, state: Any) -> None:
            if self._held is not None:
                self._held = None
                self._report(state, None)

        def _evaluation(self, state: Any, logs: dict[str, Any]) -> None:
            self._flush(state)
            step = state.global_step
            if self.reward is not None:  # reinforcement: the answers' reward, not a loss
                self._rewarded_evaluation(state, logs)
                return
            figures = Metrics(step=step, epoch=state.epoch,
                              valid_loss=_number(logs, "eval_loss"),
                              valid_mean_token_accuracy=_number(logs,
                                                                "eval_mean_token_accuracy"))
            self._evaluated[step] = figures
            out(figures)
            accuracy = figures.valid_mean_token_accuracy
            out(Log(text=f"Step {step}/{state.max_steps}: validation loss "
                         f"{figures.valid_loss:.4f}"
                         + (f", mean token accuracy {accuracy:.4f}" if accuracy is not None
                            else "")))
            if run is not None and figures.valid_loss is not None:
                run.log({"eval/loss": figures.valid_loss}, step=step)

        def _rewarded_evaluation(self, state: Any, logs: dict[str, Any]) -> None:
            step = state.global_step
            scores = {f"valid.{name}": score
                      for name, score in self.reward.take(training=False).items()}
            figures = Metrics(step=step, epoch=state.epoch,
                              valid_reward=_number(logs, "eval_reward"), scores=scores or None)
            self._evaluated[step] = figures
            out(figures)
            out(Log(text=f"Step {step}/{state.max_steps}: validation reward "
                         f"{figures.valid_reward or 0.0:.4f}" + _scores_text(scores)))
            if run is not None and figures.valid_reward is not None:
                run.log({"eval/reward": figures.valid_reward}, step=step)

        def _report(self, state: Any, loss: float | None,
                    logs: dict[str, Any] | None = None) -> None:
            step = state.global_step
            if step <= self._reported:
                return
            self._reported = step
            out(Progress(step=step, max_steps=state.max_steps, epoch=state.epoch, loss=loss))
            if loss is None or logs is None:
                return
            scores = self.reward.take() if self.reward is not None else None
            figures = Metrics.model_validate({
                "step": step, "epoch": state.epoch, "tokens_per_s": self._pace(logs),
                "scores": scores or None,
                **{name: _number(logs, key) for key, name in _TRAIN_FIGURES}})
            out(figures)
            out(Log(text=f"Step {step}/{state.max_steps}: loss {loss:.4f}"))
            if figures.reward is not None:
                out(Log(text=f"Step {step}/{state.max_steps}: reward {figures.reward:.4f} "
                             f"(spread {figures.reward_std or 0.0:.4f})"
                             + _scores_text(scores or {})))
                if run is not None:
                    run.log({"train/reward": figures.reward}, step=step)
            if run is not None:
                run.log({"train/loss": loss}, step=step)
            if "rewards/accuracies" in logs:  # DPO's own figures (TRL's names)
                out(Log(text=f"Step {step}/{state.max_steps}: " + ", ".join(
                    f"{name} {float(logs[key]):.4f}" for key, name in DPO_FIGURES
                    if key in logs)))

        def _pace(self, logs: dict[str, Any]) -> float | None:
            """Tokens per second of training since the previous logging step: TRL's
            ``num_tokens`` (every rank's, counted from 0 by each run) over the seconds
            spent in steps, evaluations and checkpoints left out."""
            tokens, busy = _number(logs, "num_tokens"), self._busy_s
            self._busy_s = 0.0
            if tokens is None or busy <= 0:
                return None
            before, self._tokens = self._tokens, tokens
            return round((tokens - before) / busy, 1)

    return _ProgressCallback()


def _scores_text(scores: dict[str, float]) -> str:
    """``; graders: exact 0.5000, fuzzy 0.7100`` (a ``multi`` grader's sub-graders)."""
    if len(scores) < 2:
        return ""
    return "; graders: " + ", ".join(f"{name.removeprefix('valid.')} {score:.4f}"
                                     for name, score in scores.items())


def checkpoint_step(path: Path) -> int:
    """The step a ``Trainer`` checkpoint directory was saved at (its ``trainer_state.json``).

    Raises:
        RuntimeError: ``path`` is not a readable ``Trainer`` checkpoint.
    """
    try:
        return int(json.loads((path / "trainer_state.json").read_text())["global_step"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RuntimeError(
            f"cannot resume from {path}: expected a Trainer checkpoint directory "
            f"with trainer_state.json ({exc})"
        ) from exc
