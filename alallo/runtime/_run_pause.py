"""The job actor's side of a pause (:mod:`alallo.jobs._pausing` decides, this acts): ask the
running trainer to save a checkpoint and stop, and stop it when it does not in time.

The trainer is asked through its run's pause file (:mod:`alallo.trainers._pause`); a trainer
that does not honour it (an operator's or an account's own, or a run of several ranks) is
stopped like a cancelled one after ``Settings.pause_grace_s`` (120 s), and the job resumes
from its last checkpoint (the steps after it are redone, and charged once).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from actors import ActorError

from ..trainers._pause import PAUSE_FILE
from ._job_messages import _PauseOverdue

if TYPE_CHECKING:
    from actors import ActorRef

    from ._job_messages import JobMessage

__all__ = ["ask_to_pause", "overdue_after"]


async def ask_to_pause(run_dir: Path) -> bool:
    """Create the run's pause file: its trainer saves a checkpoint at its step and exits.

    Returns:
        False when the file could not be made (the run's directory is gone, or the storage
        refused it): the caller stops the run at once instead.
    """
    def touch() -> bool:
        try:
            (run_dir / PAUSE_FILE).touch(mode=0o644)
        except OSError:
            return False
        return True
    return await trio.to_thread.run_sync(touch)


async def overdue_after(ref: ActorRef[JobMessage], run: trio.CancelScope | None,
                        grace_s: float) -> None:
    """After ``grace_s``, tell the actor that the run asked to pause (``run``, its cancel
    scope) is overdue: it stops that run if it still goes on (a helper task of the actor)."""
    await trio.sleep(grace_s)
    with contextlib.suppress(ActorError):
        await ref.tell(_PauseOverdue(run))
