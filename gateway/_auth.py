"""Who is asking: the account behind the request's API key or dashboard session."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from alallo import Runtime
from alallo._keys import hash_key

from ._sessions import SESSION_COOKIE, Sessions

__all__ = ["SESSION_COOKIE", "account_of", "caller_of", "key_of", "runtime_of", "sessions_of"]


def runtime_of(conn: HTTPConnection) -> Runtime:
    """The runtime the app was built with."""
    runtime: Runtime = conn.app.state.runtime
    return runtime


def sessions_of(conn: HTTPConnection) -> Sessions:
    """The app's dashboard sessions (:mod:`gateway._sessions`)."""
    sessions: Sessions = conn.app.state.sessions
    return sessions


def key_of(conn: HTTPConnection) -> str:
    """The API key a request carries, or ``""``.

    In order: ``Authorization: Bearer <key>``; the ``access_token`` query
    parameter (programs' ``EventSource`` and ``WebSocket`` cannot set
    headers). The dashboard's cookie holds no key (see :func:`caller_of`).
    """
    header = conn.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() == "bearer" and key.strip():
        return key.strip()
    return (conn.query_params.get("access_token") or "").strip()


async def caller_of(conn: HTTPConnection) -> tuple[str, str]:
    """``(key_hash, account_id)`` of the request: its API key (:func:`key_of`), else
    the session its dashboard cookie names.

    Raises:
        Unauthorized: no key and no cookie, an unknown or revoked key, a cookie
            that is not valid, or a session that has ended (401).
    """
    key = key_of(conn)
    if key:  # the cookie is not even parsed: a key wins
        return hash_key(key), await runtime_of(conn).authenticate(key)
    cookie = conn.cookies.get(SESSION_COOKIE)
    if not cookie:
        return "", await runtime_of(conn).authenticate(None)
    return await sessions_of(conn).key_of(cookie)


async def account_of(conn: HTTPConnection) -> str:
    """The account id of the request (see :func:`caller_of`).

    Raises:
        Unauthorized: as :func:`caller_of` (401).
    """
    key = key_of(conn)
    if key:  # the key's hash is not needed: the runtime's cache answers by the key
        return await runtime_of(conn).authenticate(key)
    return (await caller_of(conn))[1]
