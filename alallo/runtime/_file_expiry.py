"""Expired uploads deleted: the sweep behind OpenAI's ``expires_after`` on ``POST /v1/files``.

A file sent with ``expires_after={"anchor": "created_at", "seconds": N}`` expires at
``created_at + N`` (``files.expires_at``). From that second its account no longer sees it
(get, list, content, delete and new jobs answer as for a deleted file:
:meth:`~alallo.runtime._training_files.TrainingFiles.get`). Its row and bytes go at the next
sweep, one task per process every ``Settings.file_expiry_sweep_s``, unless a live job trains
on it: a job accepted with the file keeps it, through restarts and relocations, until it
ends (the next sweep after that deletes it). Why not copy it into each job's directory at
creation instead: a job's directory is made on the node that runs it, and the file may be
needed again on another node after a relocation; the row and the shared copy already serve
that. Several processes sweeping one store is harmless: a delete is idempotent.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog
import trio

from .._errors import StoreUnavailable
from ..store import FileRow, Store

log = structlog.get_logger("alallo.files")

__all__ = ["FileExpiry", "Sweep"]


@dataclass(frozen=True)
class Sweep:
    """What one sweep did."""

    deleted: tuple[str, ...]
    """Ids of the expired files deleted (row and bytes)."""
    kept: tuple[str, ...]
    """Ids of the expired files kept for the live jobs that train on them."""


class FileExpiry:
    """The sweep of expired files.

    Args:
        store: finds the expired files.
        remove: deletes a file's row and bytes unless a live job uses it; True when it did
            (:meth:`~alallo.runtime._training_files.TrainingFiles.remove`).
        interval_s: seconds between sweeps.
    """

    def __init__(self, store: Store, remove: Callable[[FileRow], Awaitable[bool]],
                 interval_s: float) -> None:
        self._store = store
        self._remove = remove
        self._interval_s = interval_s
        self._swept = trio.Event()
        self._last = Sweep((), ())

    async def sweep(self, now: float | None = None) -> Sweep:
        """Delete the files expired by ``now`` (default: the time now) that no live job
        uses, a batch of up to 500; report what was done to :meth:`wait_sweep`.

        Raises:
            StoreUnavailable: the store failed (nothing more is deleted in this sweep).
        """
        deleted: list[str] = []
        kept: list[str] = []
        for row in await self._store.expired_files(time.time() if now is None else now):
            (deleted if await self._remove(row) else kept).append(row.id)
        if deleted:
            log.info("file.expired", files=deleted)
        self._last = Sweep(tuple(deleted), tuple(kept))
        self._swept.set()
        self._swept = trio.Event()
        return self._last

    async def wait_sweep(self) -> Sweep:
        """Wait for the next sweep to end; what it did."""
        await self._swept.wait()
        return self._last

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Sweep every ``interval_s`` while the block runs (the runtime's lifetime)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._loop)
            yield
            nursery.cancel_scope.cancel()

    async def _loop(self) -> None:
        while True:
            try:
                await self.sweep()
            except (StoreUnavailable, OSError) as exc:  # tried again at the next sweep
                log.warning("file.expiry_failed", error=str(exc))
            await trio.sleep(self._interval_s)
