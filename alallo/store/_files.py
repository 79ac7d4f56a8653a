"""The store's training files (a part of :class:`alallo._store.Store`): ``FileRow`` and its rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import sqlalchemy as sa

from ._schema import LIVE_STATUSES, files, jobs

__all__ = ["FileRow", "FileRows"]


T = TypeVar("T")


@dataclass(frozen=True)
class FileRow:
    """A stored training file."""

    id: str
    account_id: str
    filename: str
    bytes: int
    purpose: str
    created_at: int
    line_count: int
    format: str
    sha256: str
    path: str
    expires_at: int | None = None
    """When it expires (Unix s; ``expires_after`` at upload), or None: kept until deleted."""

    def expired(self, now: float) -> bool:
        """Whether the file has expired at ``now`` (Unix s): gone for its account, kept for
        the live jobs that train on it until they end (:mod:`alallo.runtime._file_expiry`)."""
        return self.expires_at is not None and self.expires_at <= now


class FileRows:
    """Training files' rows; :class:`~alallo._store.Store` has these methods.

    Every method runs in a worker thread and raises ``StoreUnavailable`` when
    the database fails.
    """

    if TYPE_CHECKING:
        async def _read(self, fn: Callable[[sa.Connection], T]) -> T: ...
        async def _write(self, fn: Callable[[sa.Connection], T]) -> T: ...

    async def insert_file(self, row: FileRow, *, replace: bool = False) -> None:
        """Store a checked file's record; with ``replace``, in place of one with its id."""
        def run(c: sa.Connection) -> None:
            if replace:
                c.execute(files.delete().where(files.c.id == row.id))
            c.execute(files.insert().values(**row.__dict__))
        await self._write(run)

    async def get_file(self, account_id: str, file_id: str) -> FileRow | None:
        """One of the account's files, or None."""
        def run(c: sa.Connection) -> FileRow | None:
            row = c.execute(sa.select(files).where(files.c.id == file_id,
                                                   files.c.account_id == account_id)).first()
            return FileRow(**row._mapping) if row else None
        return await self._read(run)

    async def files_by_id(self, file_ids: Sequence[str]) -> list[FileRow]:
        """The files with these ids, of any account (in bulk, for recovery); unknown ids are left out."""
        def run(c: sa.Connection) -> list[FileRow]:
            wanted = list(dict.fromkeys(file_ids))
            found: list[FileRow] = []
            for start in range(0, len(wanted), 500):  # bound the IN list
                rows = c.execute(sa.select(files).where(files.c.id.in_(wanted[start:start + 500])))
                found += [FileRow(**r._mapping) for r in rows]
            return found
        return await self._read(run)

    async def list_files(self, account_id: str, *, purpose: str | None = None,
                         ascending: bool = False, now: float | None = None) -> list[FileRow]:
        """The account's files, newest first (``ascending``: oldest first); only those of
        ``purpose`` when given; with ``now``, none expired by then."""
        def run(c: sa.Connection) -> list[FileRow]:
            query = sa.select(files).where(files.c.account_id == account_id)
            if purpose is not None:
                query = query.where(files.c.purpose == purpose)
            if now is not None:
                query = query.where(sa.or_(files.c.expires_at.is_(None),
                                           files.c.expires_at > now))
            order = ((files.c.created_at.asc(), files.c.id.asc()) if ascending
                     else (files.c.created_at.desc(), files.c.id.desc()))
            return [FileRow(**r._mapping) for r in c.execute(query.order_by(*order))]
        return await self._read(run)

    async def expired_files(self, now: float, *, limit: int = 500) -> list[FileRow]:
        """Files of every account expired by ``now`` (Unix s), soonest expired first, up to
        ``limit`` (the sweep's batch)."""
        def run(c: sa.Connection) -> list[FileRow]:
            rows = c.execute(sa.select(files).where(files.c.expires_at <= now)
                             .order_by(files.c.expires_at, files.c.id).limit(limit))
            return [FileRow(**r._mapping) for r in rows]
        return await self._read(run)

    async def delete_file(self, account_id: str, file_id: str) -> bool:
        """Forget a file unless a live job uses it; True when it was deleted."""
        def run(c: sa.Connection) -> bool:
            live = jobs.c.status.in_(LIVE_STATUSES)
            in_use = c.execute(sa.select(jobs.c.id).where(live, sa.or_(
                jobs.c.training_file == file_id,
                # a validation file: named in the job's state (its spec), compact JSON
                sa.and_(jobs.c.account_id == account_id, jobs.c.state.contains(
                    f'"validation_file":"{file_id}"', autoescape=True))))).first()
            if in_use:
                return False
            c.execute(files.delete().where(files.c.id == file_id,
                                           files.c.account_id == account_id))
            return True
        return await self._write(run)
