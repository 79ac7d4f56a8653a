"""Limits on what a request or an account may hold: request bodies (413) and open streams (429).

Body sizes: past its limit, a request answers 413 and changes nothing.

Two limits: a training file upload (``POST /v1/files``) may be as large as
``Settings.max_upload_bytes`` (plus :data:`MULTIPART_OVERHEAD_BYTES` for the
form's envelope); every other body, JSON, at most :data:`MAX_JSON_BODY_BYTES`.

:class:`BodyLimit` is an ASGI middleware that counts what ``receive``
hands the app and raises :class:`RequestTooLarge` as soon as a request
declares (``Content-Length``) or sends (chunked) more than its limit. The
error is raised inside the endpoint, where it reads the body, so it becomes
an answer in the one error table (``gateway/_errors.py``) after the key was
checked (a request without one answers 401 first), and before anything was
stored: endpoints read their whole body before they act. Nothing is
buffered here, so a refused upload costs no memory; the rest of a refused
body is read and dropped (up to :data:`DRAIN_MAX_BYTES`), so that the client
gets to read the answer.

Neither Starlette nor Hypercorn has such a limit (Starlette's
``max_part_size`` bounds form fields, not files), and the one package for it
(``content-size-limit-asgi``, last released 2020) has one limit for every
route and its own error body; this is the small piece we need instead.

Open streams: :class:`StreamLimit` counts, per account, the streams open on this server
(``Settings.max_streams_per_account``; each SSE stream, each WebSocket and each of its
subscriptions) and refuses one more with :class:`TooManyStreams` (429). Each stream costs
the server memory and tasks for as long as it is open (a WebSocket that subscribed 20,000
times took a server from 93 to 541 MB: ``bench/bench_ws_subscriptions.py``), so what one
account holds is bounded; the count is this process's, as each server holds its own
streams. A counter in memory is all it takes: nothing is shared between requests but the
event loop, so a check and its increment cannot interleave.
"""

from __future__ import annotations

from collections.abc import Callable

import trio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from alallo import ApiError

from ._errors import RequestTooLarge

__all__ = ["DRAIN_MAX_BYTES", "DRAIN_TIMEOUT_S", "MAX_JSON_BODY_BYTES", "MULTIPART_OVERHEAD_BYTES",
           "BodyLimit", "StreamLimit", "TooManyStreams"]

MAX_JSON_BODY_BYTES = 1024 * 1024
"""Largest JSON body accepted (1 MiB); a job spec is a few hundred bytes."""
MULTIPART_OVERHEAD_BYTES = 64 * 1024
"""Room for a multipart upload's envelope (boundaries, part headers, ``purpose``) on
top of the file itself; the file alone is held to ``Settings.max_upload_bytes``."""
DRAIN_MAX_BYTES = 16 * 1024 * 1024
"""After refusing a body, read and drop up to this much more of it, so that the client
reads the 413 instead of a reset connection; past that the connection is just closed."""
DRAIN_TIMEOUT_S = 5.0
"""Longest time spent reading and dropping a refused body."""


class BodyLimit:
    """ASGI middleware: refuse HTTP request bodies over ``limit_for(scope)`` bytes.

    Args:
        app: The app to guard.
        limit_for: The largest body (bytes) a request may send, from its scope.
    """

    def __init__(self, app: ASGIApp, *, limit_for: Callable[[Scope], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope)
        declared = _content_length(scope)
        received = 0

        async def limited() -> Message:
            nonlocal received
            if declared is not None and declared > limit:
                await _drain(receive, more_body=True)
                raise _too_large(declared, limit)
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    await _drain(receive, more_body=message.get("more_body", False))
                    raise _too_large(received, limit, sent=True)
            return message

        await self.app(scope, limited, send)


async def _drain(receive: Receive, *, more_body: bool) -> None:
    # Read and drop what the client is still sending, so that it gets to read
    # the 413: a server that closes with unread data makes the kernel reset
    # the connection, and the client may lose the answer (RFC 9112 §9.6 asks
    # for this "lingering close"). Bounded, so a huge upload costs little.
    drained = 0
    with trio.move_on_after(DRAIN_TIMEOUT_S):
        while more_body and drained <= DRAIN_MAX_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                return
            drained += len(message.get("body", b""))
            more_body = message.get("more_body", False)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # Hypercorn refuses such a request before it gets here
    return None


def _too_large(size: int, limit: int, *, sent: bool = False) -> RequestTooLarge:
    amount = f"more than {limit} bytes" if sent else f"{size} bytes"
    return RequestTooLarge(f"the request body is {amount}; the limit is {limit} bytes")



class TooManyStreams(ApiError):
    """429 ``too_many_streams``: the account has as many streams open on this server as it
    may, or a WebSocket follows as many subscriptions as it may. Closing one makes room.

    Args:
        message: What was refused and the limit.
        param: The request's part that asked for it (``subscribe`` on a WebSocket).
    """

    status_code = 429
    code = "too_many_streams"

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(self.status_code, self.code, message, param)


class StreamLimit:
    """Streams open per account on this server, at most ``limit`` each.

    Args:
        limit: Streams one account may hold (``Settings.max_streams_per_account``).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[str, int] = {}

    def open(self, account_id: str, count: int = 1) -> None:
        """Count ``count`` more streams of the account, all or none; :meth:`close` them.

        Raises:
            TooManyStreams: the account would hold more than ``limit``.
        """
        held = self._open.get(account_id, 0)
        if held + count > self.limit:
            raise TooManyStreams(
                f"this account has {held} streams open on this server, the limit is "
                f"{self.limit} (ALALLO_MAX_STREAMS_PER_ACCOUNT): close one, or follow every "
                "job with one stream (GET /v1/fine_tuning/stream, or \"*\" on a WebSocket)")
        self._open[account_id] = held + count

    def close(self, account_id: str, count: int = 1) -> None:
        """Count ``count`` of the account's streams as closed."""
        held = self._open.get(account_id, 0) - count
        if held > 0:
            self._open[account_id] = held
        else:
            self._open.pop(account_id, None)

    def held(self, account_id: str) -> int:
        """Streams the account holds now."""
        return self._open.get(account_id, 0)
