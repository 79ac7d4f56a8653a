"""Durable state in SQL (SQLAlchemy Core; SQLite by default, PostgreSQL for many processes):
accounts and keys, training files, jobs with their events, log and ledger, dashboard
sessions, and the schema's migrations. No SQLAlchemy error leaves this wing: an unreachable
or broken database raises :class:`StoreUnavailable`.

- :mod:`~alallo.store._store`: :class:`Store`, the one object the runtime holds (its parts:
  ``_accounts``, ``_files``, ``_job_lists``, ``_permissions``, ``_sessions``,
  ``_saves``);
  :mod:`~alallo.store._schema`: the tables.
- :mod:`~alallo.store._group_commit`: concurrent writes gathered into one transaction;
  :mod:`~alallo.store._prepared`: the hot writes' statements, compiled once, run on the driver.
- :mod:`~alallo.store._checkpoints`: :class:`JobCheckpoints`, the supervisor's checkpoint
  store over job rows; :mod:`~alallo.store._tolerant`: reading rows that no longer validate;
  :mod:`~alallo.store._item_pages`: a page of a job's items, newest or oldest first.
- :mod:`~alallo.store._migrations`: running Alembic's scripts (``migrations/``).

Names load on first use (PEP 562), so importing one module of the wing does not
import the rest of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alallo._lazy import lazy_names

if TYPE_CHECKING:
    from . import _schema as schema
    from ._checkpoints import JobCheckpoints as JobCheckpoints
    from ._item_pages import item_page as item_page
    from ._job_lists import NULL_METADATA as NULL_METADATA
    from ._schema import LIVE_STATUSES as LIVE_STATUSES
    from ._schema import NOTIFY_CHANNEL as NOTIFY_CHANNEL
    from ._store import FileRow as FileRow
    from ._store import LeaseLost as LeaseLost
    from ._store import Store as Store
    from ._store import StoreUnavailable as StoreUnavailable
    from ._tolerant import read_item as read_item

_ORIGINS: dict[str, tuple[str, str | None]] = {
    "FileRow": ("._store", "FileRow"),
    "JobCheckpoints": ("._checkpoints", "JobCheckpoints"),
    "LIVE_STATUSES": ("._schema", "LIVE_STATUSES"),
    "LeaseLost": ("._store", "LeaseLost"),
    "NOTIFY_CHANNEL": ("._schema", "NOTIFY_CHANNEL"),
    "NULL_METADATA": ("._job_lists", "NULL_METADATA"),
    "item_page": ("._item_pages", "item_page"),
    "Store": ("._store", "Store"),
    "StoreUnavailable": ("._store", "StoreUnavailable"),
    "read_item": ("._tolerant", "read_item"),
    "schema": ("._schema", None),
}
"""Each public name: the module it comes from, and its name there (None: the module)."""


def head_revision() -> str:
    """The newest schema revision alallo ships (:func:`alallo.store._migrations.head_revision`;
    imports Alembic, so only when asked)."""
    from alallo.store._migrations import head_revision as newest

    return newest()


__all__ = ["LIVE_STATUSES", "NOTIFY_CHANNEL", "NULL_METADATA", "FileRow", "JobCheckpoints",
           "LeaseLost", "Store", "StoreUnavailable", "head_revision", "item_page", "read_item", "schema"]

__getattr__, __dir__ = lazy_names(__name__, _ORIGINS, __all__)
