"""The store: accounts, files, jobs and their events and log, in SQL.

SQLAlchemy Core over a SQLite file by default (any SQLAlchemy URL works;
PostgreSQL is the many-process backend). SQLAlchemy's engine is synchronous,
so each call runs in a worker thread (``trio.to_thread``); SQLite calls go
one at a time, which is what SQLite wants from writers anyway.

A job's events and log lines share one table of *items* keyed by
``(job_id, seq)``: the per-job sequence number of the design's rule 4. The
job row keeps the latest job state and its ``seq``.

No SQLAlchemy exception leaves this module: an unreachable or broken
database raises :class:`StoreUnavailable`.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
import trio
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from .._errors import LeaseLost, StoreUnavailable
from ..jobs import Event, Job, LedgerEntry, LogLine, MetricsPoint
from ._accounts import AccountRows
from ._files import FileRow, FileRows
from ._group_commit import GroupCommit
from ._job_lists import JobLists
from ._permissions import PermissionRows
from ._saves import Save, balance_of, charge_usage, save_many
from ._schema import LIVE_STATUSES, SEQ_MAX, job_feed, job_items, jobs, ledger
from ._sessions import SessionRows
from ._tolerant import UnreadableRow, read_job

__all__ = ["FileRow", "LeaseLost", "Store", "StoreUnavailable"]

T = TypeVar("T")

# The statements of the hot path (every trainer line is a save_job), built once:
# building a Core statement costs several times what running it does (the writes'
# are in alallo._store_saves).
_JOB_STATE = sa.select(jobs.c.state).where(jobs.c.id == sa.bindparam("job_id"))
_NOTIFY = sa.select(sa.func.pg_notify(sa.bindparam("channel"), sa.bindparam("payload")))
SQLITE_BUSY_MS = 5000
"""How long a SQLite write waits for another process's write to finish."""
MIGRATION_WAIT_MS = 120_000
"""How long a server starting on SQLite waits for another one's schema upgrade."""
_POSTGRES_ALIASES = ("postgresql", "postgres")
"""Drivers meaning "PostgreSQL, default driver": alallo's driver is psycopg 3."""


class Store(AccountRows, FileRows, JobLists, PermissionRows, SessionRows):
    """Durable state; every method is one transaction.

    Open with :meth:`open`, close with :meth:`close` (the runtime does both).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            parsed = sa.make_url(url)
            if parsed.drivername in _POSTGRES_ALIASES:
                parsed = parsed.set(drivername="postgresql+psycopg")
            is_sqlite = parsed.get_backend_name() == "sqlite"
            self._engine = sa.create_engine(
                parsed,
                connect_args={"check_same_thread": False} if is_sqlite else {},
                # A connection PostgreSQL closed (restart, idle timeout) is
                # replaced before use instead of failing the next write.
                pool_pre_ping=not is_sqlite,
            )
        except ArgumentError as exc:
            raise ValueError(f"not a usable database URL: {_masked(url)}: {exc}") from exc
        if is_sqlite:
            sa.event.listen(self._engine, "connect", _sqlite_pragmas)
        self._limiter = trio.CapacityLimiter(1 if is_sqlite else 8)
        self._saves: GroupCommit[Save, tuple[float, float]] = GroupCommit(
            self._save_batch, self._limiter)
        self._rights: GroupCommit[str, bool] = GroupCommit(self.rights_batch, self._limiter)
        """Concurrent reads of accounts' ``allow_commands``, one query each batch."""
        self.is_postgres = not is_sqlite and parsed.get_backend_name() == "postgresql"
        self.announce_as: str | None = None
        """The node id that signs change notices (``pg_notify``, PostgreSQL only); None: none sent."""

    @property
    def engine(self) -> sa.Engine:
        """The SQLAlchemy engine (for :mod:`alallo.cluster._cluster` and :mod:`alallo.runtime._notify`)."""
        return self._engine

    async def transaction(self, fn: Callable[[sa.Connection], T], *,
                          queue: bool = True) -> T:
        """Run ``fn(connection)`` in one transaction, in a worker thread.

        ``queue=False`` skips the queue of the store's other calls (a
        heartbeat must not wait behind a backlog of job writes).

        Raises:
            StoreUnavailable: the database failed.
        """
        if queue:
            return await self._write(fn)
        return await trio.to_thread.run_sync(self._sync_tx, fn)

    def open(self) -> str:
        """Bring the schema to the newest revision (sync: runs once at start-up).

        Runs the Alembic migrations of :mod:`alallo.store._migrations` (an empty
        database gets the whole schema); PostgreSQL servers starting together
        migrate once, under an advisory lock.

        Returns:
            The revision the database is at.

        Raises:
            StoreUnavailable: the database cannot be reached, or a newer
                alallo migrated it to a revision this one does not know.
        """
        from alembic.util import CommandError

        from ._migrations import upgrade

        def run() -> str:
            with self._engine.connect() as connection:
                sqlite = connection.dialect.name == "sqlite"
                if sqlite:
                    # pysqlite opens no transaction before DDL: take the write lock
                    # now, so that the migration is all or nothing and runs once;
                    # a server starting meanwhile waits for it, longer than for a write.
                    connection.exec_driver_sql(f"PRAGMA busy_timeout={MIGRATION_WAIT_MS}")
                    connection.exec_driver_sql("BEGIN IMMEDIATE")
                revision = upgrade(connection)
                connection.commit()
                if sqlite:
                    connection.exec_driver_sql(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
                return revision
        try:
            return self._sync(run)
        except CommandError as exc:
            raise StoreUnavailable(f"cannot upgrade the database schema: {exc}") from exc

    def close(self) -> None:
        """Release every connection."""
        self._engine.dispose()

    # -- money -------------------------------------------------------------

    async def balance(self, account_id: str) -> tuple[float, float]:
        """The account's ``(balance, billing_limit)`` in USD (zeros for an unknown account)."""
        def run(c: sa.Connection) -> tuple[float, float]:
            return balance_of(c, account_id)
        return await self._read(run)

    async def charge_usage(self, account_id: str, usage_id: str, tokens: int,
                           amount: float) -> None:
        """Charge an account for one inference request (:func:`._saves.charge_usage`)."""
        await self.transaction(lambda c: charge_usage(c, account_id, usage_id, tokens, amount))

    async def ledger_entries(self, job_id: str) -> list[dict[str, Any]]:
        """A job's charges and refunds, in the order they were made."""
        def run(c: sa.Connection) -> list[dict[str, Any]]:
            rows = c.execute(sa.select(ledger).where(ledger.c.job_id == job_id)
                             .order_by(ledger.c.created_at, ledger.c.kind, ledger.c.first_step))
            return [dict(r._mapping) for r in rows]
        return await self._read(run)

    # -- jobs ----------------------------------------------------------------

    async def save_job(self, job: Job, events: Sequence[Event] = (),
                       log: Sequence[LogLine | MetricsPoint] = (), entries: Sequence[LedgerEntry] = (),
                       *, insert: bool = False, epoch: int | None = None,
                       owner: str | None = None) -> tuple[float, float]:
        """Persist a job's new state with the events, log lines (and metrics points) and ledger
        entries it made.

        One transaction: the job, its items, its ledger entries and the
        account's balance change together, committed before this returns. A
        ledger entry already written (same job, kind and first step) is not
        applied again. On PostgreSQL, with :attr:`announce_as` set, a
        ``pg_notify`` in the same transaction tells the other processes on
        commit (:mod:`alallo.runtime._notify`).

        Group commit (:mod:`alallo._group_commit`): calls made while another
        batch commits are committed together in the next transaction, with a
        few statements for all of them; each call returns once its transaction
        has committed, and a change that fails fails only its own call.

        Fencing (Kleppmann, "How to do distributed locking", 2016): with
        ``epoch``, the job is written only if its row still has that epoch.
        ``insert`` with ``owner`` creates the job leased to that node, epoch 1.

        Returns:
            The account's ``(balance, billing_limit)`` after the change (and
            the changes committed with it).

        Raises:
            LeaseLost: the row's epoch is not ``epoch``; nothing was written.
            StoreUnavailable: the database failed or refused the change.
        """
        return await self._saves.submit(Save(job, job.model_dump_json(), tuple(events),
                                              tuple(log), tuple(entries), insert, epoch, owner))

    def _save_batch(self, saves: Sequence[Save]) -> list[tuple[float, float]]:
        """Commit ``saves`` in one transaction (in a worker thread); raise, committing none."""
        notify_as = self.announce_as if self.is_postgres else None

        def run(c: sa.Connection) -> list[tuple[float, float]]:
            # A job saved twice in one batch (rare): its changes go in their order,
            # each part of the batch holding a job once.
            part: list[Save] = []
            ids: set[str] = set()
            for save in saves:
                if save.job.id in ids:
                    save_many(c, part, notify_as)
                    part, ids = [], set()
                part.append(save)
                ids.add(save.job.id)
            save_many(c, part, notify_as)
            balances = {account: balance_of(c, account)
                        for account in dict.fromkeys(s.job.account_id for s in saves)}
            return [balances[s.job.account_id] for s in saves]
        return self._sync_tx(run)

    async def get_job(self, job_id: str, account_id: str | None = None) -> Job | None:
        """A job by id (within an account when one is given), or None."""
        def run(c: sa.Connection) -> Job | None:
            row = c.execute(_JOB_STATE, {"job_id": job_id}).first()
            if row is None:
                return None
            job = _readable(row[0])
            if job is None:
                return None
            return job if account_id is None or job.account_id == account_id else None
        return await self._read(run)

    async def jobs_of_account(self, account_id: str, job_ids: Sequence[str]) -> set[str]:
        """Which of ``job_ids`` belong to the account."""
        def run(c: sa.Connection) -> set[str]:
            wanted = list(dict.fromkeys(job_ids))
            found: set[str] = set()
            for start in range(0, len(wanted), 500):  # bound the IN list
                found |= set(c.execute(sa.select(jobs.c.id).where(
                    jobs.c.account_id == account_id,
                    jobs.c.id.in_(wanted[start:start + 500]))).scalars())
            return found
        return await self._read(run)

    async def count_jobs_by_status(self) -> dict[str, int]:
        """How many jobs of every account are in each status (statuses with none left out)."""
        def run(c: sa.Connection) -> dict[str, int]:
            rows = c.execute(sa.select(jobs.c.status, sa.func.count()).group_by(jobs.c.status))
            return {str(status): int(n) for status, n in rows}
        return await self._read(run)

    async def jobs_by_id(self, job_ids: Sequence[str]) -> list[Job]:
        """The jobs with these ids (in bulk, for recovery), in the order they were created."""
        def run(c: sa.Connection) -> list[Job]:
            wanted = list(dict.fromkeys(job_ids))
            found: list[tuple[int, Job]] = []
            for start in range(0, len(wanted), 500):  # bound the IN list
                rows = c.execute(sa.select(jobs.c.number, jobs.c.state)
                                 .where(jobs.c.id.in_(wanted[start:start + 500])))
                found += [(int(n), job) for n, state in rows
                          if (job := _readable(state)) is not None]
            return [job for _, job in sorted(found, key=lambda pair: pair[0])]
        return await self._read(run)

    async def live_jobs(self) -> list[Job]:
        """Every job not yet in a final status, in the order they were created."""
        def run(c: sa.Connection) -> list[Job]:
            rows = c.execute(sa.select(jobs.c.state).where(jobs.c.status.in_(LIVE_STATUSES))
                             .order_by(jobs.c.number))
            return [job for r in rows if (job := _readable(r[0])) is not None]
        return await self._read(run)

    async def items_after(self, job_id: str, after: int, *, kinds: Sequence[str] = ("event", "log"),
                          attempt: int | None = None, limit: int | None = None,
                          ) -> list[tuple[str, int, dict[str, Any]]]:
        """A job's events and/or log lines with ``seq > after``, oldest first.

        Returns ``(kind, seq, data)`` triples, ``data`` as the model's JSON dict.
        """
        def run(c: sa.Connection) -> list[tuple[str, int, dict[str, Any]]]:
            query = (sa.select(job_items.c.kind, job_items.c.seq, job_items.c.data)
                     .where(job_items.c.job_id == job_id, job_items.c.seq > min(after, SEQ_MAX),
                            job_items.c.kind.in_(kinds))
                     .order_by(job_items.c.seq))
            if attempt is not None:
                query = query.where(job_items.c.attempt == attempt)
            if limit is not None:
                query = query.limit(limit)
            return [(k, s, json.loads(d)) for k, s, d in c.execute(query)]
        return await self._read(run)

    async def job_feed_after(self, account_id: str, after: int, *, limit: int = 500,
                             ) -> list[tuple[int, Job]]:
        """The account's jobs whose latest state is past ``after`` in its feed, in feed order.

        Returns ``(position, job)`` pairs; ``position`` is the cursor of the
        account stream. A job appears once, at the position of its latest state.
        """
        def run(c: sa.Connection) -> list[tuple[int, Job]]:
            rows = c.execute(
                sa.select(job_feed.c.position, jobs.c.state)
                .join(jobs, jobs.c.id == job_feed.c.job_id)
                .where(job_feed.c.account_id == account_id,
                       job_feed.c.position > min(after, SEQ_MAX))
                .order_by(job_feed.c.position).limit(limit))
            return [(int(p), job) for p, state in rows if (job := _readable(state)) is not None]
        return await self._read(run)

    # -- plumbing ------------------------------------------------------------

    async def _read(self, fn: Callable[[sa.Connection], T]) -> T:
        return await trio.to_thread.run_sync(self._sync_tx, fn, limiter=self._limiter)

    _write = _read

    def _sync_tx(self, fn: Callable[[sa.Connection], T]) -> T:
        try:
            with self._engine.begin() as connection:
                return fn(connection)
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"the store failed: {exc.__class__.__name__}: {exc}") from exc

    def _sync(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"the store failed: {exc}") from exc


def _readable(state: str) -> Job | None:
    """A stored job, repaired if it no longer validates; None (logged) if beyond repair."""
    try:
        return read_job(state)
    except UnreadableRow:
        return None


def _masked(url: str) -> str:
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparsable>"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL keeps readers off the writer's back. FULL: each commit is flushed to
    # disk (fsync of the WAL) before it returns, so what was answered survives an
    # OS crash or a power cut too, as on PostgreSQL (NORMAL would flush only at
    # checkpoints); the group commit (alallo.store._group_commit) pays one flush
    # per batch. The timeout comes first: switching a new file to WAL takes a lock too.
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
    if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        _switch_to_wal(cursor)
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.close()


def _switch_to_wal(cursor: Any) -> None:
    # Only a new file needs it (the mode is kept in the file). SQLite may answer
    # "database is locked" at once, without its busy handler, while another
    # connection holds the file (servers starting together; seen once in the
    # suite under load): tried again, a few ms apart, for up to SQLITE_BUSY_MS.
    # A loop of its own: this runs inside SQLAlchemy's connect event.
    deadline = time.monotonic() + SQLITE_BUSY_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)
