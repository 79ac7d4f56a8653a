"""Running the store's schema history: the Alembic migrations in ``alallo/store/migrations/``.

:func:`upgrade` brings a database to the newest schema (``head``); the store
calls it when it opens, and ``alallo db upgrade`` calls it for an operator
who upgrades a shared PostgreSQL database before starting new servers. A
migration lives in ``versions/`` and is written for both SQLite and
PostgreSQL (``render_as_batch`` lets Alembic rebuild SQLite tables that
cannot be altered in place). Write a new one with Alembic's autogenerate
against PostgreSQL: on SQLite it also reports the identity of ``jobs.number``,
which SQLite has no way to hold (the store numbers jobs itself there).

A database made before migrations existed (by ``metadata.create_all``) has
every table of the first revision and no ``alembic_version``: it is stamped
at that revision, then upgraded like any other.
"""

from __future__ import annotations

import threading

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

__all__ = ["INITIAL_REVISION", "MIGRATION_LOCK_KEY", "config", "current_revision",
           "head_revision", "upgrade"]

INITIAL_REVISION = "0001"
"""The first revision: the schema as it was before migrations."""
MIGRATION_LOCK_KEY = 0x616C616C6C6F
"""PostgreSQL advisory lock held while migrating ("alallo" in ASCII)."""
_ALEMBIC = threading.Lock()
"""Alembic's ``context`` is one global per process: one migration runs at a time."""


def config(connection: sa.Connection | None = None) -> Config:
    """Alembic's configuration for these migrations, bound to an open connection."""
    cfg = Config()
    cfg.set_main_option("script_location", "alallo.store:migrations")
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """The newest revision this alallo knows."""
    head = ScriptDirectory.from_config(config()).get_current_head()
    if head is None:
        raise RuntimeError("alallo ships no migrations")
    return head


def current_revision(connection: sa.Connection) -> str | None:
    """The revision the database is at, or None for an empty one."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(connection: sa.Connection) -> str:
    """Bring the database to ``head`` in the connection's transaction; return the revision.

    Raises:
        alembic.util.CommandError: the database is at a revision this alallo
            does not know (a newer alallo migrated it).
    """
    cfg = config(connection)
    with _ALEMBIC:
        tables = set(sa.inspect(connection).get_table_names())
        if "alembic_version" not in tables and "jobs" in tables:
            command.stamp(cfg, INITIAL_REVISION)
        command.upgrade(cfg, "head")
        return current_revision(connection) or ""
