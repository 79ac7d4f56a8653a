"""Warm trainer processes, seen from the server: start one, ask it to fork a trainer.

A warm process (:mod:`alallo.executors._warm_process`) has imported a built-in
trainer's libraries once; each job's trainer is then forked from it in
milliseconds instead of paying seconds of imports (about 6 s of torch,
transformers and TRL on a CPU machine). There is one warm process per
trainer module, interpreter and server thread, started on first use; one that
died (killed, out of memory) is started again by the next job, and a job whose
request it cannot take (it died before forking, or did not answer within
:data:`FORK_TIMEOUT_S`) is started cold instead, so a warm process never fails
a job.

The warm process is started from the Trio thread, for the reason
:mod:`alallo.executors._local` gives (``PR_SET_PDEATHSIG`` follows the
forking *thread*), and per thread: a process forked by a thread that has
ended would be dead already. It dies with the server, and each trainer
forked from it dies with it.
"""

from __future__ import annotations

import atexit
import json
import os
import shlex
import socket
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

import trio

from ._env import TrainerUser
from ._posix import die_with_parent
from ._warm_process import PRELOAD

__all__ = ["FORK_TIMEOUT_S", "WARM_MODULES", "WarmChild", "WarmProcess", "fork_trainer",
           "warm_module", "warm_processes"]

FORK_TIMEOUT_S = 120.0
"""How long a job waits for the warm process to fork its trainer (its imports
included, when it has just started) before it is killed and the job starts cold."""

WARM_MODULES: set[str] = set(PRELOAD)
"""The trainer modules started warm: the built-in trainers."""


def warm_module(command: Sequence[str]) -> str | None:
    """The built-in trainer a command runs, if a warm process can serve it.

    Returns:
        ``"alallo.trainers.trl"`` for ``[python, "-m", "alallo.trainers.trl",
        config]`` (likewise any module of :data:`WARM_MODULES`), else None.
    """
    if len(command) == 4 and command[1] == "-m" and command[2] in WARM_MODULES:
        return command[2]
    return None


class WarmProcess:
    """One warm process: a child of this server serving one trainer module.

    Args:
        python: the interpreter it runs on (the one the cold command names).
        module: the trainer module it serves, a key of ``PRELOAD``.
        env: its environment: a trainer's scrubbed one, never the server's (a
            forked trainer can read the environment its warm process started
            with, in ``/proc/self/environ``).
    """

    def __init__(self, python: str, module: str, env: dict[str, str]) -> None:
        self.python = python
        self.module = module
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None

    @property
    def pid(self) -> int | None:
        """The warm process's pid, None before it first started."""
        return self.process.pid if self.process else None

    def alive(self) -> bool:
        """Whether the warm process runs (it may still be importing)."""
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the warm process (call from the Trio thread); it imports in the background."""

        self.stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [self.python, "-m", "alallo.executors._warm_process", str(theirs.fileno()), self.module],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent,
                env=self.env,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        self._sock = ours

    def send(self, request: dict[str, object], fds: list[int]) -> bool:
        """Send one fork request with its file descriptors; False if the process cannot take it."""
        if self._sock is None or not self.alive():
            return False
        try:
            socket.send_fds(self._sock, [json.dumps(request).encode()], fds)
        except OSError:  # gone (EPIPE, ECONNRESET) or too far behind (EAGAIN)
            return False
        return True

    def stop(self) -> None:
        """Kill the warm process (every trainer it forked dies with it) and reap it."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            self.process = None


class WarmChild:
    """A trainer forked by a warm process; its exit status comes over a status pipe.

    The server is not its parent and cannot ``waitpid`` it: the warm process
    reaps it and writes ``exit <code>``. If the warm process dies first, the
    trainer died with it (parent-death signal), and the code is -9 (SIGKILL).
    """

    def __init__(self, pid: int, status: trio.lowlevel.FdStream, pending: bytes) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._status = status
        self._pending = pending

    def poll(self) -> int | None:
        """The exit code once :meth:`wait` has read it, else None."""
        return self.returncode

    async def wait(self) -> int:
        """Wait for the trainer's exit; return its code (negative: killed by that signal)."""
        if self.returncode is None:
            text = await _read_until(self._status, self._pending, b"exit ")
            self.returncode = int(text) if text is not None else -9
            self._status.close()
        return self.returncode


async def fork_trainer(command: Sequence[str], *, cwd: Path, env: dict[str, str],
                       output: int, user: TrainerUser | None = None,
                       warm_env: dict[str, str] | None = None) -> WarmChild | None:
    """Run a built-in trainer command by forking it from the warm process.

    Args:
        command: ``[python, "-m", module, config]`` (see :func:`warm_module`).
        cwd: the trainer's working directory.
        env: its whole environment.
        output: the write end of its stdout and stderr pipe (not closed here).
        user: the user the trainer runs as (the child drops to it after the fork).
        warm_env: the environment a warm process starts with, when this call starts
            one: what every trainer shares (scrubbed), no job's own; ``env`` if None.

    Returns:
        The running trainer, or None when the warm process could not fork it
        (it died or did not answer in :data:`FORK_TIMEOUT_S`): start it cold.
    """
    module = warm_module(command)
    if module is None:
        return None
    warm = _for_this_thread(command[0], module, env if warm_env is None else warm_env)
    read_end, write_end = os.pipe()
    request: dict[str, object] = {"argv": list(command[3:]), "cwd": str(cwd), "env": env,
               "title": shlex.join(command),
               "user": [user.uid, user.gid] if user is not None else None}
    try:
        if not warm.alive():  # first use, or it died since the last job
            warm.start()
        # Not sent: it died just now, or is far behind; the next job starts another.
        sent = warm.send(request, [output, write_end])
    except BaseException:  # it could not be started (the interpreter is missing)
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    status = trio.lowlevel.FdStream(read_end)
    if not sent:
        status.close()
        return None
    answer: str | None = None
    pending = bytearray()
    try:
        with trio.move_on_after(FORK_TIMEOUT_S):
            answer = await _read_until(status, pending, b"")
    except BaseException:  # cancelled: the warm process kills a trainer nobody waits for
        status.close()
        raise
    if answer is None or not answer.startswith(("pid ", "fail ")):
        warm.stop()  # died, or stuck: make sure it forks nothing later
    if answer is None or not answer.startswith("pid "):
        status.close()
        return None
    return WarmChild(int(answer.removeprefix("pid ")), status, bytes(pending))


async def _read_until(stream: trio.lowlevel.FdStream, pending: bytes | bytearray,
                      prefix: bytes) -> str | None:
    """The rest of the first status line starting with ``prefix``; None at end of stream.

    ``pending`` (a bytearray) keeps what was read past that line.
    """
    buffer = bytearray(pending)
    while True:
        while b"\n" in buffer:
            line, _, rest = bytes(buffer).partition(b"\n")
            buffer[:] = rest
            if line.startswith(prefix):
                if isinstance(pending, bytearray):
                    pending[:] = buffer
                return line[len(prefix):].decode()
        chunk = await stream.receive_some()
        if not chunk:
            return None
        buffer += chunk


_processes: dict[tuple[int, str, str], WarmProcess] = {}


def _for_this_thread(python: str, module: str, env: dict[str, str]) -> WarmProcess:
    key = (threading.get_ident(), python, module)
    warm = _processes.get(key)
    if warm is None:
        warm = _processes[key] = WarmProcess(python, module, env)
    return warm


def warm_processes() -> list[WarmProcess]:
    """The warm processes this server started (for tests and operators)."""
    return list(_processes.values())


@atexit.register
def _stop_all() -> None:
    for warm in _processes.values():
        warm.stop()
