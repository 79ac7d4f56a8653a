"""Following a job in the terminal: a live bar, with the log scrolling above it."""

from __future__ import annotations

import re
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
)
from rich.text import Text

from alallo._status import JobStatus
from alallo.cli._common import STATUS_STYLES, money, status_text, time_left_text
from alallo.client import Client

__all__ = ["SPARK_POINTS", "sparkline", "watch_job"]

# Log lines carry the loss in the trainer's words ("loss 2.31", "loss=2.31", "'loss': 2.31").
_LOSS = re.compile(r"\bloss\b\W{0,4}([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)", re.IGNORECASE)
_ECHOED = frozenset({"CHECKPOINT_SAVE", "EVAL_COMPLETE", "EPOCH_COMPLETE"})
"""Events the log says already (the checkpoint, the evaluation) or that add a line per epoch
to a short run: printed once, by the log, or not at all."""
_BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_POINTS = 24
"""Training losses the sparkline beside the bar shows, the newest last."""


def sparkline(values: list[float]) -> str:
    """``values`` as a line of block characters, lowest ``▁`` to highest ``█`` (one per value;
    all alike: all ``▄``)."""
    low, high = min(values, default=0.0), max(values, default=0.0)
    if high - low < 1e-12:
        return _BLOCKS[3] * len(values)
    return "".join(_BLOCKS[round((v - low) / (high - low) * (len(_BLOCKS) - 1))] for v in values)


def watch_job(client: Client, job_id: str, *, console: Console | None = None) -> dict[str, Any]:
    """Follow a job until its stream ends, drawing its progress as it goes.

    On a terminal it shows a live bar (status and message, ``step/max_steps``,
    percent, the latest loss, a reinforcement job's latest reward, the time
    left) and prints each log line above
    it as it arrives, so the loss every 10 steps scrolls by, and each event
    dimmed. Elsewhere (pipes, CI, tests) it prints the same lines plainly,
    plus one line per change of status or message, and no control characters.
    It ends with the fine-tuned model and the price charged, when known.

    Args:
        client: The client to stream with; it reconnects by itself
            (:meth:`Client.watch`).
        job_id: The job to follow.
        console: Where to draw; a console on stdout by default.

    Returns:
        The last job object seen: final, unless the stream ended early.

    Raises:
        ApiError: The job does not exist (404) or the stream was refused.
        ClientError: The server could not be reached, or stayed away.
    """
    console = console or Console()
    job: dict[str, Any] | None = None
    with _View(console) as view:
        for item in client.watch(job_id):
            if item.kind == "job":
                job = item.data
                view.show_job(job)
            elif item.kind == "log":
                view.show_log(item.data)
            elif item.kind == "event":
                view.show_event(item.data)
            elif item.kind == "metrics":
                view.show_metrics(item.data)
    if job is None:
        job = dict(client.get_job(job_id))
    _print_outcome(console, job)
    return job


class _View:
    """Prints lines on ``console``; on a real terminal also keeps a live bar below them."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._state: tuple[Any, Any] | None = None
        self._losses: list[float] = []
        self._reward: float | None = None
        self._progress: Progress | None = None
        if console.is_terminal and not console.is_dumb_terminal:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[loss]}"),
                TextColumn("{task.fields[time_left]}"),
                console=console,
            )
            self._task = self._progress.add_task("connecting", total=None, loss="", time_left="")

    def __enter__(self) -> _View:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()

    def show_job(self, job: dict[str, Any]) -> None:
        state = (job.get("status"), job.get("message"))
        if state != self._state:
            self._state = state
            self._console.print(status_text(job), highlight=False)
        if self._progress is not None:
            progress = job.get("progress") or {}
            status = str(job.get("status", ""))
            description = f"[{STATUS_STYLES.get(status, 'default')}]{escape(status)}[/]"
            if job.get("message"):
                description += f" {escape(str(job['message']))}"
            left = time_left_text(job)
            self._progress.update(
                self._task,
                description=description,
                completed=progress.get("step") or 0,
                total=progress.get("max_steps") or None,
                time_left="" if left == "-" else f"{left} left",
            )

    def show_log(self, line: dict[str, Any]) -> None:
        text = str(line.get("text", ""))
        self._console.print(text, markup=False, highlight=False)
        loss = _LOSS.search(text)
        if loss is not None and self._progress is not None and not self._losses:
            self._progress.update(self._task, loss=f"loss {loss.group(1)}")  # no metrics lines

    def show_metrics(self, point: dict[str, Any]) -> None:
        """A training loss: beside the bar, with the sparkline of the recent ones; and a
        reinforcement job's latest reward after it (what the job is taught to raise)."""
        loss, reward = point.get("train_loss"), point.get("reward")
        if isinstance(loss, int | float):
            self._losses = [*self._losses, float(loss)][-SPARK_POINTS:]
        if isinstance(reward, int | float):
            self._reward = float(reward)
        if self._progress is not None and (self._losses or self._reward is not None):
            parts = [f"loss {self._losses[-1]:.4f} {sparkline(self._losses)}"
                     if self._losses else "",
                     f"reward {self._reward:.4f}" if self._reward is not None else ""]
            self._progress.update(self._task, loss=" ".join(part for part in parts if part))

    def show_event(self, event: dict[str, Any]) -> None:
        kind = event.get("alallo_type") or event.get("type", "")  # alallo's kind: JOB_START...
        if kind in _ECHOED:
            return
        text = Text(f"{kind}: {event.get('message', '')}", style="dim")
        self._console.print(text, highlight=False)


def _print_outcome(console: Console, job: dict[str, Any]) -> None:
    if job.get("status") == JobStatus.SUCCEEDED and job.get("fine_tuned_model"):
        console.print(f"Fine-tuned model: {job['fine_tuned_model']}", markup=False, highlight=False)
        if job.get("fine_tuned_model_path"):
            console.print(f"Its files on the server: {job['fine_tuned_model_path']}",
                          markup=False, highlight=False)
        console.print(f"Download it: alallo models download {job['fine_tuned_model']}",
                      markup=False, highlight=False)
    price = job.get("price") or {}
    if job.get("finished_at") or price.get("charged"):
        line = f"Charged: {money(price.get('charged') or 0, price.get('currency'))}"
        if price.get("refunded"):
            line += f" (refunded {money(price['refunded'], price.get('currency'))})"
        console.print(line, markup=False, highlight=False)
