"""Group commit: concurrent writes gathered into one transaction by one writer at a time.

The standard technique of databases for many small durable writes (DeWitt
et al., "Implementation Techniques for Main Memory Database Systems",
SIGMOD 1984; PostgreSQL's ``commit_delay``, MySQL's binary-log group
commit): a commit costs a flush whatever it holds, so the writes that
arrive while one transaction commits are committed together by the next.
Each caller is answered once the transaction holding its write has
committed, so durability is the same as one commit each.

No timer and no background task: the first caller to find no batch in
flight becomes the writer (the *leader*) and takes every write waiting;
the others wait, each on an event of its own. When a batch has committed,
its leader wakes all its callers at once and hands the lead to the first
write that arrived meanwhile, which starts the next batch at once with
everything waiting (a pipeline: the database is never idle while writes
wait). A batch that fails is committed again one write per transaction, so
that a failing write fails only its caller.

What was left out: a fair lock that every caller takes in turn (the first
version). Its callers woke one at a time, a scheduler pass each, so the
next batch started a pass per write of the last one late, and the database
sat idle half of the time (``bench/bench_store.py``).
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
    __slots__ = ("done", "item", "leads", "result")

    def __init__(self, item: I) -> None:
        self.item = item
        self.result: outcome.Outcome[R] | None = None
        self.done = trio.Event()
        """Set when ``result`` is known, or when this write's caller is to lead (``leads``)."""
        self.leads = False


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
        self._leading = False
        self.batches = 0
        """Transactions committed or tried (for tests and benchmarks)."""

    async def submit(self, item: I) -> R:
        """Commit ``item`` with whatever else is waiting; return its result once committed.

        Items are committed in the order of the calls. A call cancelled
        before its item was taken into a batch writes nothing; once taken,
        the item is committed whatever happens to its caller.

        Raises:
            Exception: what ``commit`` raised for this item alone (its
                batch-mates are committed without it).
        """
        slot: _Slot[I, R] = _Slot(item)
        self._waiting.append(slot)
        if self._leading:
            try:
                await slot.done.wait()
            except BaseException:
                if slot in self._waiting:  # not taken by a writer: never written
                    self._waiting.remove(slot)
                    if slot.leads:  # handed the lead as it was cancelled: pass it on
                        self._hand_over()
                raise
            if slot.result is None:  # handed the lead: write the next batch
                await self._write_batch()
        else:
            self._leading = True
            await self._write_batch()
        assert slot.result is not None
        return slot.result.unwrap()

    async def _write_batch(self) -> None:
        batch, self._waiting = self._waiting, []
        try:
            # Shielded: the leader writes for the whole batch; its own caller's
            # cancellation must not leave its batch-mates unanswered.
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._run, batch, limiter=self._limiter)
        except BaseException as exc:
            failed: outcome.Outcome[R] = outcome.Error(exc)
            for slot in batch:
                if slot.result is None:
                    slot.result = failed
            raise
        finally:
            for slot in batch:
                slot.done.set()
            self._hand_over()

    def _hand_over(self) -> None:
        if self._waiting:
            first = self._waiting[0]
            first.leads = True
            first.done.set()
        else:
            self._leading = False

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
