"""Pausing a trainer: the server asks it to save a checkpoint now and stop.

A user's pause (``POST /v1/fine_tuning/jobs/{id}/pause``) must not lose the steps since the
last checkpoint, so the server asks the trainer to save one at its current step: it creates
the file named by ``ALALLO_PAUSE_FILE`` (in the run's directory, which is on the storage the
trainer reads wherever it runs). A trainer that honours it checks for the file after each
step; once it is there it saves a checkpoint of that step (unless it just saved one), prints
its ``checkpoint`` line, and exits 0 without a ``done`` line (``docs/trainer-protocol.md``,
"Pausing"). A trainer that does not is stopped like a cancelled one after
``ALALLO_PAUSE_GRACE_S`` (120 s), and the job resumes from its last checkpoint.

A file rather than a signal: it needs nothing of the executor (a local process, a warm fork
or a Ray node's launcher alike), and a trainer reads it between steps, where saving is safe.
Ranks of a distributed run could see the file at different steps and wait on each other
forever, so a run of several ranks does not honour it (the grace period stops it).
"""

from __future__ import annotations

import os

__all__ = ["PAUSE_FILE", "PAUSE_FILE_ENV", "pause_requested"]

PAUSE_FILE = "pause-requested"
"""The name of the pause file in a run's directory (the server makes it to pause the run)."""

PAUSE_FILE_ENV = "ALALLO_PAUSE_FILE"
"""The variable naming the file whose presence asks the trainer to save and stop."""


def pause_requested() -> bool:
    """Whether the server asked this run to save a checkpoint now and stop (False without
    ``ALALLO_PAUSE_FILE``, and in a run of several ranks)."""
    path = os.environ.get(PAUSE_FILE_ENV)
    if not path or int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        return False
    return os.path.exists(path)
