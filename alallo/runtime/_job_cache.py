"""The jobs whose current state this process holds: answered without the store.

``GET /v1/fine_tuning/jobs/{id}`` read the store on every request. A job
whose lease this process holds (:meth:`alallo.cluster._cluster.Cluster.owns`) is
written only by its actor here (fencing tokens keep every other process
out), and the actor publishes every state it persisted on the bus. So the
last state read from the store stays current until the bus says the job
changed: :class:`LiveJobs` remembers it and forgets it on that signal
(:meth:`alallo.runtime._bus.EventBus.watch`). A read that was in flight when the job
changed is not remembered (it may be older than the store), and while the
actor writes a job (from before its commit until the bus has the change) the
job is read from the store: a reader that saw the new row in the store must
not then be answered the old one from here. Jobs of other
processes, and jobs this process no longer owns, are always read from the
store (on PostgreSQL their changes reach this process only by a notice,
later than the store has them).

The entries are bounded (:data:`LIVE_JOBS_SIZE`, least recently used first).
"""

from __future__ import annotations

from collections import OrderedDict

from ..jobs import Job

__all__ = ["LIVE_JOBS_SIZE", "LiveJobs"]

LIVE_JOBS_SIZE = 20_000
"""Jobs remembered at most (a job's state is a few KiB)."""


class LiveJobs:
    """Job id -> the :class:`Job` as last read from the store, until it changes."""

    def __init__(self, *, size: int = LIVE_JOBS_SIZE) -> None:
        self.size = size
        self._entries: OrderedDict[str, Job] = OrderedDict()
        self._reads: dict[str, set[object]] = {}
        self._writes: dict[str, int] = {}

    def get(self, job_id: str) -> Job | None:
        """The job's remembered state, or None (also while the job is being written)."""
        if job_id in self._writes:
            return None
        job = self._entries.get(job_id)
        if job is not None:
            self._entries.move_to_end(job_id)
        return job

    def begin_read(self, job_id: str) -> object:
        """Note a store read of the job starting; pass the token to :meth:`finish_read`."""
        token = object()
        self._reads.setdefault(job_id, set()).add(token)
        return token

    def finish_read(self, job_id: str, token: object, job: Job | None) -> None:
        """Remember ``job`` (what the read found) unless the job changed since it began."""
        reads = self._reads.get(job_id)
        current = reads is not None and token in reads
        if reads is not None:
            reads.discard(token)
            if not reads:
                del self._reads[job_id]
        if current and job is not None and job_id not in self._writes:
            self._entries[job_id] = job
            self._entries.move_to_end(job_id)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def begin_write(self, job_id: str) -> None:
        """The job's owner starts writing it: forget it, and serve nothing until
        :meth:`end_write` (the store may commit the change at any moment)."""
        self._writes[job_id] = self._writes.get(job_id, 0) + 1
        self.forget(job_id)

    def end_write(self, job_id: str) -> None:
        """The write is committed and published (or failed): reads may be remembered again;
        those begun during the write are not (they may have read the old row)."""
        left = self._writes.get(job_id, 0) - 1
        if left > 0:
            self._writes[job_id] = left
        else:
            self._writes.pop(job_id, None)
        self.forget(job_id)

    def forget(self, job_id: str | None) -> None:
        """The job changed (None: any job may have): drop it and void reads in flight."""
        if job_id is None:
            self._entries.clear()
            self._reads.clear()
            return
        self._entries.pop(job_id, None)
        self._reads.pop(job_id, None)

    def __len__(self) -> int:
        return len(self._entries)
