"""The dashboard's sessions over HTTP (gateway/_sessions.py, gateway/_signin.py): a signed
cookie that refers to the key and never holds it; refused when tampered with; ended by
sign-out, by revoking the key and by its age; kept across a restart."""

from __future__ import annotations

from collections.abc import Callable
from http.cookies import SimpleCookie
from pathlib import Path

import httpx

from alallo._keys import hash_key
from support import LiveServer, start_server, stop_server, wait_until_sync

from test_tenants import new_account, operator

COOKIE = "alallo_session"
JOBS = "/v1/fine_tuning/jobs"


def sign_in(url: str, key: str) -> tuple[str, SimpleCookie]:
    """Open a fresh sign-in link of ``key``: ``(cookie value, the Set-Cookie header parsed)``."""
    link = httpx.post(f"{url}/v1/dashboard/links", timeout=30,
                      headers={"Authorization": f"Bearer {key}"}).json()["path"]
    response = httpx.get(f"{url}{link}", timeout=30)
    assert response.status_code == 303, response.text
    header = SimpleCookie(response.headers["set-cookie"])
    return header[COOKIE].value, header


def status_with(url: str, cookie: str, path: str = JOBS) -> int:
    """The status of ``GET path`` with the session cookie ``cookie`` and no key."""
    return httpx.get(f"{url}{path}", cookies={COOKIE: cookie}, timeout=30).status_code


def test_the_cookie_refers_to_the_key_never_holds_it_and_is_refused_when_tampered_with(
        live_server: LiveServer) -> None:
    cookie, header = sign_in(live_server.url, live_server.api_key)
    assert live_server.api_key not in cookie and hash_key(live_server.api_key) not in cookie
    morsel = header[COOKIE]
    assert morsel["httponly"] is True and morsel["samesite"] == "strict"
    assert morsel["max-age"] == str(12 * 3600) and morsel["path"] == "/"
    assert not morsel["secure"], "served over http: a Secure cookie would never come back"
    assert status_with(live_server.url, cookie) == 200

    session_id, stamp, signature = cookie.split(".")

    def flipped(part: str) -> str:
        # The first character: the last one of base64 may carry only padding bits, and
        # another letter there can decode to the same bytes (a signature still valid).
        return ("B" if part[0] == "A" else "A") + part[1:]

    tampered = [
        f"{flipped(session_id)}.{stamp}.{signature}",
        f"{session_id}.{flipped(stamp)}.{signature}",
        f"{session_id}.{stamp}.{flipped(signature)}",
        live_server.api_key,  # what the cookie held before sessions
    ]
    for bad in tampered:
        response = httpx.get(f"{live_server.url}{JOBS}", cookies={COOKIE: bad}, timeout=30)
        assert response.status_code == 401, bad
        assert response.json()["error"]["code"] == "unauthorized"


def test_sign_out_ends_the_session_for_good(live_server: LiveServer) -> None:
    cookie, _ = sign_in(live_server.url, live_server.api_key)
    other, _ = sign_in(live_server.url, live_server.api_key)
    response = httpx.post(f"{live_server.url}/signout", cookies={COOKIE: cookie}, timeout=30)
    assert response.status_code == 303 and response.headers["location"] == "/"
    cleared = SimpleCookie(response.headers["set-cookie"])[COOKIE]
    assert cleared.value == "" and cleared["max-age"] == "0"
    assert status_with(live_server.url, cookie) == 401, "a copy of the cookie is dead too"
    assert status_with(live_server.url, other) == 200, "another browser stays signed in"


def test_revoking_the_key_ends_its_sessions_at_once(live_server: LiveServer) -> None:
    _, key = new_account(live_server, "session owner")
    cookie, _ = sign_in(live_server.url, key)
    assert status_with(live_server.url, cookie) == 200
    operator(live_server, "keys", "revoke", key)  # another process, on the store
    assert status_with(live_server.url, cookie) == 401
    assert status_with(live_server.url, cookie, "/v1/fine_tuning/stream") == 401


def test_a_session_outlives_a_server_restart(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data")
    try:
        cookie, _ = sign_in(server.url, server.api_key)
    finally:
        stop_server(server)
    again = start_server(tmp_path / "data")
    try:
        assert status_with(again.url, cookie) == 200
    finally:
        stop_server(again)


def test_a_session_ends_after_its_max_age(server_factory: Callable[..., LiveServer]) -> None:
    server = server_factory(ALALLO_SESSION_MAX_AGE_S="2")
    cookie, header = sign_in(server.url, server.api_key)
    assert header[COOKIE]["max-age"] == "2"
    assert status_with(server.url, cookie) == 200
    # The browser would drop it at 2 s; the server's clock ends it too, with no event to
    # wait for.
    wait_until_sync(lambda: status_with(server.url, cookie) != 200, timeout=10,
                    what="the session's end at its max age")
    assert status_with(server.url, cookie) == 401
