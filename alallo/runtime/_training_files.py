"""Training files: checked, stored (here and at the storage URL), read and deleted for an
account, and found again by the job actors that train on them
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

log = structlog.get_logger("alallo.files")

__all__ = ["TrainingFiles"]


class TrainingFiles:
    """The files of every account, and the rows of those that jobs use, kept in memory.

    Args:
        settings: ``max_upload_bytes``.
        store: the ``files`` rows.
        storage: where the bytes live (:mod:`alallo.cluster._file_storage`).
    """

    def __init__(self, settings: Settings, store: Store, storage: FileStorage) -> None:
        self._settings = settings
        self._store = store
        self._storage = storage
        self._known: dict[str, FileRow] = {}

    async def upload(self, account_id: str, filename: str, data: bytes,
                     *, purpose: str = "fine-tune") -> FileRow:
        """Check and store a JSONL training file.

        Raises:
            InvalidRequest: a purpose other than ``fine-tune``, or a file too large.
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
        checked = await trio.to_thread.run_sync(check_jsonl, data)
        file_id = new_id("file-")
        path = self._storage.local_path(file_id)
        await trio.Path(path).write_bytes(data)
        try:  # at the shared URL before it is recorded and answered
            await self._storage.put(file_id, path)
        except BaseException:
            await trio.Path(path).unlink(missing_ok=True)
            raise
        row = FileRow(
            id=file_id, account_id=account_id, filename=filename or "upload.jsonl",
            bytes=len(data), purpose=purpose, created_at=int(time.time()),
            line_count=checked.line_count, format=checked.format,
            sha256=hashlib.sha256(data).hexdigest(), path=str(path),
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
        """One of the account's files. Raises :class:`NotFound`."""
        row = await self._store.get_file(account_id, file_id)
        if row is None:
            raise NotFound(f"no file {shown(file_id)}", param="file_id")
        return row

    async def of_account(self, account_id: str) -> list[FileRow]:
        """The account's files, newest first."""
        return await self._store.list_files(account_id)

    async def content(self, account_id: str, file_id: str) -> bytes:
        """The bytes of one of the account's files. Raises :class:`NotFound`."""
        row = await self.get(account_id, file_id)
        return await trio.Path(await self._storage.local_copy(row)).read_bytes()

    async def delete(self, account_id: str, file_id: str) -> None:
        """Delete a file. Raises :class:`NotFound`, or :class:`Conflict` while a live job uses it."""
        row = await self.get(account_id, file_id)
        if not await self._store.delete_file(account_id, file_id):
            raise Conflict(f"file {file_id} is used by a job that has not finished",
                           param="file_id")
        self._known.pop(file_id, None)
        await self._storage.delete(row)

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
