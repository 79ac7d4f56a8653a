"""Training files: checked, stored (here and at the storage URL), read, listed, deleted and
expired for an account, and found again by the job actors that train on them
(:meth:`alallo.Runtime.upload_file` and its siblings)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from typing import Any

import structlog
import trio

from .._errors import Conflict, InvalidRequest, NotFound, shown
from .._ids import new_id
from ..cluster import FileStorage
from ..jobs import check_jsonl
from ..settings import Settings
from ..store import FileRow, Store
from ._file_expiry import FileExpiry

log = structlog.get_logger("alallo.files")

__all__ = ["MAX_FILE_EXPIRY_S", "TrainingFiles"]

MAX_FILE_EXPIRY_S = 2_592_000
"""The longest ``expires_after.seconds`` (30 days, OpenAI's bound); the shortest is
``Settings.min_file_expiry_s`` (OpenAI's 3600)."""


class TrainingFiles:
    """The files of every account, and the rows of those that jobs use, kept in memory.

    Args:
        settings: ``max_upload_bytes``, the bounds of expiry and how often it is swept.
        store: the ``files`` rows.
        storage: where the bytes live (:mod:`alallo.cluster._file_storage`).
    """

    def __init__(self, settings: Settings, store: Store, storage: FileStorage) -> None:
        self._settings = settings
        self._store = store
        self._storage = storage
        self._known: dict[str, FileRow] = {}
        self.expiry = FileExpiry(store, self.remove, settings.file_expiry_sweep_s)
        """The sweep of expired files (:mod:`alallo.runtime._file_expiry`); the runtime
        runs it."""

    async def upload(self, account_id: str, filename: str, data: bytes,
                     *, purpose: str = "fine-tune", expires_after_s: int | None = None) -> FileRow:
        """Check and store a JSONL training file; with ``expires_after_s``, one that expires
        that many seconds after its creation (OpenAI's ``expires_after``).

        Raises:
            InvalidRequest: a purpose other than ``fine-tune``, a file too large, an expiry
                out of bounds (``param="expires_after"``).
            InvalidFile: a bad line (the message names it); nothing is stored.
            OSError: the storage refused the bytes; nothing is recorded.
            StoreUnavailable: the store failed to record the file; its bytes are removed
                too (kept, with a warning, only where the store cannot tell whether the
                row was written).
        """
        if purpose != "fine-tune":
            raise InvalidRequest(f"purpose must be 'fine-tune', got {purpose!r}", param="purpose")
        limit = self._settings.max_upload_bytes
        if len(data) > limit:
            raise InvalidRequest(f"the file is {len(data)} bytes; the limit is {limit}",
                                 param="file")
        shortest = self._settings.min_file_expiry_s
        if expires_after_s is not None and not shortest <= expires_after_s <= MAX_FILE_EXPIRY_S:
            raise InvalidRequest(f"expires_after.seconds must be between {shortest} and "
                                 f"{MAX_FILE_EXPIRY_S} (30 days), got {expires_after_s}",
                                 param="expires_after")
        checked = await trio.to_thread.run_sync(check_jsonl, data)
        file_id = new_id("file-")
        path = self._storage.local_path(file_id)
        await trio.Path(path).write_bytes(data)
        try:  # at the shared URL before it is recorded and answered
            await self._storage.put(file_id, path)
        except BaseException:
            await trio.Path(path).unlink(missing_ok=True)
            raise
        created = int(time.time())
        row = FileRow(
            id=file_id, account_id=account_id, filename=filename or "upload.jsonl",
            bytes=len(data), purpose=purpose, created_at=created,
            line_count=checked.line_count, format=checked.format,
            sha256=hashlib.sha256(data).hexdigest(), path=str(path),
            expires_at=None if expires_after_s is None else created + expires_after_s,
        )
        try:
            await self._store.insert_file(row)
        except BaseException:
            with trio.CancelScope(shield=True):
                await self._forget_unrecorded(row)
            raise
        self._known[file_id] = row
        return row

    async def _forget_unrecorded(self, row: FileRow) -> None:
        # The insert failed: the bytes go too (a failed request changes nothing), unless
        # the row was written after all (a connection lost at COMMIT) or that cannot be
        # told now, in which case they stay for the row that may point at them.
        try:
            recorded = await self._store.get_file(row.account_id, row.id) is not None
        except Exception:
            log.warning("file.bytes_kept_unrecorded", file_id=row.id, path=row.path)
            return
        if not recorded:
            await self._storage.delete(row)

    async def save_result(self, account_id: str, file_id: str, filename: str,
                          data: bytes) -> FileRow:
        """Store a file a job made for the account (purpose ``fine-tune-results``, format
        ``csv``) under ``file_id``, in place of an earlier one with that id.

        Raises:
            OSError: the storage refused the bytes; nothing is recorded.
            StoreUnavailable: the store failed.
        """
        path = self._storage.local_path(file_id)
        await trio.Path(path).write_bytes(data)
        await self._storage.put(file_id, path)
        row = FileRow(id=file_id, account_id=account_id, filename=filename, bytes=len(data),
                      purpose="fine-tune-results", created_at=int(time.time()),
                      line_count=max(data.count(b"\n") - 1, 0), format="csv",
                      sha256=hashlib.sha256(data).hexdigest(), path=str(path))
        await self._store.insert_file(row, replace=True)
        return row

    async def get(self, account_id: str, file_id: str) -> FileRow:
        """One of the account's files, not expired. Raises :class:`NotFound`."""
        row = await self._store.get_file(account_id, file_id)
        if row is None or row.expired(time.time()):
            raise NotFound(f"no file {shown(file_id)}", param="file_id")
        return row

    async def of_account(self, account_id: str, *, purpose: str | None = None,
                         ascending: bool = False) -> list[FileRow]:
        """The account's files not expired, newest first (``ascending``: oldest first);
        only those of ``purpose`` when given."""
        return await self._store.list_files(account_id, purpose=purpose, ascending=ascending,
                                            now=time.time())

    async def content(self, account_id: str, file_id: str) -> bytes:
        """The bytes of one of the account's files. Raises :class:`NotFound`."""
        row = await self.get(account_id, file_id)
        return await trio.Path(await self._storage.local_copy(row)).read_bytes()

    async def delete(self, account_id: str, file_id: str) -> None:
        """Delete a file. Raises :class:`NotFound`, or :class:`Conflict` while a live job uses it."""
        row = await self.get(account_id, file_id)
        if not await self.remove(row):
            raise Conflict(f"file {file_id} is used by a job that has not finished",
                           param="file_id")

    async def remove(self, row: FileRow) -> bool:
        """Delete a file's row and bytes unless a live job uses it; True when it did
        (also when it was gone already)."""
        if not await self._store.delete_file(row.account_id, row.id):
            return False
        self._known.pop(row.id, None)
        await self._storage.delete(row)
        return True

    def remember(self, row: FileRow) -> None:
        """Keep a row a job will train on (read while planning it)."""
        self._known[row.id] = row

    async def recall(self, account_id: str, file_id: str) -> None:
        """Read the row of ``file_id`` unless it is known already (before a job's actor starts)."""
        if file_id not in self._known:
            row = await self._store.get_file(account_id, file_id)
            if row is not None:
                self._known[row.id] = row

    async def recall_many(self, file_ids: Iterable[str]) -> None:
        """Read the rows of these files in one query, less those known (recovery, adoption)."""
        missing = [file_id for file_id in file_ids if file_id not in self._known]
        for row in await self._store.files_by_id(missing):
            self._known[row.id] = row

    async def local_path(self, file_id: str) -> str:
        """Where a known file's bytes are on this machine, fetched from the shared
        storage URL if need be (for the job actor).

        Raises:
            KeyError: the file is not known here (:meth:`recall` it first).
            OSError: the bytes are not here and cannot be fetched
                (:meth:`FileStorage.local_copy`).
        """
        return str(await self._storage.local_copy(self._known[file_id]))

    def format(self, file_id: str) -> Any:
        """The format of a known file (for the job actor). Raises KeyError for an unknown one."""
        return self._known[file_id].format
