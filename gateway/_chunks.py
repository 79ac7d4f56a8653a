"""Write a streamed HTTP/1.1 response body straight to its connection's socket.

Through ASGI, each chunk of a streamed body goes through the middlewares,
Hypercorn's stream and protocol objects, h11's state machine and chunked
writer, Hypercorn's per-connection lock and a shielded cancel scope, and
trio's ``send_all``, which yields to the scheduler twice (the lock and the
socket); ``bench/bench_sse.py`` measured that path at half of the server's
CPU per event and subscriber, and it is paid once per subscriber for every
event. A :class:`ChunkWriter` frames the chunk itself (``<size in hex>CRLF
<data> CRLF``, RFC 9112 §7.1) and hands it to the socket in one non-blocking
``write``: a few microseconds and no task switch when the socket has room,
which is nearly always; when it has not (a slow reader), the rest waits for
the socket under Hypercorn's own send lock, shielded, so that a cancelled
stream never leaves half a chunk on the wire.

It is offered only where it is right: on HTTP/1.1 (the response is chunked;
HTTP/1.0 bodies end with the connection, HTTP/2 has frames of its own)
served by :func:`gateway._connections.serve_connections`, which puts each
connection's Hypercorn ``TCPServer`` in the connection's ASGI state under
:data:`CONNECTION_KEY`. The response start and its end (the last, empty chunk)
still go through ASGI, so Hypercorn and h11 see a whole response; while the
body streams nothing else writes on that connection (h11 does not start the
next request's answer before this one ended).
"""

from __future__ import annotations

import os
from typing import Any

import trio
from starlette.types import Scope

__all__ = ["CONNECTION_KEY", "ChunkWriter"]

CONNECTION_KEY = "gateway.connection"
"""Where a connection's Hypercorn ``TCPServer`` sits in the ASGI scope's ``state``."""


class ChunkWriter:
    """Writes chunks of a streamed HTTP/1.1 body to the connection's socket (see the module).

    Args:
        stream: the connection's socket stream.
        lock: the lock Hypercorn holds while it writes to that stream.
    """

    def __init__(self, stream: trio.SocketStream, lock: trio.Lock) -> None:
        self._stream = stream
        self._lock = lock

    @classmethod
    def of(cls, scope: Scope) -> ChunkWriter | None:
        """The writer for the response to this request, or None where only ASGI ``send``
        may write (not HTTP/1.1, or not served by :func:`gateway.serve`)."""
        if scope.get("http_version") != "1.1":
            return None
        server: Any = (scope.get("state") or {}).get(CONNECTION_KEY)
        stream, lock = getattr(server, "stream", None), getattr(server, "send_lock", None)
        if not isinstance(stream, trio.SocketStream) or not isinstance(lock, trio.Lock):
            return None  # not Hypercorn's trio TCPServer as 0.18 has it: ASGI send
        return cls(stream, lock)

    async def write(self, data: bytes) -> None:
        """Write ``data`` as one chunk (nothing for empty ``data``: that chunk ends a body).

        Raises:
            trio.BrokenResourceError: the connection is closed or broken (the client left).
        """
        if not data:
            return
        chunk = (b"%x\r\n" % len(data)) + data + b"\r\n"
        if not self._lock.locked():
            # No await between this check and the write: no other task writes meanwhile,
            # and the descriptor is this connection's (-1 once Hypercorn closed it; never
            # another connection's that reused the number).
            fd = self._stream.socket.fileno()
            if fd < 0:
                raise trio.BrokenResourceError("the connection is closed")
            try:
                sent = os.write(fd, chunk)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                raise trio.BrokenResourceError(f"the connection broke: {exc}") from exc
            if sent == len(chunk):
                return
            chunk = chunk[sent:]
        async with self._lock:
            with trio.CancelScope(shield=True):
                try:
                    await self._stream.send_all(chunk)
                except trio.ClosedResourceError as exc:
                    raise trio.BrokenResourceError("the connection is closed") from exc
