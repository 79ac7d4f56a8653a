"""The dashboard's sessions: a signed cookie that names a session, which names the key.

The cookie :data:`SESSION_COOKIE` holds ``<session id>.<timestamp>.<signature>``
(itsdangerous's ``TimestampSigner``, HMAC-SHA256): a random session id, never
the key nor its hash. The store keeps the session (its id as a SHA-256 hash,
the key's hash, when it ends: :mod:`alallo.store._sessions`), so a session

- lasts ``Settings.session_max_age_s`` (12 h by default) from sign-in;
- ends at once on every server when it is signed out (:meth:`Sessions.end`,
  ``POST /signout``), or when its key is revoked (``alallo keys revoke``): each
  request reads the session and its key from the store, with no cache;
- outlives a restart, and works on every server of one store: the signing
  key is made once and kept in the store (``server_secrets``), never logged.

A cookie whose signature does not match (tampered with, or a raw key from
before sessions) or whose timestamp is too old is refused before the store
is asked. Why not Starlette's ``SessionMiddleware``: its cookie *is* the
session (signed data, nothing on the server), so sign-out or a revoked key
could not end a copy of it; and its secret is needed when the app is built,
before the store can be read.
"""

from __future__ import annotations

import hashlib
import secrets
import time

from itsdangerous import BadSignature, TimestampSigner

from alallo import Runtime, Unauthorized

__all__ = ["SESSION_COOKIE", "SIGNING_SECRET", "Sessions"]

SESSION_COOKIE = "alallo_session"
"""The dashboard's cookie, set by a one-time sign-in link (:mod:`gateway._signin`)."""
SIGNING_SECRET = "dashboard_session_signing_key"
"""The name of the sessions' signing key in the store's ``server_secrets``."""
_SALT = "alallo.dashboard-session"


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class Sessions:
    """The dashboard sessions of a runtime's store.

    Args:
        runtime: whose store keeps the sessions and the signing key.
        max_age_s: seconds a session lasts from sign-in (``Settings.session_max_age_s``).
    """

    def __init__(self, runtime: Runtime, *, max_age_s: int) -> None:
        self.runtime = runtime
        self.max_age_s = max_age_s
        self._signer: TimestampSigner | None = None

    async def _signer_of_store(self) -> TimestampSigner:
        if self._signer is None:
            key = await self.runtime.store.shared_secret(
                SIGNING_SECRET, secrets.token_urlsafe(32), int(time.time()))
            self._signer = TimestampSigner(key, salt=_SALT, digest_method=hashlib.sha256)
        return self._signer

    async def start(self, key_hash: str) -> str:
        """A new session of the key with this hash (:func:`alallo._keys.hash_key`): the
        cookie's value."""
        session_id = secrets.token_urlsafe(32)
        now = int(time.time())
        await self.runtime.store.add_session(_hash(session_id), key_hash, now,
                                             now + self.max_age_s)
        signer = await self._signer_of_store()
        return signer.sign(session_id).decode()

    async def key_of(self, cookie: str) -> tuple[str, str]:
        """``(key_hash, account_id)`` of the session a cookie names.

        Raises:
            Unauthorized: a cookie that is not signed here, or too old; a session
                signed out, expired, or whose key was revoked (401).
        """
        session_id = await self._session_id(cookie)
        found = await self.runtime.store.session_key(_hash(session_id), int(time.time()))
        if found is None:
            raise Unauthorized("the dashboard session has ended (signed out, expired, or its "
                               "key was revoked): sign in again with a new link")
        return found

    async def end(self, cookie: str) -> bool:
        """Sign a session out, everywhere at once; False when the cookie names none."""
        try:
            session_id = await self._session_id(cookie)
        except Unauthorized:
            return False
        return await self.runtime.store.end_session(_hash(session_id))

    async def _session_id(self, cookie: str) -> str:
        signer = await self._signer_of_store()
        try:
            return signer.unsign(cookie, max_age=self.max_age_s).decode()
        except BadSignature as exc:  # SignatureExpired included
            raise Unauthorized("the dashboard session cookie is not valid: sign in again "
                               "with a new link") from exc
