"""A query parameter is given once: ``?limit=5&limit=7`` answers 422 naming ``limit``.

Starlette's ``request.query_params.get`` returns the last of repeated values and drops the
others without a word; a request that says two things about one parameter is refused
instead (nothing is silently ignored), on every route, before the route runs. No parameter
of the API takes a list (``/openapi.json`` declares each as one value).

Checked ahead of the key (the same answer for anyone: it says nothing about an account),
by :class:`QueryOnce`, an ASGI middleware, since the routes read their parameters in many
places; a middleware of Starlette's would wrap every request in a task group for this.
"""

from __future__ import annotations

from collections import Counter
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from ._errors import error_response

__all__ = ["QueryOnce", "repeated_parameter"]


def repeated_parameter(query_string: bytes) -> tuple[str, int] | None:
    """The first parameter given more than once in ``query_string`` and how many times,
    or None."""
    if b"&" not in query_string:
        return None  # one parameter at most: the common case, nothing parsed
    counts = Counter(name for name, _ in parse_qsl(query_string.decode("latin-1"),
                                                    keep_blank_values=True))
    for name, count in counts.items():
        if count > 1:
            return name, count
    return None


class QueryOnce:
    """Answers 422 ``invalid_request`` (``param``: the parameter) to an HTTP request that
    repeats a query parameter; passes everything else to ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            repeated = repeated_parameter(scope.get("query_string", b""))
            if repeated is not None:
                name, count = repeated[0][:100], repeated[1]
                response = error_response(
                    400, "invalid_request",
                    f"{name} is given {count} times: give it once", name)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
