"""How a batch of jobs' changes is written (a part of :class:`alallo._store.Store`): the job
rows (fenced by their lease epoch), their events and log lines, the accounts' feeds, the
ledger and balances, and on PostgreSQL the NOTIFY of the other processes, with a few
statements for the whole batch (:mod:`alallo._group_commit` gathers it)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from .._errors import LeaseLost
from ..jobs import Event, Job, LedgerEntry, LogLine, MetricsPoint
from ._prepared import Prepared
from ._schema import NOTIFY_CHANNEL, accounts, job_feed, job_items, jobs, ledger

__all__ = ["Save", "balance_of", "save_many"]

# The statements of the hot path (every job creation and every trainer line is a save),
# built once and run as the driver's SQL (alallo.store._prepared: SQLAlchemy's per-row
# parameter handling cost more than SQLite's work for a batch).
_JOB_COLUMNS = ("id", "account_id", "created_at", "status", "training_file", "seq", "state",
                "owner", "epoch")
_UPDATE_JOB = jobs.update().where(jobs.c.id == sa.bindparam("job_id")).values(
    status=sa.bindparam("new_status"), seq=sa.bindparam("new_seq"),
    state=sa.bindparam("new_state"))
_UPDATE_OWNED_JOB = _UPDATE_JOB.where(jobs.c.epoch == sa.bindparam("lease_epoch"))
_PLAIN_UPDATE = Prepared(_UPDATE_JOB, ("new_status", "new_seq", "new_state", "job_id"))
_INSERT_JOB = Prepared(jobs.insert(), _JOB_COLUMNS)
_ZERO: sa.ColumnClause[int] = sa.literal_column("0")
_ONE: sa.ColumnClause[int] = sa.literal_column("1")
_INSERT_JOB_NUMBERED = Prepared(jobs.insert().values(
    # SQLite writes one at a time: the next number is free (PostgreSQL: an identity).
    number=sa.select(sa.func.coalesce(sa.func.max(jobs.c.number), _ZERO) + _ONE)
    .scalar_subquery()), _JOB_COLUMNS)
_INSERT_ITEMS = Prepared(job_items.insert(), ("job_id", "seq", "kind", "attempt", "data"))
_FEED_STATES = sa.select(job_feed.c.job_id, job_feed.c.state_seq).where(
    job_feed.c.job_id.in_(sa.bindparam("job_ids", expanding=True)))
_LOCK_ACCOUNT = Prepared(sa.select(accounts.c.id)
                         .where(accounts.c.id == sa.bindparam("account_id")).with_for_update(),
                         ("account_id",))
_NEXT_POSITION = Prepared(
    sa.select(sa.func.coalesce(sa.func.max(job_feed.c.position), _ZERO) + _ONE)
    .where(job_feed.c.account_id == sa.bindparam("account_id")), ("account_id",))
_INSERT_FEED = Prepared(job_feed.insert(), ("job_id", "account_id", "position", "state_seq"))
_MOVE_FEED = Prepared(job_feed.update().where(job_feed.c.job_id == sa.bindparam("feed_job_id"))
                      .values(position=sa.bindparam("new_position"),
                              state_seq=sa.bindparam("new_state_seq")),
                      ("new_position", "new_state_seq", "feed_job_id"))
_BALANCE = Prepared(sa.select(accounts.c.balance, accounts.c.billing_limit)
                    .where(accounts.c.id == sa.bindparam("account_id")), ("account_id",))
_LEDGER_ENTRY = sa.select(ledger.c.job_id).where(
    ledger.c.job_id == sa.bindparam("job_id"), ledger.c.kind == sa.bindparam("entry_kind"),
    ledger.c.first_step == sa.bindparam("entry_first_step"))
_INSERT_LEDGER = ledger.insert()
_ADD_TO_BALANCE = accounts.update().where(accounts.c.id == sa.bindparam("account_id")).values(
    balance=accounts.c.balance + sa.bindparam("delta", type_=sa.Float))

_NOTIFY_MANY = sa.text("SELECT pg_notify(:channel, payload) "
                       "FROM unnest(CAST(:payloads AS text[])) AS payload")


def balance_of(c: sa.Connection, account_id: str) -> tuple[float, float]:
    """The account's ``(balance, billing_limit)`` in USD; ``(0, 0)`` for an unknown account."""
    row = _BALANCE.one(c, account_id)
    return (float(row[0]), float(row[1])) if row else (0.0, 0.0)


def charge_usage(c: sa.Connection, account_id: str, usage_id: str, tokens: int,
                 amount: float) -> None:
    """Charge ``amount`` (USD) for ``tokens`` tokens of one request (``usage_id``, e.g. a
    ``chatcmpl-…`` id): a ledger entry (kind ``charge``, steps ``0..tokens``) and the
    balance, once per id."""
    key = {"job_id": usage_id, "entry_kind": "charge", "entry_first_step": 0}
    if c.execute(_LEDGER_ENTRY, key).first():
        return
    c.execute(_INSERT_LEDGER, {
        "job_id": usage_id, "kind": "charge", "first_step": 0, "last_step": tokens,
        "account_id": account_id, "amount": amount, "created_at": int(time.time())})
    c.execute(_ADD_TO_BALANCE, {"account_id": account_id, "delta": -amount})


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
class Save:
    """One :meth:`Store.save_job` call, waiting for its batch."""

    job: Job
    state: str
    events: tuple[Event, ...]
    log: tuple[LogLine | MetricsPoint, ...]
    """Log lines and metrics points, stored as job items of kind ``log`` and ``metrics``."""
    entries: tuple[LedgerEntry, ...]
    insert: bool
    epoch: int | None
    owner: str | None


def save_many(c: sa.Connection, saves: Sequence[Save], notify_as: str | None) -> None:
    """Write several jobs' changes (each job once) with a few statements for all of them.

    Raises:
        LeaseLost: a fenced change found another epoch (the caller commits nothing).
    """
    if not saves:
        return
    inserts = [(s.job.id, s.job.account_id, s.job.created_at, s.job.status.value,
                s.job.spec.training_file, s.job.seq, s.state, s.owner, 0 if s.owner is None else 1)
               for s in saves if s.insert]
    if inserts:
        (_INSERT_JOB if c.dialect.name == "postgresql" else _INSERT_JOB_NUMBERED).execute(
            c, inserts)
    plain = [(s.job.status.value, s.job.seq, s.state, s.job.id)
             for s in saves if not s.insert and s.epoch is None]
    if plain:
        _PLAIN_UPDATE.execute(c, plain)
    fenced = [s for s in saves if not s.insert and s.epoch is not None]
    if fenced:
        params = [{"job_id": s.job.id, "new_status": s.job.status.value, "new_seq": s.job.seq,
                   "new_state": s.state, "lease_epoch": s.epoch} for s in fenced]
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
    rows: list[tuple[str, int, str, int, str]] = []
    for s in saves:
        job = s.job
        rows += [(job.id, e.seq, "event", job.attempt, e.model_dump_json()) for e in s.events]
        rows += [(job.id, line.n, "log" if isinstance(line, LogLine) else "metrics",
                  line.attempt, line.model_dump_json(exclude_none=True)) for line in s.log]
    if rows:
        _INSERT_ITEMS.execute(c, rows)
    _touch_feeds(c, [s.job for s in saves], {s.job.id for s in saves if s.insert})
    for s in saves:
        for entry in s.entries:
            _apply_entry(c, s.job, entry)


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
    inserts: list[tuple[str, str, int, int]] = []
    updates: list[tuple[int, int, str]] = []
    for account_id in sorted(by_account):
        if c.dialect.name != "sqlite":
            _LOCK_ACCOUNT.one(c, account_id)
        position = int(_NEXT_POSITION.one(c, account_id)[0])
        for job in by_account[account_id]:
            if job.id in known:
                updates.append((position, job.state_seq, job.id))
            else:
                inserts.append((job.id, account_id, position, job.state_seq))
            position += 1
    if inserts:
        _INSERT_FEED.execute(c, inserts)
    if updates:
        _MOVE_FEED.execute(c, updates)
