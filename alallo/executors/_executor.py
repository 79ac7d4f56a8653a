"""`Executor`: one interface for where a trainer runs (issue 16).

A job's actor hands an executor a :class:`Launch` (the command, the run's directory, the job's
own variables, the node and devices the scheduler gave it) and gets a :class:`TrainerRun`:
running it streams the trainer's lines and says how it ended (:class:`RunEnd`: an exit code, a
signal, or the node lost). Two executors implement it: the local one (a child process of this
server, :class:`~alallo.executors._local.LocalExecutor`) and Ray's (a Ray job on the planned
node of a Ray cluster, :class:`~alallo.executors._ray.RayExecutor`). The job actor, the
supervisor, billing and the streams see the same messages from both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

__all__ = ["Executor", "Launch", "LineSink", "RunEnd", "TrainerRun"]

LineSink = Callable[[str], Awaitable[None]]
"""Takes each line the trainer prints (stdout and stderr as one stream, without the newline)."""


@dataclass(frozen=True)
class Launch:
    """One run (attempt) of a job's trainer.

    ``node`` and ``device_indices`` are the scheduler's placement: the node's name (a Ray
    node id on Ray) and which of its devices the job holds. ``run_id`` names the run
    uniquely and for good (``<job id>-attempt-<n>``): Ray's submission id.
    """

    command: list[str]
    cwd: Path
    """The attempt's directory; on Ray, on the storage every node shares."""
    output_log: Path
    """A file that gets every byte the trainer printed (for operators)."""
    run_id: str
    node: str
    device_type: str
    devices: int
    device_indices: tuple[int, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """The job's own variables, on top of the trainer's scrubbed environment."""


@dataclass(frozen=True)
class RunEnd:
    """How a trainer's run ended.

    ``returncode`` is its exit status (negative: killed by that signal; None: it never
    started, or its end is unknown). ``node_lost`` says why its node is gone (the raylet
    died, the machine went away), or None: such an end is the platform's, never the
    user's code, and the job moves to another node from its latest checkpoint.
    """

    returncode: int | None
    node_lost: str | None = None


class TrainerRun(Protocol):
    """A trainer's run, made by :meth:`Executor.trainer`: run it once."""

    end: RunEnd | None
    """How it ended, once it has (also after its run was cancelled); None before."""

    async def run(self, on_line: LineSink) -> RunEnd:
        """Start the trainer, hand each line it prints to ``on_line``, and return how it ended.

        When the calling task is cancelled, the trainer is stopped (every process it
        started, on whichever node) before the cancellation goes on.

        Raises:
            OSError: the trainer could not be started (a command missing or not executable;
                the cluster refused it).
        """


class Executor(Protocol):
    """Where trainers run: :class:`~alallo.executors._local.LocalExecutor` or
    :class:`~alallo.executors._ray.RayExecutor`."""

    name: str
    """``local`` or ``ray`` (for logs, ``GET /v1/capacity`` and the docs)."""
    fenced: bool
    """Whether a run may outlive its end (a Ray node cut off from the cluster): its
    trainer then stops itself once superseded (:mod:`alallo.trainers._fence`) and deletes
    no checkpoint; the server prunes them."""

    def trainer(self, launch: Launch) -> TrainerRun:
        """A run of the trainer ``launch`` describes; nothing starts before ``run``."""
