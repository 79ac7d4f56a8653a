"""Serving the app with Hypercorn's trio worker, in the runtime's Trio run.

We open the listening socket ourselves, for one option Hypercorn has no
setting for: ``TCP_USER_TIMEOUT``. Hypercorn's trio worker shields every
socket send, so a client that stops reading blocks its stream's task
(research/sse-and-streaming.md §0.2, §3.4). With the option (inherited by
every accepted connection) the kernel aborts a connection whose data stays
unacknowledged, or unsent for a zero window, for
:data:`STALLED_CLIENT_TIMEOUT_S`; the blocked send then fails and the task
ends. While serving, a stalled client therefore costs at most that long.

Shutdown does not wait that long: the accept loop of
:mod:`gateway._connections` keeps the connections, and shuts down the
sockets of those still open ``graceful_timeout_s`` after the trigger. Open
streams say goodbye at once (``event: shutdown``, a WebSocket ``shutdown``
frame then close 1001), so :func:`serve` returns about
``graceful_timeout_s`` after the trigger at most, stalled clients or not.

Garbage collection: a server process gets :data:`GC_THRESHOLDS`. With
thousands of open streams the process holds millions of objects (each
connection's Hypercorn, h11 and Starlette objects, its tasks), and with
CPython's default thresholds (700, 10, 10) an event fanned out to 10,000
subscribers ran about 140 young collections; each promoted what was in
flight at that moment, so the oldest generation soon grew by the 25 % that
triggers a full collection, which walks every open stream. Measured under
``bench/bench_sse.py`` at 10,000 subscribers: 2 full collections in a 10 s
run took 16.6 s of wall-clock time (the server had a third of a core; it
delivered 4,000 of 10,000 events a second, p99 6.0 s); with these
thresholds, 1 young collection and nothing else (10,000 of 10,000 a second). Objects are still freed by reference
counting at once; only cyclic garbage waits longer (up to 50,000 allocations).
"""

from __future__ import annotations

import gc
import signal
import socket
from collections.abc import Awaitable, Callable

import trio
from hypercorn.config import Config

from alallo import Runtime

from ._connections import serve_connections
from ._limits import MAX_JSON_BODY_BYTES
from ._signin import SignIn
from .app import build_app

__all__ = ["GC_THRESHOLDS", "GRACEFUL_TIMEOUT_S", "LISTEN_BACKLOG", "STALLED_CLIENT_TIMEOUT_S", "serve"]

GC_THRESHOLDS = (50_000, 20, 10)
"""``gc.set_threshold`` of a server process (see the module's docstring)."""
GRACEFUL_TIMEOUT_S = 2.0
"""Seconds open requests and streams get to finish when the server stops."""
STALLED_CLIENT_TIMEOUT_S = 10.0
"""Seconds a client may leave sent data unread before its connection is dropped
(the same order as NATS's 10 s ``write_deadline`` for slow consumers)."""
LISTEN_BACKLOG = 1024
"""Connections the kernel queues before the server accepts them."""


async def serve(
    runtime: Runtime,
    *,
    host: str,
    port: int,
    shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
    graceful_timeout_s: float = GRACEFUL_TIMEOUT_S,
    stalled_client_timeout_s: float = STALLED_CLIENT_TIMEOUT_S,
    sign_in: SignIn | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``runtime`` over HTTP until ``shutdown_trigger`` returns (or SIGINT/SIGTERM).

    ``task_status.started`` gets the bound URLs, so ``await nursery.start(serve, ...)``
    returns once the server accepts connections (with the real port when ``port`` is 0).
    When the trigger returns, open streams say goodbye (``event: shutdown``)
    and end; requests get ``graceful_timeout_s`` to finish, and a connection
    still open then (a client that stopped reading) is cut
    (:func:`gateway._connections.serve_connections`). ``sign_in`` makes
    the dashboard's one-time links (:meth:`SignIn.new_link`) known to the app.

    Raises:
        OSError: the address cannot be bound (e.g. ``EADDRINUSE``).
        ValueError: a timeout that is not positive.
    """
    if graceful_timeout_s <= 0 or stalled_client_timeout_s <= 0:
        raise ValueError("graceful_timeout_s and stalled_client_timeout_s must be > 0")
    app = build_app(runtime, sign_in=sign_in)
    stopping: trio.Event = app.state.stopping

    async def trigger() -> None:
        if shutdown_trigger is None:
            await _until_signal()
        else:
            await shutdown_trigger()
        stopping.set()

    gc.set_threshold(*GC_THRESHOLDS)
    listener = _listen(host, port, stalled_client_timeout_s)
    config = Config()
    config.graceful_timeout = graceful_timeout_s
    config.backlog = LISTEN_BACKLOG
    config.websocket_max_message_size = MAX_JSON_BODY_BYTES  # subscriptions are small
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"
    await serve_connections(app, config, listener,  # type: ignore[arg-type]
                            shutdown_trigger=trigger, task_status=task_status)


def _listen(host: str, port: int, stalled_client_timeout_s: float) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Hypercorn's own binds
        if hasattr(socket, "TCP_USER_TIMEOUT"):  # Linux only; elsewhere stalls last longer
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT,
                            int(stalled_client_timeout_s * 1000))
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


async def _until_signal() -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            return
