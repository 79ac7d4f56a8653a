"""A trainer run by ``torchrun`` (a plan of several devices): which rank this process is,
and that it must not outlive the launcher.

``torchrun`` starts each rank in a session of its own, outside the trainer's process
group that the server stops: a rank arms its own parent-death signal, so that the
launcher's end (cancel, a crash of another rank, the server killed) ends every rank.
Only rank 0 speaks the trainer protocol (:class:`~alallo.trainers._trl_report.ProtocolOut`).

Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

__all__ = ["die_with_launcher", "rank", "world_size"]

_PR_SET_PDEATHSIG = 1


def rank() -> int:
    """This process's rank (``RANK``, set by torchrun); 0 when run alone."""
    return int(os.environ.get("RANK", "0"))


def world_size() -> int:
    """How many ranks train together (``WORLD_SIZE``); 1 when run alone."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def die_with_launcher() -> None:
    """Under torchrun (``LOCAL_RANK`` set), on Linux: SIGKILL this rank when its launcher
    dies, and exit at once if it is gone already. Elsewhere nothing."""
    if "LOCAL_RANK" not in os.environ or sys.platform != "linux":
        return
    launcher = os.getppid()
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != launcher or launcher == 1:  # it died before the signal was armed
        os._exit(1)
