"""The store's accounts and API keys (a part of :class:`alallo._store.Store`).

Keys are kept as their SHA-256 hash (:mod:`alallo._keys`) and their first
characters, never whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from .._errors import NotFound
from ._schema import account_secrets, accounts, api_keys, ledger

if TYPE_CHECKING:
    from ._group_commit import GroupCommit

__all__ = ["AccountRows", "insert_new"]

T = TypeVar("T")

_RIGHTS = (sa.select(accounts.c.id, accounts.c.allow_commands)
           .where(accounts.c.id.in_(sa.bindparam("ids", expanding=True))))


def insert_new(c: sa.Connection, table: sa.Table) -> Any:
    """``INSERT`` that leaves an existing row (same primary key) as it is, without an error."""
    if c.dialect.name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    if c.dialect.name == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    return table.insert().prefix_with("IGNORE")  # MySQL's spelling of the same


class AccountRows:
    """Accounts and API keys; :class:`~alallo._store.Store` has these methods.

    Every method runs in a worker thread and raises ``StoreUnavailable`` when
    the database fails.
    """

    if TYPE_CHECKING:
        _rights: GroupCommit[str, bool]
        def _sync_tx(self, fn: Callable[[sa.Connection], T]) -> T: ...
        async def _read(self, fn: Callable[[sa.Connection], T]) -> T: ...
        async def _write(self, fn: Callable[[sa.Connection], T]) -> T: ...

    async def ensure_account(self, account_id: str, name: str, balance: float, now: int,
                             *, billing_limit: float = 0.0, allow_commands: bool = False) -> None:
        """Create the account unless it exists (an existing one is left as it is).

        Idempotent also when several servers start at once on a fresh database:
        one insert wins, the others change nothing (``ON CONFLICT DO NOTHING``).
        """
        def run(c: sa.Connection) -> None:
            c.execute(insert_new(c, accounts).values(
                id=account_id, name=name, balance=balance, billing_limit=billing_limit,
                created_at=now, allow_commands=allow_commands))
        await self._write(run)

    async def add_api_key(self, key_hash: str, account_id: str, now: int) -> None:
        """Register a key (by its hash) for an account; idempotent, as :meth:`ensure_account`."""
        def run(c: sa.Connection) -> None:
            c.execute(insert_new(c, api_keys).values(key_hash=key_hash, account_id=account_id,
                                                      created_at=now))
        await self._write(run)

    async def account_for_key(self, key_hash: str) -> str | None:
        """The account a key belongs to, or None."""
        def run(c: sa.Connection) -> str | None:
            row = c.execute(sa.select(api_keys.c.account_id)
                            .where(api_keys.c.key_hash == key_hash,
                                   api_keys.c.revoked_at.is_(None))).first()
            return row[0] if row else None
        return await self._read(run)

    async def get_account(self, account_id: str) -> dict[str, Any] | None:
        """An account's row (``id, name, balance, billing_limit, created_at,
        allow_commands``), or None."""
        def run(c: sa.Connection) -> dict[str, Any] | None:
            row = c.execute(sa.select(accounts).where(accounts.c.id == account_id)).first()
            return dict(row._mapping) if row else None
        return await self._read(run)

    async def account_summary(self, account_id: str) -> dict[str, Any] | None:
        """An account's row with its ledger summed (``GET /v1/account``), or None.

        Returns the keys of :meth:`get_account` and ``charges`` and ``refunds``: the sums of
        the account's ledger entries of each kind (jobs and completions), USD, 0 when none.
        One statement, so the balance and the sums are of the same moment (a charge
        committed meanwhile is in all of them or in none). The sums read the account's
        entries through the ledger's ``account_id`` index: 11-22 ms per 10,000 entries on
        SQLite, 6 ms on PostgreSQL (``docs/api.md``, "Your account"); running totals on the
        account's row would make it constant, at the price of a migration.
        """
        def total(kind: str) -> Any:
            return (sa.select(sa.func.coalesce(sa.func.sum(ledger.c.amount), 0.0))
                    .where(ledger.c.account_id == accounts.c.id, ledger.c.kind == kind)
                    .scalar_subquery())

        query = sa.select(accounts, total("charge").label("charges"),
                          total("refund").label("refunds")).where(accounts.c.id == account_id)

        def run(c: sa.Connection) -> dict[str, Any] | None:
            row = c.execute(query).first()
            return dict(row._mapping) if row else None
        return await self._read(run)

    async def list_accounts(self) -> list[dict[str, Any]]:
        """Every account's row, oldest first."""
        def run(c: sa.Connection) -> list[dict[str, Any]]:
            rows = c.execute(sa.select(accounts).order_by(accounts.c.created_at, accounts.c.id))
            return [dict(r._mapping) for r in rows]
        return await self._read(run)

    async def create_api_key(self, key_hash: str, account_id: str, prefix: str,
                             now: int) -> None:
        """Register a new key of an existing account, by its hash and its prefix.

        Raises:
            NotFound: no account ``account_id``.
        """
        def run(c: sa.Connection) -> None:
            if not c.execute(sa.select(accounts.c.id).where(accounts.c.id == account_id)).first():
                raise NotFound(f"no account {account_id!r}", param="account")
            c.execute(api_keys.insert().values(key_hash=key_hash, account_id=account_id,
                                               prefix=prefix, created_at=now))
        await self._write(run)

    async def find_api_keys(self, *, key_hash: str | None = None, prefix: str | None = None,
                            account_id: str | None = None) -> list[dict[str, Any]]:
        """Keys (``key_hash, account_id, prefix, created_at, revoked_at``), oldest first.

        ``key_hash`` matches one key exactly; ``prefix`` every key whose stored
        prefix starts with it; ``account_id`` an account's keys; none: every key.
        """
        def run(c: sa.Connection) -> list[dict[str, Any]]:
            query = sa.select(api_keys).order_by(api_keys.c.created_at, api_keys.c.key_hash)
            if key_hash is not None:
                query = query.where(api_keys.c.key_hash == key_hash)
            if prefix is not None:
                query = query.where(api_keys.c.prefix.startswith(prefix, autoescape=True))
            if account_id is not None:
                query = query.where(api_keys.c.account_id == account_id)
            return [dict(r._mapping) for r in c.execute(query)]
        return await self._read(run)

    async def revoke_api_key(self, key_hash: str, now: int) -> bool:
        """Revoke a key for good (it stays listed); False if it was revoked already."""
        def run(c: sa.Connection) -> bool:
            done = c.execute(api_keys.update().where(api_keys.c.key_hash == key_hash,
                                                     api_keys.c.revoked_at.is_(None))
                             .values(revoked_at=now))
            return bool(done.rowcount)
        return await self._write(run)

    async def allows_commands(self, account_id: str) -> bool:
        """Whether the account may send a command of its own (False for an unknown one).

        Read at the time of the call (never a cached answer: ``alallo accounts`` may change
        it from another process), but concurrent calls share one query: every job starting
        a run asks it, 1,000 at once after a restart (:meth:`rights_batch`).
        """
        return await self._rights.submit(account_id)

    def rights_batch(self, account_ids: Sequence[str]) -> list[bool]:
        """``allow_commands`` of each account, in one query (in a worker thread; the
        store's :class:`~alallo.store._group_commit.GroupCommit` of reads calls it with the
        accounts asked while the previous query ran)."""
        def run(c: sa.Connection) -> list[bool]:
            allowed = {account: bool(allow) for account, allow in c.execute(
                _RIGHTS, {"ids": sorted(set(account_ids))})}
            return [allowed.get(account, False) for account in account_ids]
        return self._sync_tx(run)

    async def fund_account(self, account_id: str, *, add: float = 0.0,
                           billing_limit: float | None = None) -> None:
        """Add ``add`` USD to the account's balance (in the database, so that a charge
        committed meanwhile is kept), and set its billing limit when given.

        Raises:
            NotFound: no account ``account_id``.
        """
        def run(c: sa.Connection) -> None:
            values: dict[str, Any] = {"balance": accounts.c.balance + add}
            if billing_limit is not None:
                values["billing_limit"] = billing_limit
            done = c.execute(accounts.update().where(accounts.c.id == account_id).values(**values))
            if not done.rowcount:
                raise NotFound(f"no account {account_id!r}", param="account")
        await self._write(run)

    async def set_allow_commands(self, account_id: str, allow: bool) -> None:
        """Allow or forbid the account's own commands.

        Raises:
            NotFound: no account ``account_id``.
        """
        def run(c: sa.Connection) -> None:
            done = c.execute(accounts.update().where(accounts.c.id == account_id)
                             .values(allow_commands=allow))
            if not done.rowcount:
                raise NotFound(f"no account {account_id!r}", param="account")
        await self._write(run)

    async def set_account_secret(self, account_id: str, name: str, value: str | None,
                                 now: int) -> None:
        """Store (or with None, forget) a secret the account's jobs use, e.g.
        ``wandb_api_key``; no answer shows it (:meth:`account_secret` is its one reader).

        Raises:
            NotFound: no account ``account_id``.
        """
        def run(c: sa.Connection) -> None:
            if not c.execute(sa.select(accounts.c.id).where(accounts.c.id == account_id)).first():
                raise NotFound(f"no account {account_id!r}", param="account")
            c.execute(account_secrets.delete().where(account_secrets.c.account_id == account_id,
                                                     account_secrets.c.name == name))
            if value is not None:
                c.execute(account_secrets.insert().values(account_id=account_id, name=name,
                                                          value=value, updated_at=now))
        await self._write(run)

    async def account_secret(self, account_id: str, name: str) -> str | None:
        """The secret ``name`` the account stored, or None."""
        def run(c: sa.Connection) -> str | None:
            return c.execute(sa.select(account_secrets.c.value).where(
                account_secrets.c.account_id == account_id,
                account_secrets.c.name == name)).scalar_one_or_none()
        return await self._read(run)
