"""Fencing a trainer's attempt: a run that is no longer the job's current one stops itself.

On a Ray cluster a node cut off from the rest keeps its processes: Ray takes the node for
dead and fails its job, alallo moves the job to another node, and the first trainer would
go on writing checkpoints nobody reads (``../shared/research/clusters-and-models.md``). So
every run gets its id (``ALALLO_RUN_ID``) and the path of its job's *fence file*
(``ALALLO_FENCE_FILE``, on the storage every node shares), which names the job's current
run. Before each checkpoint and before saving the model, a trainer calls
:func:`exit_if_superseded`; the launcher on the node checks the file every few seconds as
well (:mod:`alallo.executors._node_launcher`). Without those variables (a local run) nothing
is checked. The idea is a fencing token (Kleppmann, "How to do distributed locking", 2016).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["SUPERSEDED", "current_run", "exit_if_superseded", "superseded"]

SUPERSEDED = 75
"""Exit status of a superseded run (``EX_TEMPFAIL``)."""


def current_run(fence_file: str | os.PathLike[str]) -> str | None:
    """The run the fence file names (None: it cannot be read, e.g. the storage is away)."""
    try:
        return Path(fence_file).read_text().strip() or None
    except OSError:
        return None


def superseded(fence_file: str | None, run_id: str | None) -> bool:
    """Whether another run than ``run_id`` is now the job's current one. False without a
    fence file or a run id, and while the file cannot be read (never stop on a doubt)."""
    if not fence_file or not run_id:
        return False
    current = current_run(fence_file)
    return current is not None and current != run_id


def exit_if_superseded() -> None:
    """End this process at once with :data:`SUPERSEDED` (saving nothing) when the job's fence
    file names another run than this one's ``ALALLO_RUN_ID``."""
    fence, run_id = os.environ.get("ALALLO_FENCE_FILE"), os.environ.get("ALALLO_RUN_ID")
    if superseded(fence, run_id):
        text = f"Run {run_id} was superseded by {current_run(fence or '')}: nothing saved"
        print(json.dumps({"type": "log", "text": text}), flush=True)
        os._exit(SUPERSEDED)
