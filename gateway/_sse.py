"""Server-Sent Events: one job's updates, and every job of an account.

``GET /v1/fine_tuning/jobs/{id}/stream``: each SSE event is one item,
``event: job|event|log``, ``id: <seq>`` (the job's sequence number) and
``data: <JSON>``. After the job's final state it sends ``event: done`` and
ends the body. A browser then reconnects with ``Last-Event-ID``; a job that
is final and already sent up to that id answers **204**, which by the spec
(WHATWG HTML §9.2.3) makes ``EventSource`` stop for good. A job that does
not exist answers 404, with the same effect.

``GET /v1/fine_tuning/stream``: ``event: job`` for every job of the account.
Its ``id`` is the job's position in the account's *feed*: a counter of the
account that moves a job to the end each time its state changes (see
:meth:`alallo.Runtime.stream_jobs`). Resuming with ``Last-Event-ID`` gives
every job that changed since, once, in its latest state; without one the
stream starts with every job of the account. It never ends by itself.

Both resume from the ``Last-Event-ID`` header (browsers send it on
reconnect) or, for the first connection, the ``lastEventID`` (Mercure's
name) or ``after`` query parameter, the header winning. The answer carries
a ``Last-Event-ID`` response header with the point it resumed from. A resume point
must lie in ``[0, 2**62)`` (:data:`MAX_RESUME_POINT`; 422 otherwise), as on the WebSocket.
Keep-alive comments go out every 15 s so that proxies keep idle streams
open; ``X-Accel-Buffering: no`` tells nginx not to buffer them.

The response is :class:`gateway._event_stream.EventStreamResponse` (keep-alive
comments, the goodbye on shutdown, the end when the client leaves); its
docstring says why it is not sse-starlette's. On shutdown each stream sends
``event: shutdown`` with ``retry:`` and ends well within the graceful timeout.

Slow readers: Hypercorn's trio worker blocks a send to a client that stopped
reading, and no cancellation reaches it (research/sse-and-streaming.md §0.2).
Such a stream only ever holds up itself: the bus gives each subscriber a
bounded buffer and never waits for one; the stream's task waits alone; and
the kernel drops the connection once its data stays unsent for
:data:`gateway.server.STALLED_CLIENT_TIMEOUT_S` (``TCP_USER_TIMEOUT``); on
shutdown, :mod:`gateway._connections` cuts it at the graceful deadline.

Each stream is one of the account's open streams while it is open
(``Settings.max_streams_per_account``, :func:`gateway._metrics.open_stream`): one more
answers 429 ``too_many_streams`` before anything is sent. A browser's ``EventSource``
takes that answer as final and does not reconnect by itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from alallo import InvalidRequest
from alallo.runtime import Item

from ._auth import account_of, runtime_of
from ._event_stream import KEEPALIVE_S, RETRY_MS, EventStreamResponse
from ._metrics import open_stream

__all__ = ["KEEPALIVE_S", "MAX_RESUME_POINT", "RETRY_MS", "account_stream", "job_stream",
           "resume_point"]

_SEQUENCE_NUMBER = re.compile(r"-?[0-9]+")
_EVENT_ID = re.compile(r"0|[1-9][0-9]*")
"""``Last-Event-ID`` echoes an ``id:`` the server sent: written as the server writes it."""
MAX_RESUME_POINT = 2**62
"""Resume points (``Last-Event-ID``, ``after``) lie below this: far past any sequence number,
and well inside the 64-bit integers the store compares them with."""


def resume_point(request: Request) -> int:
    """Where a stream resumes: ``Last-Event-ID``, else ``lastEventID`` or ``after``; 0 if none.

    Each one given is checked, so that none is ignored unread. An empty value counts as none
    (``?after=``; an ``EventSource`` that saw no id sends no header). Otherwise a query's
    value is ASCII digits (``int()`` would also take ``" 7"``, ``"+7"``, ``"1_0"``), and the
    header's a decimal as the server writes ids (no sign, no leading zero), as
    ``/openapi.json`` says.

    Raises:
        InvalidRequest: not a non-negative integer below :data:`MAX_RESUME_POINT` (422,
            ``param`` names the source).
    """
    given = [_sequence_number(raw, name) for raw, name in (
        (request.headers.get("last-event-id"), "Last-Event-ID"),
        (request.query_params.get("lastEventID"), "lastEventID"),
        (request.query_params.get("after"), "after"),
    ) if raw is not None and raw != ""]  # each is checked, the first wins
    return given[0] if given else 0


def _sequence_number(raw: str, name: str) -> int:
    form = _EVENT_ID if name == "Last-Event-ID" else _SEQUENCE_NUMBER
    if form.fullmatch(raw) is None or len(raw) > 40:
        raise InvalidRequest(f"{name} must be a sequence number, got {raw[:40]!r}", param=name)
    value = int(raw)
    if not 0 <= value < MAX_RESUME_POINT:
        raise InvalidRequest(f"{name} must be between 0 and 2**62, got {value}", param=name)
    return value


def _frame(kind: str, data: Any) -> bytes:
    return f"event: {kind}\r\ndata: {json.dumps(data, separators=(',', ':'))}\r\n\r\n".encode()


def sse_frame(item: Item) -> bytes:
    """The item as one Server-Sent Events frame: ``id`` (its ``seq``), ``event`` (its kind),
    ``data`` (its JSON), CRLF line ends as sse-starlette writes them."""
    return f"id: {item.seq}\r\nevent: {item.kind}\r\ndata: {item.json()}\r\n\r\n".encode()


def _chunk(items: list[Item], *, first: bool) -> bytes:
    """Items as one chunk of SSE frames; each frame is encoded once per item
    (:func:`sse_frame`, kept by :meth:`Item.encoded`), whatever the number of subscribers.
    The stream's first frame also carries ``retry:``."""
    if len(items) == 1 and not first:
        return items[0].encoded("sse", sse_frame)  # the common case: nothing allocated
    frames = [item.encoded("sse", sse_frame) for item in items]
    if first:
        frames[0] = frames[0][:-2] + _RETRY_FIELD
    return b"".join(frames)


_RETRY_FIELD = f"retry: {RETRY_MS}\r\n\r\n".encode()


async def job_stream(request: Request) -> Response:
    """Stream one job's ``job``, ``event`` and ``log`` items, then ``done``."""
    account = await account_of(request)
    job_id = request.path_params["job_id"]
    after = resume_point(request)
    runtime = runtime_of(request)
    job = await runtime.get_job(account, job_id)
    if job.status.is_final and after >= job.state_seq:
        # Everything was sent: 204 makes a reconnecting browser stop for good.
        return Response(status_code=204, headers={"Last-Event-ID": str(after)})

    async def chunks() -> AsyncGenerator[bytes, None]:
        last: Mapping[str, Any] = {}
        first = True
        async for batch in runtime.stream_batches(account, job_id, after=after):
            yield _chunk(batch, first=first)
            first = False
            for item in batch:
                if item.kind == "job":
                    last = item.data
        yield _frame("done", {"id": job_id, "status": last.get("status"),
                                    "seq": last.get("seq")})

    return event_stream(request, chunks, after=after, kind="job", account_id=account)


async def account_stream(request: Request) -> Response:
    """Stream a ``job`` item for every job of the account, on every change."""
    account = await account_of(request)
    after = resume_point(request)
    runtime = runtime_of(request)

    async def chunks() -> AsyncGenerator[bytes, None]:
        first = True
        async for item in runtime.stream_jobs(account, after=after):
            yield _chunk([item], first=first)
            first = False

    return event_stream(request, chunks, after=after, kind="account", account_id=account)


def event_stream(request: Request, source: Callable[[], AsyncGenerator[bytes, None]],
                 *, after: int, kind: str, account_id: str) -> EventStreamResponse:
    """An SSE response of ``source()`` (chunks of encoded frames) that ends early, with
    ``event: shutdown``, when the app stops (``app.state.stopping``); while it is open, one
    of the account's streams, counted in the ``alallo_open_streams`` gauge under ``kind``.

    The response answers 429 (:class:`gateway._limits.TooManyStreams`) instead when the
    account holds as many streams as it may."""
    return EventStreamResponse(source, stopping=request.app.state.stopping,
                               headers={"Last-Event-ID": str(after)},
                               while_open=lambda: open_stream(request.app, kind, account_id))
