"""The few POSIX process calls the trainer's launchers share (:mod:`alallo.executors._local`
runs a child, :mod:`alallo.executors._warm` starts the warm process, :mod:`alallo.executors._warm_process` forks
trainers, the Ray launchers stop their child and write their files): die with the parent, take
on a user, signal or stop a process group, a free port, a file written at once.

Standard library only: the warm process imports this before its trainer's libraries.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

__all__ = ["PR_SET_PDEATHSIG", "die_with_parent", "free_port", "kill_group", "stop_group",
           "take_on_user", "write_atomically"]

PR_SET_PDEATHSIG = 1
"""``prctl`` option: the signal this process gets when its parent thread ends (Linux, prctl(2))."""


def die_with_parent() -> None:
    """Arm SIGKILL on the death of the parent (Linux; elsewhere nothing).

    Call it in the child, between fork and exec, and after :func:`take_on_user`: a change
    of user clears it (prctl(2))."""
    if sys.platform == "linux":
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def take_on_user(uid: int, gid: int) -> None:
    """Become ``uid``:``gid`` with no supplementary groups (a child of a root server).

    Raises:
        PermissionError: this process may not change user.
    """
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def kill_group(pid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group ``pid`` leads; a group already gone, or no longer
    ours to signal, is left alone."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at ``host`` now (the OS's pick; free until someone binds
    it, so the service that gets it should bind it at once)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def stop_group(child: subprocess.Popen[bytes], grace_s: float) -> None:
    """Stop ``child``'s process group: SIGTERM, then SIGKILL after ``grace_s`` seconds;
    return once it has ended."""
    kill_group(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    kill_group(child.pid, signal.SIGKILL)
    child.wait()


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees the whole text or none of it."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    partial.replace(path)
