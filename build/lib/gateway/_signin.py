"""Signing in to the dashboard with a one-time link, and signing out.

``alallo serve`` prints ``http://…/signin/<token>``; opening it once starts a
session (:mod:`gateway._sessions`), sets its cookie :data:`SESSION_COOKIE`
and redirects to the Jobs tab. The link works once and for
:data:`LINK_TTL_S`, so a link seen in a terminal's scrollback or a browser's
history is worth nothing. A program with a key (or a signed-in page) gets a
new link from ``POST /v1/dashboard/links`` (``alallo dashboard`` prints one).
``POST /signout`` ends the session (the dashboard's **Sign out** button).

The cookie holds a signed session id, never the key. It is ``HttpOnly``
(page scripts cannot read it), ``SameSite=Strict`` (other sites cannot send
it, which is what keeps cookie-authenticated ``POST``s safe from cross-site
forgery; no flow here starts on another site, so ``Lax`` is not needed),
``Secure`` when the page is served over https, and lasts
``Settings.session_max_age_s``. The session is kept in the store, so a
restarted server still knows the browser and the dashboard catches up by
itself (JOURNEYS.md, "Bad day").
"""

from __future__ import annotations

import secrets
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from alallo import Unauthorized
from alallo._keys import hash_key

from ._auth import caller_of, runtime_of, sessions_of
from ._sessions import SESSION_COOKIE

__all__ = ["LINK_TTL_S", "SESSION_COOKIE", "SignIn", "create_link", "sign_in", "sign_out"]

LINK_TTL_S = 600.0
"""Seconds a sign-in link stays valid (it also stops working once used)."""


class SignIn:
    """The one-time sign-in links a server has handed out and not yet seen used.

    A link stands for a key by the key's hash: the key itself is not kept.
    """

    def __init__(self) -> None:
        self._links: dict[str, tuple[str, float]] = {}

    def new_link(self, api_key: str, *, now: float | None = None) -> str:
        """A fresh path ``/signin/<token>`` that signs its first visitor in with ``api_key``."""
        return self.new_link_for(hash_key(api_key), now=now)

    def new_link_for(self, key_hash: str, *, now: float | None = None) -> str:
        """As :meth:`new_link`, for the key with this hash (:func:`alallo._keys.hash_key`)."""
        now = time.time() if now is None else now
        self._links = {t: v for t, v in self._links.items() if v[1] > now}
        token = secrets.token_urlsafe(24)
        self._links[token] = (key_hash, now + LINK_TTL_S)
        return f"/signin/{token}"

    def redeem(self, token: str, *, now: float | None = None) -> str | None:
        """The key hash a link stands for, once; None for a used, expired or unknown link."""
        now = time.time() if now is None else now
        key_hash, expires = self._links.pop(token, ("", 0.0))
        return key_hash if expires > now else None


async def sign_in(request: Request) -> Response:
    """``GET /signin/{token}``: start a session, set its cookie and go to the Jobs tab.

    Raises:
        Unauthorized: a used, expired or unknown link, or one whose key was
            revoked since (401).
    """
    key_hash = request.app.state.sign_in.redeem(request.path_params["token"])
    if key_hash is None:
        raise Unauthorized("this sign-in link was used already or has expired: "
                           "run `alallo dashboard` for a new one")
    if await runtime_of(request).store.account_for_key(key_hash) is None:
        raise Unauthorized("the key of this sign-in link was revoked")
    sessions = sessions_of(request)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(SESSION_COOKIE, await sessions.start(key_hash),
                        max_age=sessions.max_age_s, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/")
    return response


async def sign_out(request: Request) -> Response:
    """``POST /signout``: end the session of the request's cookie (if any) everywhere,
    clear the cookie, and go to ``/`` (which then asks to sign in)."""
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        await sessions_of(request).end(cookie)
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict",
                           secure=request.url.scheme == "https")
    return response


async def create_link(request: Request) -> JSONResponse:
    """``POST /v1/dashboard/links`` → ``{"path", "expires_in"}``: a one-time sign-in link
    for the caller's key (or the key of the caller's session)."""
    key_hash, _ = await caller_of(request)
    path = request.app.state.sign_in.new_link_for(key_hash)
    return JSONResponse({"path": path, "expires_in": int(LINK_TTL_S)})
