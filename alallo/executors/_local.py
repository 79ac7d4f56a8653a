"""Running a trainer as a child process, and making sure it never outlives us.

The trainer runs in its own process group (``start_new_session``), so that
stopping it stops whatever it started too (data loader workers, compilers).
On Linux it also gets a parent-death signal (``PR_SET_PDEATHSIG``): if this
server dies, even by ``kill -9``, the kernel sends the trainer SIGKILL.
Stopping is SIGTERM to the group, then SIGKILL after a grace period.

Why not ``trio.lowlevel.open_process``: it forks from a worker thread, and
the parent-death signal fires when the *thread* that forked the child ends
(prctl(2)), so trio's thread cache retiring that worker after ~10 idle
seconds killed every trainer. We start it from a thread that lives as long as the
process (:mod:`alallo.executors._spawner`; the event loop goes on meanwhile) and wait
on a pidfd, as trio does; with util-linux's ``setpriv`` arming the signal in the
child, the start is a ``vfork`` and exec (about a millisecond), not a copy of the
server (``_spawn``).

With ``warm=True`` a built-in trainer (``python -m alallo.trainers.trl``) is
forked from a warm process that has imported its libraries already
(:mod:`alallo.executors._warm`), with the same guarantees; any other command, or a
warm process that cannot take the job, starts cold as above.

Every trainer starts with a scrubbed environment (:mod:`alallo.executors._env`),
never the server's, and, given a :class:`~alallo.executors._env.TrainerUser`,
as that user: the child drops its groups, group and user before it arms the
parent-death signal, since changing the effective user clears that signal
(prctl(2), ``PR_SET_PDEATHSIG``) — which is also why ``subprocess.Popen``'s
own ``user=`` (applied after ``preexec_fn``) is not used.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import BinaryIO, Protocol

import trio

from . import _warm
from ._env import TrainerUser, scrubbed_environment, take_back, trainers_env
from ._executor import Launch, LineSink, RunEnd
from ._posix import die_with_parent, kill_group, take_on_user
from ._spawner import start_in_spawner

__all__ = ["LocalExecutor", "TrainerProcess", "start_service"]

_MAX_LINE = 64 * 1024


def become(user: TrainerUser | None) -> None:
    """In a child, before exec: take on ``user`` (no supplementary groups), then arm
    the parent-death signal (a change of user clears it). Nothing to take on for None."""
    if user is not None:
        take_on_user(user.uid, user.gid)
    die_with_parent()


def _spawn(command: Sequence[str], cwd: Path, env: Mapping[str, str], output: int,
           user: TrainerUser | None) -> subprocess.Popen[bytes]:
    """Start ``command`` as a trainer: its own session, ``user``, dying with this thread.

    With ``setpriv`` (util-linux, Linux) the child takes on the user and arms the
    parent-death signal itself, after the change of user (``--pdeathsig``), so no
    Python runs between fork and exec and ``subprocess`` forks with ``vfork``: the
    server is not copied. A ``preexec_fn`` makes it ``fork`` the whole server instead,
    which grows with the server (measured: 15 ms of CPU and 48 ms of blocking per
    trainer for a 390 MiB process, 1.4 ms with ``vfork``), and 1,000 jobs recovered
    at once spent most of their restart there (``bench/bench_recovery.py``).

    Raises:
        OSError: the command is missing or not executable (as ``subprocess.Popen``).
    """
    if _SETPRIV is None:
        return subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=output,
            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=partial(become, user))
    program = _executable(command[0], cwd, env)  # setpriv would only exit 127 for it
    wrapper = [_SETPRIV, "--pdeathsig", "KILL"]
    if user is not None:
        wrapper += [f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups"]
    return subprocess.Popen(
        [*wrapper, "--", program, *command[1:]], cwd=cwd, env=env,
        stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
        start_new_session=True)


def _executable(name: str, cwd: Path, env: Mapping[str, str]) -> str:
    """The file ``execvpe`` in the child would run for ``name`` (searched on the trainer's
    ``PATH``, or relative to ``cwd``)."""
    if "/" in name:
        candidates = [str(cwd / name)]
    else:
        candidates = [os.path.join(folder, name) for folder in os.get_exec_path(dict(env))]
    denied = None
    for candidate in candidates:
        if os.path.isfile(candidate):
            if os.access(candidate, os.X_OK):
                return candidate
            denied = candidate
    if denied is not None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), denied)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)


_SETPRIV = shutil.which("setpriv") if sys.platform == "linux" else None
"""util-linux's ``setpriv`` (``--pdeathsig``), when this machine has it."""


class _Child(Protocol):
    pid: int

    def poll(self) -> int | None: ...

    async def wait(self) -> int: ...


class _ColdChild:
    """A trainer this server forked and exec'd itself."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.pid = process.pid

    def poll(self) -> int | None:
        return self.process.poll()

    async def wait(self) -> int:
        """Wait for the child to exit without blocking Trio (a pidfd becomes readable)."""
        if self.process.poll() is not None:
            return self.process.returncode
        pidfd = os.pidfd_open(self.process.pid)
        try:
            await trio.lowlevel.wait_readable(pidfd)
        finally:
            os.close(pidfd)
        return self.process.wait()


class TrainerProcess:
    """One run of a trainer command.

    Args:
        command: argv, e.g. ``[python, "-m", "alallo.trainers.trl", config]``.
        cwd: working directory of the trainer.
        output_log: a file that gets every byte the trainer printed (for operators).
        grace_s: seconds between SIGTERM and SIGKILL when stopping.
        env: the job's own variables, added to the trainer's scrubbed environment
            (:func:`alallo.executors._env.scrubbed_environment`); the server's own
            environment is never passed on.
        shared_env: variables every trainer gets (``Settings.trainer_env``), below
            ``env``; a warm process starts with these only.
        warm: fork a built-in trainer from a warm process (``ALALLO_WARM_TRAINERS``).
        user: run as this unprivileged user (the server runs as root); None: as the server.
    """

    def __init__(self, command: Sequence[str], *, cwd: Path, output_log: Path,
                 grace_s: float, env: Mapping[str, str] | None = None,
                 shared_env: Mapping[str, str] | None = None,
                 warm: bool = False, user: TrainerUser | None = None) -> None:
        self.command = list(command)
        self.warm = warm
        self.started_warm = False
        """Whether this run's trainer was forked from a warm process."""
        self.cwd = cwd
        self.output_log = output_log
        self.grace_s = grace_s
        self.env = env
        self.shared_env = shared_env
        self.user = user
        self.returncode: int | None = None
        self.pid: int | None = None

    async def run(self, on_line: Callable[[str], Awaitable[None]]) -> int:
        """Start the trainer, hand each line it prints to ``on_line``, return its exit code.

        stdout and stderr are read as one stream of lines. When the calling
        task is cancelled, the trainer's process group is stopped (SIGTERM,
        then SIGKILL after ``grace_s``) before the cancellation goes on.
        """
        env = scrubbed_environment({**(self.shared_env or {}), **(self.env or {})})
        read_end, write_end = os.pipe()
        log: BinaryIO | None = None
        try:
            process: _Child | None = None
            if self.warm:
                process = await _warm.fork_trainer(
                    self.command, cwd=self.cwd, env=env, output=write_end, user=self.user,
                    warm_env=scrubbed_environment(self.shared_env))
                self.started_warm = process is not None
            if process is None:
                popen, log = await start_in_spawner(
                    partial(self._start_cold, env, write_end), undo=_undo_start)
                process = _ColdChild(popen)
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        self.pid = process.pid
        try:
            # The operator's copy is written in the event loop: an append of a chunk (a
            # few hundred bytes) to the page cache takes microseconds, where a worker
            # thread's round trip per chunk cost ~10% of the server's CPU per line.
            # Creating the file takes longer (a tenth of the event loop's time, 1,000
            # trainers starting at once): a cold start opens it in the spawner thread.
            async with trio.lowlevel.FdStream(read_end) as stdout:
                with log or open(self.output_log, "ab", buffering=0) as raw:  # noqa: ASYNC230
                    pending = b""
                    async for chunk in stdout:
                        raw.write(chunk)
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
            if (code := process.poll()) is None:
                with trio.CancelScope(shield=True):
                    self.returncode = await self._stop(process)
            else:
                self.returncode = code
            kill_group(process.pid, signal.SIGKILL)

    def _start_cold(self, env: Mapping[str, str],
                    output: int) -> tuple[subprocess.Popen[bytes], BinaryIO]:
        """Open the operator's copy of the output, then start the trainer (`_spawn`);
        blocking, in the spawner thread."""
        log = open(self.output_log, "ab", buffering=0)  # noqa: SIM115 - the caller closes it
        try:
            return _spawn(self.command, self.cwd, env, output, self.user), log
        except BaseException:
            log.close()
            raise

    async def _stop(self, process: _Child) -> int:
        kill_group(process.pid, signal.SIGTERM)
        with trio.move_on_after(self.grace_s):
            return await process.wait()
        kill_group(process.pid, signal.SIGKILL)
        return await process.wait()



async def start_service(command: Sequence[str], cwd: Path, env: Mapping[str, str],
                        output: int) -> _ColdChild:
    """Start a process that serves the server (a vLLM engine): its own session, dying with
    the server as a trainer does, writing stdout and stderr to ``output``.

    Returns:
        The child: ``pid``, ``poll()``, ``await wait()``.

    Raises:
        OSError: the command is missing or not executable.
    """
    popen = await start_in_spawner(partial(_spawn, command, cwd, env, output, None),
                                   undo=lambda child: kill_group(child.pid, signal.SIGKILL))
    return _ColdChild(popen)


def _undo_start(started: tuple[subprocess.Popen[bytes], BinaryIO]) -> None:
    """Stop a trainer whose start nobody is left to take (its Trio run has ended)."""
    popen, log = started
    kill_group(popen.pid, signal.SIGKILL)
    log.close()


class LocalExecutor:
    """Runs each trainer as a child process of this server (:class:`TrainerProcess`).

    With a trainer ``user`` (a root server), every trainer, cold or warm, runs as that
    user, with the server's Hugging Face cache as ``HF_HOME``
    (:func:`~alallo.executors._env.trainers_env`); the job's directory (the parent of the
    run's, ``jobs/<id>/attempt-<n>``), handed to the user for the run, is taken back when
    the run ends (:func:`~alallo.executors._env.take_back`), so that no later trainer
    reaches it.

    Args:
        grace_s: seconds between SIGTERM and SIGKILL when a run is stopped.
        shared_env: variables every trainer gets (``Settings.trainer_env``).
        warm: fork built-in trainers from a warm process (``ALALLO_WARM_TRAINERS``).
        user: run trainers as this unprivileged user (the server runs as root); None: as
            the server.
    """

    name = "local"
    fenced = False  # a child process never outlives its run (its group is killed)

    def __init__(self, *, grace_s: float, shared_env: Mapping[str, str] | None = None,
                 warm: bool = False, user: TrainerUser | None = None) -> None:
        self.grace_s = grace_s
        self.shared_env = trainers_env(shared_env, user)
        self.warm = warm
        self.user = user

    def trainer(self, launch: Launch) -> _LocalRun:
        """A child process running ``launch.command`` in ``launch.cwd``; its devices come
        in ``launch.env`` (``CUDA_VISIBLE_DEVICES``, :func:`alallo.runtime._launch.trainer_env`)."""
        return _LocalRun(TrainerProcess(
            launch.command, cwd=launch.cwd, output_log=launch.output_log, grace_s=self.grace_s,
            env=launch.env, shared_env=self.shared_env, warm=self.warm, user=self.user))


class _LocalRun:
    """A :class:`~alallo.executors._executor.TrainerRun` over a :class:`TrainerProcess`."""

    def __init__(self, process: TrainerProcess) -> None:
        self.process = process
        self.end: RunEnd | None = None

    async def run(self, on_line: LineSink) -> RunEnd:
        try:
            await self.process.run(on_line)
        finally:
            if self.process.pid is not None:  # it started: its end is known now
                self.end = RunEnd(self.process.returncode)
            if self.process.user is not None:  # its trainer is gone: the job's dir is ours
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(take_back, self.process.cwd.parent)
        assert self.end is not None
        return self.end
