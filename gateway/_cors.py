"""Starlette's CORS middleware, with a short way through for requests that name no origin.

Most requests come from programs (the SDKs, ``curl``, the command line), not
from pages on another origin: they carry no ``Origin`` header, and all
Starlette's :class:`~starlette.middleware.cors.CORSMiddleware` does for them is
add ``Vary: Origin`` to the answer (caches must not hand it to a page that
does send one). It does that through a ``Headers`` object of the request and
a ``MutableHeaders`` of the answer, which cost the API's hottest request
about as much as its own work of finding the job (docs/performance.md, "API
requests"). :class:`CORS` adds the same header by appending it, and leaves
every other case (an ``Origin``, a preflight, an answer that has a ``Vary``
already) to Starlette's code unchanged.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.types import Message, Receive, Scope, Send

__all__ = ["CORS"]

_ORIGIN = b"origin"
_VARY = b"vary"
_VARY_ORIGIN = (_VARY, b"Origin")


class CORS(CORSMiddleware):
    """:class:`~starlette.middleware.cors.CORSMiddleware` (same arguments, same answers),
    quicker for a request without ``Origin``."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or any(name == _ORIGIN for name, _ in scope["headers"]):
            await super().__call__(scope, receive, send)
            return

        async def send_vary(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers", ())
                if any(name == _VARY for name, _ in headers):
                    await self.send(message, send, Headers(scope=scope))
                    return
                message["headers"] = [*headers, _VARY_ORIGIN]
            await send(message)

        await self.app(scope, receive, send_vary)
