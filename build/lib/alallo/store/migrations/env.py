"""Alembic's environment for the store's schema (see :mod:`alallo.store._migrations`).

The store hands over its open connection (``config.attributes["connection"]``)
so that a migration runs with the engine's own settings (SQLite's pragmas);
``alembic -x url=...`` from a checkout works too. On PostgreSQL the
migrations take a transaction-scoped advisory lock first, so that several
``alallo serve`` processes starting together upgrade the schema once.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from alallo.store._migrations import MIGRATION_LOCK_KEY
from alallo.store._schema import metadata

config = context.config


def _configure(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        compare_type=True,
        # SQLite cannot ALTER most things: later migrations copy the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"),
                               {"key": MIGRATION_LOCK_KEY})
        context.run_migrations()


def _run() -> None:
    if context.is_offline_mode():
        context.configure(url=config.get_main_option("sqlalchemy.url"),
                          target_metadata=metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url")
    if not url:
        raise RuntimeError("no database: pass -x url=<SQLAlchemy URL>")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            _configure(connection)
    finally:
        engine.dispose()


_run()
