"""The store's dashboard sessions and shared secrets (a part of :class:`alallo._store.Store`).

A session stands for an API key (by the key's hash) until it expires, is
ended (sign-out), or its key is revoked; its id is kept as a SHA-256 hash.
What a browser holds and how it is signed: ``gateway/_sessions.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import sqlalchemy as sa

from ._accounts import insert_new
from ._schema import api_keys, server_secrets, sessions

__all__ = ["SessionRows"]

T = TypeVar("T")


class SessionRows:
    """Dashboard sessions and shared secrets; :class:`~alallo._store.Store` has these methods.

    Every method runs in a worker thread and raises ``StoreUnavailable`` when
    the database fails. Times are Unix seconds.
    """

    if TYPE_CHECKING:
        async def _read(self, fn: Callable[[sa.Connection], T]) -> T: ...
        async def _write(self, fn: Callable[[sa.Connection], T]) -> T: ...

    async def shared_secret(self, name: str, new_value: str, now: int) -> str:
        """The secret called ``name``, stored as ``new_value`` if there is none yet.

        Every process on the store gets the same value, also when several ask
        at once on a fresh database (the first insert wins, ``ON CONFLICT DO
        NOTHING``), and the next run gets it again.
        """
        def run(c: sa.Connection) -> str:
            c.execute(insert_new(c, server_secrets).values(name=name, value=new_value,
                                                           created_at=now))
            return str(c.execute(sa.select(server_secrets.c.value)
                                 .where(server_secrets.c.name == name)).scalar_one())
        return await self._write(run)

    async def add_session(self, id_hash: str, key_hash: str, now: int, expires_at: int) -> None:
        """Record a session of a key until ``expires_at``; sessions already over are dropped."""
        def run(c: sa.Connection) -> None:
            c.execute(sessions.delete().where(sessions.c.expires_at <= now))
            c.execute(sessions.insert().values(id_hash=id_hash, key_hash=key_hash,
                                               created_at=now, expires_at=expires_at))
        await self._write(run)

    async def session_key(self, id_hash: str, now: int) -> tuple[str, str] | None:
        """``(key_hash, account_id)`` of a live session: not ended, not expired, its key
        not revoked; else None."""
        def run(c: sa.Connection) -> tuple[str, str] | None:
            row = c.execute(
                sa.select(api_keys.c.key_hash, api_keys.c.account_id)
                .select_from(sessions.join(api_keys, sessions.c.key_hash == api_keys.c.key_hash))
                .where(sessions.c.id_hash == id_hash, sessions.c.expires_at > now,
                       api_keys.c.revoked_at.is_(None))).first()
            return (str(row[0]), str(row[1])) if row else None
        return await self._read(run)

    async def end_session(self, id_hash: str) -> bool:
        """End a session for good; False if there was none (ended already, or unknown)."""
        def run(c: sa.Connection) -> bool:
            return bool(c.execute(sessions.delete().where(sessions.c.id_hash == id_hash))
                        .rowcount)
        return await self._write(run)
