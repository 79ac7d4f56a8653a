"""Running a trainer as a child process, and making sure it never outlives us.

The trainer runs in its own process group (``start_new_session``), so that
stopping it stops whatever it started too (data loader workers, compilers).
On Linux it also gets a parent-death signal (``PR_SET_PDEATHSIG``): if this
server dies, even by ``kill -9``, the kernel sends the trainer SIGKILL.
Stopping is SIGTERM to the group, then SIGKILL after a grace period.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import trio

__all__ = ["TrainerProcess"]

_PR_SET_PDEATHSIG = 1
_MAX_LINE = 64 * 1024


def _die_with_parent() -> None:  # runs in the child, between fork and exec
    if sys.platform == "linux":
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class TrainerProcess:
    """One run of a trainer command.

    Args:
        command: argv, e.g. ``[python, "-m", "alallo.trainers.trl", config]``.
        cwd: working directory of the trainer.
        output_log: a file that gets every byte the trainer printed (for operators).
        grace_s: seconds between SIGTERM and SIGKILL when stopping.
    """

    def __init__(self, command: Sequence[str], *, cwd: Path, output_log: Path,
                 grace_s: float, env: dict[str, str] | None = None) -> None:
        self.command = list(command)
        self.cwd = cwd
        self.output_log = output_log
        self.grace_s = grace_s
        self.env = env
        self.returncode: int | None = None
        self.pid: int | None = None

    async def run(self, on_line: Callable[[str], Awaitable[None]]) -> int:
        """Start the trainer, hand each line it prints to ``on_line``, return its exit code.

        stdout and stderr are read as one stream of lines. When the calling
        task is cancelled, the trainer's process group is stopped (SIGTERM,
        then SIGKILL after ``grace_s``) before the cancellation goes on.
        """
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false",
               **(self.env or {})}
        process = await trio.lowlevel.open_process(
            self.command, cwd=self.cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_die_with_parent,
        )
        self.pid = process.pid
        try:
            assert process.stdout is not None  # we asked for a pipe
            with self.output_log.open("ab") as raw:
                pending = b""
                async for chunk in process.stdout:
                    raw.write(chunk)
                    raw.flush()
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    if len(pending) > _MAX_LINE:
                        lines.append(pending)
                        pending = b""
                    for line in lines:
                        await on_line(line.decode("utf-8", "replace").rstrip("\r"))
                if pending:
                    await on_line(pending.decode("utf-8", "replace"))
            self.returncode = await process.wait()
            return self.returncode
        finally:
            if process.returncode is None:
                with trio.CancelScope(shield=True):
                    self.returncode = await self._stop(process)
            _kill_group(process.pid, signal.SIGKILL)

    async def _stop(self, process: trio.Process) -> int:
        _kill_group(process.pid, signal.SIGTERM)
        with trio.move_on_after(self.grace_s):
            return await process.wait()
        _kill_group(process.pid, signal.SIGKILL)
        return await process.wait()


def _kill_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
