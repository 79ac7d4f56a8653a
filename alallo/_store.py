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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
import trio
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from ._errors import AlalloError
from ._group_commit import GroupCommit
from ._billing import LedgerEntry
from ._job import Event, Job, LogLine
from ._store_accounts import AccountRows
from ._store_sessions import SessionRows
from ._tolerant import UnreadableRow, read_job
from ._store_schema import (LIVE_STATUSES, NOTIFY_CHANNEL, accounts, files,
                            job_feed, job_items, jobs, ledger)

__all__ = ["FileRow", "LeaseLost", "Store", "StoreUnavailable"]

T = TypeVar("T")

# The statements of the hot path (every trainer line is a save_job), built once:
# building a Core statement costs several times what running it does.
_JOB_STATE = sa.select(jobs.c.state).where(jobs.c.id == sa.bindparam("job_id"))
_UPDATE_JOB = jobs.update().where(jobs.c.id == sa.bindparam("job_id")).values(
    status=sa.bindparam("new_status"), seq=sa.bindparam("new_seq"),
    state=sa.bindparam("new_state"))
_UPDATE_OWNED_JOB = _UPDATE_JOB.where(jobs.c.epoch == sa.bindparam("lease_epoch"))
_INSERT_JOB = jobs.insert()
_INSERT_JOB_NUMBERED = jobs.insert().values(
    # SQLite writes one at a time: the next number is free (PostgreSQL: an identity).
    number=sa.select(sa.func.coalesce(sa.func.max(jobs.c.number), 0) + 1).scalar_subquery())
_INSERT_ITEMS = job_items.insert()
_FEED_STATES = sa.select(job_feed.c.job_id, job_feed.c.state_seq).where(
    job_feed.c.job_id.in_(sa.bindparam("job_ids", expanding=True)))
_LOCK_ACCOUNT = (sa.select(accounts.c.id).where(accounts.c.id == sa.bindparam("account_id"))
                 .with_for_update())
_NEXT_POSITION = (sa.select(sa.func.coalesce(sa.func.max(job_feed.c.position), 0) + 1)
                  .where(job_feed.c.account_id == sa.bindparam("account_id")))
_INSERT_FEED = job_feed.insert()
_MOVE_FEED = job_feed.update().where(job_feed.c.job_id == sa.bindparam("feed_job_id")).values(
    position=sa.bindparam("new_position"), state_seq=sa.bindparam("new_state_seq"))
_BALANCE = (sa.select(accounts.c.balance, accounts.c.billing_limit)
            .where(accounts.c.id == sa.bindparam("account_id")))
_LEDGER_ENTRY = sa.select(ledger.c.job_id).where(
    ledger.c.job_id == sa.bindparam("job_id"), ledger.c.kind == sa.bindparam("entry_kind"),
    ledger.c.first_step == sa.bindparam("entry_first_step"))
_INSERT_LEDGER = ledger.insert()
_ADD_TO_BALANCE = accounts.update().where(accounts.c.id == sa.bindparam("account_id")).values(
    balance=accounts.c.balance + sa.bindparam("delta", type_=sa.Float))

_NOTIFY = sa.select(sa.func.pg_notify(sa.bindparam("channel"), sa.bindparam("payload")))
_NOTIFY_MANY = sa.text("SELECT pg_notify(:channel, payload) "
                       "FROM unnest(CAST(:payloads AS text[])) AS payload")

SQLITE_BUSY_MS = 5000
"""How long a SQLite write waits for another process's write to finish."""
MIGRATION_WAIT_MS = 120_000
"""How long a server starting on SQLite waits for another one's schema upgrade."""
_POSTGRES_ALIASES = ("postgresql", "postgres")
"""Drivers meaning "PostgreSQL, default driver": alallo's driver is psycopg 3."""


class StoreUnavailable(AlalloError):
    """The database could not be reached or refused the change."""

    code = "store_unavailable"


class LeaseLost(AlalloError):
    """A write carried a stale epoch: another process has taken the job's lease.

    The store changed nothing. The writer must stop running the job (its
    trainer included) and never write it again: the new owner runs it.
    """

    code = "lease_lost"

    def __init__(self, job_id: str, epoch: int) -> None:
        super().__init__(f"job {job_id}: the lease of epoch {epoch} was taken by another process")
        self.job_id = job_id
        self.epoch = epoch


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

    def public(self) -> dict[str, Any]:
        """The file object of the HTTP API."""
        return {
            "id": self.id, "object": "file", "filename": self.filename, "bytes": self.bytes,
            "purpose": self.purpose, "created_at": self.created_at,
            "line_count": self.line_count, "format": self.format,
            "status": "processed", "status_details": None,
        }


class Store(AccountRows, SessionRows):
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
        self._saves: GroupCommit[_Save, tuple[float, float]] = GroupCommit(
            self._save_batch, self._limiter)
        self.is_postgres = not is_sqlite and parsed.get_backend_name() == "postgresql"
        self.announce_as: str | None = None
        """The node id that signs change notices (``pg_notify``, PostgreSQL only); None: none sent."""

    @property
    def engine(self) -> sa.Engine:
        """The SQLAlchemy engine (for :mod:`alallo._cluster` and :mod:`alallo._notify`)."""
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

        Runs the Alembic migrations of :mod:`alallo._migrations` (an empty
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
            return _balance(c, account_id)
        return await self._read(run)

    async def ledger_entries(self, job_id: str) -> list[dict[str, Any]]:
        """A job's charges and refunds, in the order they were made."""
        def run(c: sa.Connection) -> list[dict[str, Any]]:
            rows = c.execute(sa.select(ledger).where(ledger.c.job_id == job_id)
                             .order_by(ledger.c.created_at, ledger.c.kind, ledger.c.first_step))
            return [dict(r._mapping) for r in rows]
        return await self._read(run)

    # -- files ---------------------------------------------------------------

    async def insert_file(self, row: FileRow) -> None:
        """Store a checked file's record."""
        await self._write(lambda c: c.execute(files.insert().values(**row.__dict__)))

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

    async def list_files(self, account_id: str) -> list[FileRow]:
        """The account's files, newest first."""
        def run(c: sa.Connection) -> list[FileRow]:
            rows = c.execute(sa.select(files).where(files.c.account_id == account_id)
                             .order_by(files.c.created_at.desc(), files.c.id.desc()))
            return [FileRow(**r._mapping) for r in rows]
        return await self._read(run)

    async def delete_file(self, account_id: str, file_id: str) -> bool:
        """Forget a file unless a live job uses it; True when it was deleted."""
        def run(c: sa.Connection) -> bool:
            in_use = c.execute(sa.select(jobs.c.id).where(
                jobs.c.training_file == file_id, jobs.c.status.in_(LIVE_STATUSES))).first()
            if in_use:
                return False
            c.execute(files.delete().where(files.c.id == file_id,
                                           files.c.account_id == account_id))
            return True
        return await self._write(run)

    # -- jobs ----------------------------------------------------------------

    async def save_job(self, job: Job, events: Sequence[Event] = (),
                       log: Sequence[LogLine] = (), entries: Sequence[LedgerEntry] = (),
                       *, insert: bool = False, epoch: int | None = None,
                       owner: str | None = None) -> tuple[float, float]:
        """Persist a job's new state with the events, log lines and ledger entries it made.

        One transaction: the job, its items, its ledger entries and the
        account's balance change together, committed before this returns. A
        ledger entry already written (same job, kind and first step) is not
        applied again. On PostgreSQL, with :attr:`announce_as` set, a
        ``pg_notify`` in the same transaction tells the other processes on
        commit (:mod:`alallo._notify`).

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
        return await self._saves.submit(_Save(job, job.model_dump_json(), tuple(events),
                                              tuple(log), tuple(entries), insert, epoch, owner))

    def _save_batch(self, saves: Sequence[_Save]) -> list[tuple[float, float]]:
        """Commit ``saves`` in one transaction (in a worker thread); raise, committing none."""
        notify_as = self.announce_as if self.is_postgres else None

        def run(c: sa.Connection) -> list[tuple[float, float]]:
            # A job saved twice in one batch (rare): its changes go in their order,
            # each part of the batch holding a job once.
            part: list[_Save] = []
            ids: set[str] = set()
            for save in saves:
                if save.job.id in ids:
                    _save_many(c, part, notify_as)
                    part, ids = [], set()
                part.append(save)
                ids.add(save.job.id)
            _save_many(c, part, notify_as)
            balances = {account: _balance(c, account)
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

    async def list_jobs(self, account_id: str, *, limit: int,
                        after: str | None = None) -> tuple[list[Job], bool]:
        """The account's jobs, newest first, after the job ``after``; and whether more follow.

        Newest means created last: jobs created in the same second keep their order.
        """
        def run(c: sa.Connection) -> tuple[list[Job], bool]:
            query = sa.select(jobs.c.state).where(jobs.c.account_id == account_id)
            if after is not None:
                anchor = c.execute(sa.select(jobs.c.number)
                                   .where(jobs.c.id == after)).scalar_one_or_none()
                if anchor is not None:
                    query = query.where(jobs.c.number < anchor)
            rows = c.execute(query.order_by(jobs.c.number.desc()).limit(limit + 1)).all()
            found = [job for r in rows[:limit] if (job := _readable(r[0])) is not None]
            return found, len(rows) > limit
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
                     .where(job_items.c.job_id == job_id, job_items.c.seq > after,
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
                .where(job_feed.c.account_id == account_id, job_feed.c.position > after)
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


def _balance(c: sa.Connection, account_id: str) -> tuple[float, float]:
    row = c.execute(_BALANCE, {"account_id": account_id}).first()
    return (float(row[0]), float(row[1])) if row else (0.0, 0.0)


def _apply_entry(c: sa.Connection, job: Job, entry: LedgerEntry) -> None:
    key = {"job_id": job.id, "entry_kind": entry.kind, "entry_first_step": entry.first_step}
    if c.execute(_LEDGER_ENTRY, key).first():
        return  # already applied: charges are idempotent per step range
    c.execute(_INSERT_LEDGER, {
        "job_id": job.id, "kind": entry.kind, "first_step": entry.first_step,
        "last_step": entry.last_step, "account_id": job.account_id, "amount": entry.amount,
        "created_at": int(time.time())})
    delta = -entry.amount if entry.kind == "charge" else entry.amount
    c.execute(_ADD_TO_BALANCE, {"account_id": job.account_id, "delta": delta})


@dataclass(frozen=True)
class _Save:
    """One :meth:`Store.save_job` call, waiting for its batch."""

    job: Job
    state: str
    events: tuple[Event, ...]
    log: tuple[LogLine, ...]
    entries: tuple[LedgerEntry, ...]
    insert: bool
    epoch: int | None
    owner: str | None


def _save_many(c: sa.Connection, saves: Sequence[_Save], notify_as: str | None) -> None:
    """Write several jobs' changes (each job once) with a few statements for all of them.

    Raises:
        LeaseLost: a fenced change found another epoch (the caller commits nothing).
    """
    if not saves:
        return
    inserts = [{"id": s.job.id, "account_id": s.job.account_id, "created_at": s.job.created_at,
                "training_file": s.job.spec.training_file, "status": s.job.status.value,
                "seq": s.job.seq, "state": s.state, "owner": s.owner,
                "epoch": 0 if s.owner is None else 1} for s in saves if s.insert]
    if inserts:
        c.execute(_INSERT_JOB if c.dialect.name == "postgresql" else _INSERT_JOB_NUMBERED,
                  inserts)
    plain = [_update_params(s) for s in saves if not s.insert and s.epoch is None]
    if plain:
        c.execute(_UPDATE_JOB, plain)
    fenced = [s for s in saves if not s.insert and s.epoch is not None]
    if fenced:
        params = [{**_update_params(s), "lease_epoch": s.epoch} for s in fenced]
        if c.dialect.supports_sane_multi_rowcount:
            if c.execute(_UPDATE_OWNED_JOB, params).rowcount != len(fenced):
                # Which one is not known here: the batch is retried one change at a time.
                raise LeaseLost(fenced[0].job.id, fenced[0].epoch or 0)
        else:
            for save, one in zip(fenced, params, strict=True):
                if c.execute(_UPDATE_OWNED_JOB, one).rowcount != 1:
                    raise LeaseLost(save.job.id, save.epoch or 0)
    if notify_as is not None:
        c.execute(_NOTIFY_MANY, {"channel": NOTIFY_CHANNEL, "payloads": [
            f"j {notify_as} {s.job.id} {s.job.account_id}" for s in saves]})
    rows = []
    for s in saves:
        job = s.job
        rows += [{"job_id": job.id, "seq": e.seq, "kind": "event", "attempt": job.attempt,
                  "data": e.model_dump_json()} for e in s.events]
        rows += [{"job_id": job.id, "seq": line.n, "kind": "log", "attempt": line.attempt,
                  "data": line.model_dump_json()} for line in s.log]
    if rows:
        c.execute(_INSERT_ITEMS, rows)
    _touch_feeds(c, [s.job for s in saves], {s.job.id for s in saves if s.insert})
    for s in saves:
        for entry in s.entries:
            _apply_entry(c, s.job, entry)


def _update_params(s: _Save) -> dict[str, Any]:
    return {"job_id": s.job.id, "new_status": s.job.status.value, "new_seq": s.job.seq,
            "new_state": s.state}


def _touch_feeds(c: sa.Connection, batch: Sequence[Job], created: set[str]) -> None:
    # Moves each job whose state changed (log lines alone do not) to the end of its
    # account's feed, in the batch's order, at consecutive positions. The next
    # position is read in the same transaction: SQLite runs one writer at a time;
    # on PostgreSQL, where jobs of one account are written from several processes
    # at once, the account's row is locked first (accounts in sorted order, so two
    # writers cannot deadlock), so the next writer waits and then reads the
    # positions this one took (the unique index stays as a guard).
    known: dict[str, int] = {}
    if updated := [job.id for job in batch if job.id not in created]:
        known = dict(c.execute(_FEED_STATES, {"job_ids": updated}).all())
    moved = [job for job in batch if known.get(job.id) != job.state_seq]
    if not moved:
        return
    by_account: dict[str, list[Job]] = {}
    for job in moved:
        by_account.setdefault(job.account_id, []).append(job)
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    for account_id in sorted(by_account):
        if c.dialect.name != "sqlite":
            c.execute(_LOCK_ACCOUNT, {"account_id": account_id})
        position = c.execute(_NEXT_POSITION, {"account_id": account_id}).scalar_one()
        for job in by_account[account_id]:
            if job.id in known:
                updates.append({"feed_job_id": job.id, "new_position": position,
                                "new_state_seq": job.state_seq})
            else:
                inserts.append({"job_id": job.id, "account_id": account_id,
                                "position": position, "state_seq": job.state_seq})
            position += 1
    if inserts:
        c.execute(_INSERT_FEED, inserts)
    if updates:
        c.execute(_MOVE_FEED, updates)


def _masked(url: str) -> str:
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparsable>"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL keeps readers off the writer's back; NORMAL durability survives a
    # killed process (only an OS crash may lose the last commits).
    # The timeout comes first: switching a new file to WAL takes a lock too.
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
