"""Job actors' checkpoints are the jobs themselves, in the store.

:class:`JobCheckpoints` is the durable :class:`actors.CheckpointStore` of
the jobs' supervisor: a job actor's snapshot is its :class:`~alallo.Job`,
which the actor already commits on every change (persist, then publish), so
a restarted or relocated incarnation starts from the job's last committed
state, and after a crash of the whole server, from the same rows. The
trainer's own checkpoint (the ``checkpoint`` field) is where training
resumes.

With several processes a snapshot is written with the lease epoch of the
job (a fencing token, :mod:`alallo._cluster`): a process that lost the
job's lease cannot overwrite it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..jobs import Job
from ._store import Store

__all__ = ["JobCheckpoints"]


class JobCheckpoints:
    """A :class:`actors.CheckpointStore` keyed by job id, over the alallo store."""

    def __init__(self, store: Store,
                 epoch_of: Callable[[str], int | None] | None = None) -> None:
        self._store = store
        self._epoch_of = epoch_of
        self._primed: dict[str, Job] = {}

    def prime(self, jobs: Iterable[Job]) -> None:
        """Hand over jobs already read from the store (in bulk, at recovery).

        The next :meth:`load` of each answers from memory, once; later loads
        (an actor restarting after an error) read the store again.
        """
        self._primed.update((job.id, job) for job in jobs)

    async def save(self, name: str, snapshot: object) -> None:
        """Commit a job actor's snapshot (its job); other actors keep no checkpoint here.

        Raises:
            TypeError: the snapshot is not a :class:`Job` named ``name``.
            LeaseLost: another process holds the job's lease now (nothing written).

        With ``epoch_of``, a job whose lease this process does not hold is not written.
        """
        if not isinstance(snapshot, Job) or snapshot.id != name:
            raise TypeError(f"a job checkpoint must be the Job {name!r}, got {snapshot!r}")
        if self._epoch_of is None:
            await self._store.save_job(snapshot)
            return
        epoch = self._epoch_of(name)
        if epoch is not None:
            await self._store.save_job(snapshot, epoch=epoch)

    async def load(self, name: str) -> object | None:
        """The job's last committed state, or None (not a job)."""
        primed = self._primed.pop(name, None)
        if primed is not None:
            return primed
        return await self._store.get_job(name)
