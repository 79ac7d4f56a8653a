"""Request ids and the access log, as structlog events.

Every HTTP request and WebSocket gets a request id: the client's
``X-Request-ID`` when it is a plain token (up to 64 letters, digits, ``.``,
``_``, ``-``), else a new one. It is bound in structlog's context variables
(``structlog.contextvars``) for the request's task, so every log line written
while serving it carries ``request_id``, and ``job_id`` when the path names
a job; the answer carries it back as ``X-Request-ID``. When the answer has
started, one ``http.request`` line gives method, path, status and
``duration_ms`` (for a stream: until its headers went out; ``http.closed``
follows when it ends, with its duration). Query strings are left out: a
stream's may hold an ``access_token``.

A pure ASGI middleware (not Starlette's ``BaseHTTPMiddleware``, which
buffers streaming bodies in a task of its own); the shape is asgi-correlation-id's.
"""

from __future__ import annotations

import logging
import os
import re
import time

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["REQUEST_ID_HEADER", "RequestLog"]

REQUEST_ID_HEADER = "x-request-id"
_HEADER = REQUEST_ID_HEADER.encode()
_TOKEN = re.compile(r"[A-Za-z0-9._-]{1,64}")
_JOB_ID = re.compile(r"/jobs/(ft-[0-9a-f]{24})(?:/|$)")

log = structlog.get_logger("gateway.http")
_ABOVE_INFO = frozenset(structlog.make_filtering_bound_logger(level)
                        for level in (logging.WARNING, logging.ERROR, logging.CRITICAL))


def _logs_info() -> bool:
    # Whether an info line would be written: not when structlog is configured with a
    # filtering logger above INFO (the demo, the benchmarks). Asking ``log`` itself would
    # bind a logger per line (cache_logger_on_first_use is off), which costs more than the
    # rest of this middleware.
    return structlog.get_config()["wrapper_class"] not in _ABOVE_INFO


def _new_request_id() -> str:
    """A fresh request id: a random (version 4) UUID as 32 hex digits, as ``uuid.uuid4().hex``
    writes it, without building a ``UUID`` object (a third of this middleware's time)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4 (RFC 9562 §5.4)
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC's variant
    return raw.hex()


class RequestLog:
    """Give each request an id, bind it (and the job id) for its logs, and log it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = ""
        for name, value in scope["headers"]:
            if name == _HEADER:
                given = value.decode("latin-1")  # the last one, as a dict of them would keep
        request_id = given if given and _TOKEN.fullmatch(given) else _new_request_id()
        request_id_header = (_HEADER, request_id.encode())
        path: str = scope["path"]
        found = _JOB_ID.search(path) if "/jobs/" in path else None
        method = scope.get("method", "WEBSOCKET")
        started = time.perf_counter()
        streaming = False

        async def send_with_id(message: Message) -> None:
            nonlocal streaming
            if message["type"] in ("http.response.start", "websocket.accept"):
                message["headers"] = [*message.get("headers", ()), request_id_header]
                status = message.get("status", 101)
                streaming = True
                if _logs_info():
                    log.info("http.request", method=method, path=path, status=status,
                             duration_ms=round((time.perf_counter() - started) * 1000, 2))
            await send(message)

        # bind + reset: what structlog's bound_contextvars() does, less its look at every
        # context variable there is (a fifth of the middleware's time).
        bound = (structlog.contextvars.bind_contextvars(request_id=request_id, job_id=found[1])
                 if found else structlog.contextvars.bind_contextvars(request_id=request_id))
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if streaming and (method == "WEBSOCKET" or path.endswith("stream")):
                log.info("http.closed", method=method, path=path,
                         duration_ms=round((time.perf_counter() - started) * 1000, 2))
            structlog.contextvars.reset_contextvars(**bound)
