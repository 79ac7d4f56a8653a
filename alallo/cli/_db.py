"""``alallo db upgrade``: bring the store's schema to this alallo's newest revision.

The SQLite default upgrades itself whenever a server starts; a PostgreSQL
database shared by several servers is upgraded once, by an operator, before
servers of the new version start (they would upgrade it too, under a lock,
but a failed migration is better seen at a prompt than in a server's log).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from alallo.cli._common import console, fail

__all__ = ["db_app", "upgrade"]

db_app = typer.Typer(rich_markup_mode=None, no_args_is_help=True, help="Manage the store's database schema.")

DatabaseUrlOption = Annotated[
    str | None,
    typer.Option("--database-url", help="SQLAlchemy URL of the store, e.g. "
                 "postgresql+psycopg://user@host/alallo (default: ALALLO_DATABASE_URL, "
                 "else the SQLite file in the data dir).", show_default=False),
]
DataDirOption = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Where alallo keeps its data, for the SQLite default "
                 "[default: ./.alallo].", show_default=False),
]


@db_app.command("upgrade")
def upgrade(database_url: DatabaseUrlOption = None, data_dir: DataDirOption = None) -> None:
    """Apply every migration the database lacks; safe to run again."""
    import sqlalchemy as sa

    from alallo import Settings
    from alallo.store import Store, StoreUnavailable, head_revision

    given: dict[str, Any] = {"database_url": database_url, "data_dir": data_dir}
    settings = Settings(**{k: v for k, v in given.items() if v is not None})
    url = settings.resolved_database_url
    if database_url is None and settings.database_url is None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        store = Store(url)
    except ValueError as exc:
        fail(str(exc))
    try:
        revision = store.open()
    except StoreUnavailable as exc:
        fail(exc.message)
    finally:
        store.close()
    shown = sa.make_url(url).render_as_string(hide_password=True)
    head = " (the newest)" if revision == head_revision() else ""
    console().print(f"The database {shown} is at revision {revision}{head}.", soft_wrap=True)

