"""Hypercorn's trio worker loop, keeping hold of its connections so that shutdown has a deadline.

Hypercorn's own loop (``hypercorn.trio.run.worker_serve``) cancels the
connections still open ``graceful_timeout`` after the shutdown trigger. That
does not end a connection whose client stopped reading: Hypercorn shields
every socket send (``hypercorn/trio/tcp_server.py::protocol_send``), so the
stream's task waits in ``send_all`` until the kernel gives up on the client
(``TCP_USER_TIMEOUT``, 10 s), and the process with it
(research/sse-and-streaming.md §0.2, §3.4). Hypercorn has no setting or hook
for this, and its loop keeps the accepted sockets to itself; so this module
runs the same loop around Hypercorn's own ``TCPServer`` (which still speaks
HTTP/1.1 and WebSocket), with each connection's stream in a set. When the
deadline passes it shuts down the sockets of the connections still open: a
waiting send then fails (``EPIPE``), Hypercorn takes the connection for
closed, and its tasks end.

Left out of Hypercorn's loop: the ASGI lifespan (the app has no startup or
shutdown handlers: the caller opens and closes the :class:`alallo.Runtime`
around :func:`serve_connections`), TLS, QUIC and ``max_requests``.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable

import trio
from hypercorn.config import Config
from hypercorn.trio.statsd import StatsdLogger
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ASGIFramework, ConnectionState
from hypercorn.utils import repr_socket_addr, wrap_app

from ._chunks import CONNECTION_KEY

__all__ = ["serve_connections"]


async def serve_connections(
    app: ASGIFramework,
    config: Config,
    listener: socket.socket,
    *,
    shutdown_trigger: Callable[[], Awaitable[None]],
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on the listening ``listener`` until ``shutdown_trigger`` returns, then stop.

    ``task_status.started`` gets the bound URL (``["http://host:port"]``). When the
    trigger returns: no new connection is accepted (the listener is closed), idle
    keep-alive connections close, and the requests and streams still open get
    ``config.graceful_timeout`` seconds; then they are cancelled, and the sockets of
    those that are still open (a client that stopped reading) are shut down. So this
    returns at most about ``config.graceful_timeout`` seconds after the trigger. The
    trigger should make the app's long streams end by themselves first (see
    ``app.state.stopping`` in :func:`gateway.build_app`).
    """
    config.set_statsd_logger_class(StatsdLogger)
    wrapped = wrap_app(app, config.wsgi_max_body_size, "asgi")
    context = WorkerContext(None)
    sock = trio.socket.from_stdlib_socket(listener)
    bind = f"http://{repr_socket_addr(listener.family, listener.getsockname())}"
    streams: set[trio.SocketStream] = set()

    async def handle(stream: trio.SocketStream) -> None:
        streams.add(stream)
        try:
            state = ConnectionState({})
            server = TCPServer(wrapped, config, context, state, stream)  # type: ignore[arg-type]
            state[CONNECTION_KEY] = server  # streamed bodies write to it (gateway/_chunks.py)
            try:
                await server
            finally:
                del state[CONNECTION_KEY]  # no cycle for the garbage collector to find
        finally:
            streams.discard(stream)

    async with trio.open_nursery() as watchers:
        async with trio.open_nursery() as connections:
            async with trio.open_nursery() as accepting:
                accepting.start_soon(lambda: trio.serve_listeners(
                    handle, [trio.SocketListener(sock)], handler_nursery=connections))
                await config.log.info(f"Running on {bind}")
                task_status.started([bind])
                await shutdown_trigger()
                accepting.cancel_scope.cancel()
            sock.close()
            await context.terminated.set()  # idle keep-alive connections close now
            deadline = trio.current_time() + config.graceful_timeout
            connections.cancel_scope.deadline = deadline
            watchers.start_soon(_shut_down_at, deadline, streams)
        watchers.cancel_scope.cancel()  # every connection ended: nothing left to shut down


async def _shut_down_at(deadline: float, streams: set[trio.SocketStream]) -> None:
    await trio.sleep_until(deadline)
    for stream in list(streams):
        try:
            stream.socket.shutdown(socket.SHUT_RDWR)
        except OSError:  # already closed by the client or by the kernel
            pass
