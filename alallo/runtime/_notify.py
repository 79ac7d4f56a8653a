"""Changes made by other processes, heard through PostgreSQL LISTEN/NOTIFY.

Every job write on PostgreSQL sends ``pg_notify('alallo', ...)`` in its own
transaction (:meth:`alallo.store.Store.save_job`), so the notice is
delivered when, and only if, the change commits. Each process LISTENs on a
connection of its own and, for a notice from another process, wakes the
local subscribers of that job and of its account (:meth:`EventBus.nudge`):
they read what they missed from the store, so the items, their order and
their ids are exactly the owner's. A cancel, a pause or a resume asked through
another process arrives the same way (``c`` and ``p`` notices) for the job's owner.

The server is Trio and psycopg's notification generator blocks, so the
connection is used through psycopg's non-blocking libpq layer: wait until
its socket is readable (:func:`trio.lowlevel.wait_readable`), consume the
input, take the notices. A lost connection is opened again, and then every
local subscriber is woken (a notice may have been missed meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
import structlog
import trio

from ..store import NOTIFY_CHANNEL
from ._bus import EventBus

__all__ = ["RECONNECT_S", "listen"]

RECONNECT_S = 1.0
"""Seconds between attempts to open the listening connection again."""

log = structlog.get_logger("alallo.notify")


def libpq_url(url: str) -> str:
    """The store's SQLAlchemy URL as a libpq connection string (no driver suffix)."""
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def listen(url: str, node_id: str, bus: EventBus, *,
                 on_cancel: Callable[[str], None], on_connected: Callable[[], None],
                 on_pause: Callable[[str], None],
                 task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """LISTEN for other processes' changes forever (a background task).

    Args:
        url: the PostgreSQL database (SQLAlchemy URL).
        node_id: this node; its own notices are ignored (its bus already has them).
        bus: whose subscribers a change wakes.
        on_cancel: called with a job id when another node asks to cancel it.
        on_pause: called with a job id when another node asks to pause or resume it (the
            request is in the job's row: :meth:`alallo.cluster.Cluster.request_pause`).
        on_connected: called after each (re)connection, once LISTEN is in effect.

    ``task_status.started()`` is called once the first LISTEN is in effect.
    """
    import psycopg  # here: a server on SQLite never loads the driver (~0.1 s of its start)

    started = False
    while True:
        try:
            connection = await trio.to_thread.run_sync(
                lambda: psycopg.connect(libpq_url(url), autocommit=True))
        except psycopg.Error as exc:
            log.warning("notify.connect_failed", error=str(exc))
            await trio.sleep(RECONNECT_S)
            continue
        try:
            await trio.to_thread.run_sync(connection.execute, f"LISTEN {NOTIFY_CHANNEL}")
            bus.nudge_all()
            on_connected()
            if not started:
                started = True
                task_status.started()
            pgconn = connection.pgconn
            while True:
                await trio.lowlevel.wait_readable(pgconn.socket)
                pgconn.consume_input()
                while (notice := pgconn.notifies()) is not None:
                    _dispatch(notice.extra.decode(), node_id, bus, on_cancel, on_pause)
        except (psycopg.Error, OSError) as exc:
            log.warning("notify.connection_lost", error=str(exc))
        finally:
            connection.close()
        await trio.sleep(RECONNECT_S)


def _dispatch(payload: str, node_id: str, bus: EventBus,
              on_cancel: Callable[[str], None], on_pause: Callable[[str], None]) -> None:
    parts = payload.split(" ")
    if len(parts) != 4:
        return
    kind, origin, job_id, account_id = parts
    if kind == "c":
        on_cancel(job_id)
    elif kind == "p":
        on_pause(job_id)
    elif kind == "j" and origin != node_id:
        bus.nudge(job_id, account_id)
