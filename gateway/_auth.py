"""Who is asking: the account behind the request's API key."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from alallo import Runtime

__all__ = ["SESSION_COOKIE", "account_of", "key_of", "runtime_of"]

SESSION_COOKIE = "alallo_session"
"""The dashboard's cookie, set by a one-time sign-in link (:mod:`gateway._signin`)."""


def runtime_of(conn: HTTPConnection) -> Runtime:
    """The runtime the app was built with."""
    runtime: Runtime = conn.app.state.runtime
    return runtime


def key_of(conn: HTTPConnection) -> str:
    """The API key a request carries, or ``""``.

    In order: ``Authorization: Bearer <key>``; the ``access_token`` query
    parameter (programs' ``EventSource`` and ``WebSocket`` cannot set
    headers); the dashboard's session cookie.
    """
    header = conn.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() == "bearer" and key.strip():
        return key.strip()
    return (conn.query_params.get("access_token") or conn.cookies.get(SESSION_COOKIE)
            or "").strip()


async def account_of(conn: HTTPConnection) -> str:
    """The account id of the request's API key (see :func:`key_of`).

    Raises:
        Unauthorized: no key or an unknown one (401).
    """
    return await runtime_of(conn).authenticate(key_of(conn) or None)
