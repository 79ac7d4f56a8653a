"""Size limits on request bodies: past its limit, a request answers 413 and changes nothing.

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
buffered here, so a refused upload costs no memory.

Neither Starlette nor Hypercorn has such a limit (Starlette's
``max_part_size`` bounds form fields, not files), and the one package for it
(``content-size-limit-asgi``, last released 2020) has one limit for every
route and its own error body; this is the small piece we need instead.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._errors import RequestTooLarge

__all__ = ["MAX_JSON_BODY_BYTES", "MULTIPART_OVERHEAD_BYTES", "BodyLimit"]

MAX_JSON_BODY_BYTES = 1024 * 1024
"""Largest JSON body accepted (1 MiB); a job spec is a few hundred bytes."""
MULTIPART_OVERHEAD_BYTES = 64 * 1024
"""Room for a multipart upload's envelope (boundaries, part headers, ``purpose``) on
top of the file itself; the file alone is held to ``Settings.max_upload_bytes``."""


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
                raise _too_large(declared, limit)
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _too_large(received, limit, sent=True)
            return message

        await self.app(scope, limited, send)


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
