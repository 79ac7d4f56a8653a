"""``GET /v1/fine_tuning/jobs/{id}/stream``: a job's updates as Server-Sent Events.

Each SSE event is one item: ``event: job|event|log``, ``id: <seq>`` (the
job's sequence number) and ``data: <JSON>``. A client resumes with the
``Last-Event-ID`` header (browsers send it on reconnect) or, for the first
connection, the ``lastEventID`` (Mercure's name) or ``after`` query
parameter; it then gets exactly what it missed. The answer carries a
``Last-Event-ID`` response header with the id it resumed from, so a client
can check it. Keep-alive comments go out every 15 s so that proxies keep
idle streams open (WHATWG HTML §9.2.7). The stream ends after the job's
final status; a job that does not exist answers 404, which makes browsers
stop reconnecting.

Slow readers: the trio worker of Hypercorn blocks a send to a client that
stopped reading (research/sse-and-streaming.md §0.2); the bus gives each
stream a bounded buffer, so such a client only ever holds up itself.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request

from alallo import InvalidRequest

from ._auth import account_of, runtime_of

__all__ = ["KEEPALIVE_S", "job_stream"]

KEEPALIVE_S = 15
"""Seconds between keep-alive comments on an idle stream."""
RETRY_MS = 2000
"""How long browsers wait before reconnecting (the SSE ``retry`` field)."""


def _resume_point(request: Request) -> int:
    for raw, name in (
        (request.headers.get("last-event-id"), "Last-Event-ID"),
        (request.query_params.get("lastEventID"), "lastEventID"),
        (request.query_params.get("after"), "after"),
    ):
        if raw is not None and raw.strip() != "":
            try:
                value = int(raw)
            except ValueError as exc:
                raise InvalidRequest(f"{name} must be a sequence number, got {raw!r}",
                                     param=name) from exc
            if value < 0:
                raise InvalidRequest(f"{name} must be >= 0, got {value}", param=name)
            return value
    return 0


async def job_stream(request: Request) -> EventSourceResponse:
    """Stream one job's ``job``, ``event`` and ``log`` items until it ends."""
    account = await account_of(request)
    job_id = request.path_params["job_id"]
    after = _resume_point(request)
    runtime = runtime_of(request)
    await runtime.get_job(account, job_id)

    async def frames() -> AsyncIterator[ServerSentEvent]:
        first = True
        async for item in runtime.stream(account, job_id, after=after):
            yield ServerSentEvent(
                data=json.dumps(item.data, separators=(",", ":")),
                event=item.kind, id=str(item.seq), retry=RETRY_MS if first else None,
            )
            first = False

    return EventSourceResponse(
        frames(), ping=KEEPALIVE_S,
        headers={"Last-Event-ID": str(after), "Cache-Control": "no-store"},
    )
