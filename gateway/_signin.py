"""Signing in to the dashboard: a one-time link sets a session cookie.

``alallo serve`` prints ``http://…/signin/<token>``; opening it once sets the
cookie :data:`SESSION_COOKIE` and redirects to the Jobs tab. The link works
once and for :data:`LINK_TTL_S`, so a link seen in a terminal's scrollback
or a browser's history is worth nothing. A program with a key gets a new
link from ``POST /v1/dashboard/links`` (``alallo dashboard`` prints one).

The cookie holds the account's API key, ``HttpOnly`` (page scripts cannot
read it) and ``SameSite=Strict`` (other sites cannot send it, which is what
keeps cookie-authenticated ``POST``s safe from cross-site forgery). Keeping
the key rather than a server-side session means a restarted server still
knows the browser: the dashboard catches up by itself (JOURNEYS.md, "Bad day").
"""

from __future__ import annotations

import secrets
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from alallo import Unauthorized

from ._auth import SESSION_COOKIE, account_of, key_of

__all__ = ["LINK_TTL_S", "SESSION_COOKIE", "SignIn", "create_link", "sign_in"]

LINK_TTL_S = 600.0
"""Seconds a sign-in link stays valid (it also stops working once used)."""
SESSION_MAX_AGE_S = 30 * 24 * 3600
"""How long the browser keeps the session cookie."""


class SignIn:
    """The one-time sign-in links a server has handed out and not yet seen used."""

    def __init__(self) -> None:
        self._links: dict[str, tuple[str, float]] = {}

    def new_link(self, api_key: str, *, now: float | None = None) -> str:
        """A fresh path ``/signin/<token>`` that signs its first visitor in with ``api_key``."""
        now = time.time() if now is None else now
        self._links = {t: v for t, v in self._links.items() if v[1] > now}
        token = secrets.token_urlsafe(24)
        self._links[token] = (api_key, now + LINK_TTL_S)
        return f"/signin/{token}"

    def redeem(self, token: str, *, now: float | None = None) -> str | None:
        """The key a link stands for, once; None for a used, expired or unknown link."""
        now = time.time() if now is None else now
        key, expires = self._links.pop(token, ("", 0.0))
        return key if expires > now else None


async def sign_in(request: Request) -> Response:
    """``GET /signin/{token}``: set the session cookie and go to the Jobs tab."""
    key = request.app.state.sign_in.redeem(request.path_params["token"])
    if key is None:
        raise Unauthorized("this sign-in link was used already or has expired: "
                           "run `alallo dashboard` for a new one")
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(SESSION_COOKIE, key, max_age=SESSION_MAX_AGE_S, httponly=True,
                        samesite="strict", path="/")
    return response


async def create_link(request: Request) -> JSONResponse:
    """``POST /v1/dashboard/links`` → ``{"path", "expires_in"}``: a one-time sign-in link."""
    await account_of(request)
    path = request.app.state.sign_in.new_link(key_of(request))
    return JSONResponse({"path": path, "expires_in": int(LINK_TTL_S)})
