"""A page of a job's items in either direction: the query behind a job's events list.

:meth:`~alallo.store.Store.items_after` reads forward from a sequence number (streams, log,
the runtime's own reads). OpenAI lists a job's events newest first, each page continuing
toward older ones; this reads that way too, and forward for alallo's ``order=asc``. Both go
down the ``(job_id, seq)`` primary key, so a page costs its length whichever way it reads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ._schema import SEQ_MAX, job_items

if TYPE_CHECKING:
    from ._store import Store

__all__ = ["item_page"]


async def item_page(store: Store, job_id: str, *, kinds: Sequence[str], cursor: int | None,
                    limit: int, newest_first: bool) -> list[tuple[str, int, dict[str, Any]]]:
    """Up to ``limit`` of a job's items of the given ``kinds``, past ``cursor``.

    Args:
        kinds: item kinds (``"event"``, ``"metrics"``, ``"log"``).
        cursor: a sequence number: newest first, the items below it; oldest first, those
            above it. None: from the newest (or the oldest) item.
        limit: the most items answered (at least 1).
        newest_first: the direction, and the order of the answer.

    Returns:
        ``(kind, seq, data)`` triples, ``data`` as the model's JSON dict.

    Raises:
        StoreUnavailable: the database failed.
    """
    table = job_items.c
    query = sa.select(table.kind, table.seq, table.data).where(
        table.job_id == job_id, table.kind.in_(list(kinds)))
    if cursor is not None:
        # A cursor past what the column holds (PostgreSQL refuses it) is past every item.
        query = query.where(table.seq <= min(cursor - 1, SEQ_MAX) if newest_first
                            else table.seq > min(cursor, SEQ_MAX))
    query = query.order_by(table.seq.desc() if newest_first else table.seq).limit(limit)

    def run(connection: sa.Connection) -> list[tuple[str, int, dict[str, Any]]]:
        return [(k, s, json.loads(d)) for k, s, d in connection.execute(query)]

    return await store.transaction(run)
