"""Who is asking: the account behind the request's API key."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from alallo import Runtime

__all__ = ["account_of", "runtime_of"]


def runtime_of(conn: HTTPConnection) -> Runtime:
    """The runtime the app was built with."""
    runtime: Runtime = conn.app.state.runtime
    return runtime


async def account_of(conn: HTTPConnection) -> str:
    """The account id of ``Authorization: Bearer <key>``.

    Browsers' ``EventSource`` and ``WebSocket`` cannot set headers, so the
    streams also accept the key as the ``access_token`` query parameter.

    Raises:
        Unauthorized: no key or an unknown one (401).
    """
    header = conn.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key:
        key = conn.query_params.get("access_token", "")
    return await runtime_of(conn).authenticate(key.strip() or None)
