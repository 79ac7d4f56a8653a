"""Group commit: concurrent writes gathered into one transaction by one writer at a time.

The standard technique of databases for many small durable writes (DeWitt
et al., "Implementation Techniques for Main Memory Database Systems",
SIGMOD 1984; PostgreSQL's ``commit_delay``, MySQL's binary-log group
commit): a commit costs a flush whatever it holds, so the writes that
arrive while one transaction commits are committed together by the next.
Each caller is answered once the transaction holding its write has
committed, so durability is the same as one commit each.

No timer and no background task: the first caller to find no batch in
flight becomes the writer (the *leader*) and takes every write waiting; the
others wait on a fair lock and find their answer when they get it. A batch
that fails is committed again one write per transaction, so that a failing
write fails only its caller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import outcome
import trio

__all__ = ["GroupCommit"]

I = TypeVar("I")  # noqa: E741 - the item type
R = TypeVar("R")


class _Slot(Generic[I, R]):
    __slots__ = ("item", "result")

    def __init__(self, item: I) -> None:
        self.item = item
        self.result: outcome.Outcome[R] | None = None


class GroupCommit(Generic[I, R]):
    """Gathers concurrent :meth:`submit` calls into batches for ``commit``.

    Args:
        commit: runs in a worker thread; commits all the items it gets in one
            transaction and returns one result per item, in their order, or
            raises (nothing committed).
        limiter: the worker threads' limiter (the store's: SQLite runs one
            call at a time).
    """

    def __init__(self, commit: Callable[[Sequence[I]], list[R]],
                 limiter: trio.CapacityLimiter) -> None:
        self._commit = commit
        self._limiter = limiter
        self._waiting: list[_Slot[I, R]] = []
        self._lock = trio.Lock()
        self.batches = 0
        """Transactions committed or tried (for tests and benchmarks)."""

    async def submit(self, item: I) -> R:
        """Commit ``item`` with whatever else is waiting; return its result once committed.

        Raises:
            Exception: what ``commit`` raised for this item alone (its
                batch-mates are committed without it).
        """
        slot: _Slot[I, R] = _Slot(item)
        self._waiting.append(slot)
        try:
            async with self._lock:
                if slot.result is None:
                    batch, self._waiting = self._waiting, []
                    await trio.to_thread.run_sync(self._run, batch, limiter=self._limiter)
        except BaseException:
            if slot in self._waiting:  # cancelled before any writer took it: never written
                self._waiting.remove(slot)
            raise
        assert slot.result is not None
        return slot.result.unwrap()

    def _run(self, batch: list[_Slot[I, R]]) -> None:
        self.batches += 1
        together = outcome.capture(self._commit, [slot.item for slot in batch])
        if isinstance(together, outcome.Value) and len(together.value) == len(batch):
            for slot, result in zip(batch, together.value, strict=True):
                slot.result = outcome.Value(result)
            return
        if len(batch) == 1:
            batch[0].result = together if isinstance(together, outcome.Error) else outcome.Error(
                RuntimeError("the commit returned no result"))
            return
        for slot in batch:  # one failed: each again alone, so that only it fails
            self.batches += 1
            alone = outcome.capture(self._commit, [slot.item])
            slot.result = (outcome.Value(alone.value[0]) if isinstance(alone, outcome.Value)
                           else alone)
