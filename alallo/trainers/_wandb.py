"""Reporting a run's metrics to Weights & Biases, for both built-in trainers.

The trainer logs in (online mode) and starts a run before training, and
says how that went with an ``Integration`` line: a failure makes alallo
cancel the job with the events of seed 000 (WANDB_INIT, CANCEL_REQUESTED,
JOB_STOPPED). ``wandb`` is imported only when a job asks for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ._protocol import Integration, WandbConfig, emit

Emit = Callable[[Integration], None]

__all__ = ["WandbFailed", "WandbRun", "start_wandb"]

LOGIN_TIMEOUT_S = 10.0


class WandbFailed(Exception):
    """W&B login or init failed; the ``Integration`` line has been emitted."""


class WandbRun:
    """A started W&B run: :meth:`log` metrics by step, :meth:`finish` at the end."""

    def __init__(self, run: Any) -> None:
        self._run = run

    def log(self, metrics: dict[str, float], *, step: int) -> None:
        """Record ``metrics`` (e.g. ``{"train/loss": 2.1}``) at ``step``."""
        self._run.log(metrics, step=step)

    def finish(self) -> None:
        """Close the run (flushes the summary)."""
        self._run.finish()


def start_wandb(config: WandbConfig, out: Emit = emit) -> WandbRun:
    """Log in (online mode) and start a run, then report it with ``out``.

    Raises:
        WandbFailed: the login or init failed (the reason went out as an
            ``Integration(ok=False)`` line).
    """
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_DIR"] = config.dir
    if config.base_url:
        os.environ["WANDB_BASE_URL"] = config.base_url
    os.makedirs(config.dir, exist_ok=True)
    try:
        import wandb

        if config.mode == "online":
            wandb.login(key=config.api_key, verify=True, relogin=True,
                        host=config.base_url, timeout=int(LOGIN_TIMEOUT_S))
        else:
            os.environ["WANDB_API_KEY"] = config.api_key
        run = wandb.init(project=config.project, name=config.name, entity=config.entity,
                         tags=config.tags, mode=config.mode, dir=config.dir)
    except Exception as exc:  # W&B raises many kinds; each means "login or init failed"
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        out(Integration(ok=False, message=reason))
        raise WandbFailed(reason) from exc
    out(Integration(ok=True, message=f"project {config.project}, run {run.name} ({config.mode})"))
    return WandbRun(run)
