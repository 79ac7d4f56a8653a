"""API key -> account, remembered in memory for a few seconds.

Every request authenticates; reading the store for it cost more than the
request's own work (docs/performance.md, "API requests"). A key that was
found is remembered for :data:`KEY_CACHE_TTL_S` seconds, at most
:data:`KEY_CACHE_SIZE` keys (the least recently used go first). A key
revoked through this process (:meth:`alallo.Runtime.revoke_api_key`) is
forgotten at once; one revoked by another process (``alallo keys revoke``
writes the store directly) stops working here within the TTL. Unknown keys
are never remembered: a new key works at once everywhere.

Hand-rolled (an ``OrderedDict`` with an expiry per entry) rather than
``cachetools.TTLCache``: twenty lines do not warrant a new dependency.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["KEY_CACHE_SIZE", "KEY_CACHE_TTL_S", "KeyCache"]

KEY_CACHE_TTL_S = 3.0
"""Seconds a found key is trusted without reading the store (the revocation delay
for keys revoked by another process)."""
KEY_CACHE_SIZE = 10_000
"""Keys remembered at most (~200 bytes each)."""


class KeyCache:
    """A bounded, expiring map of key hash -> account id.

    Args:
        ttl_s: seconds an entry lives.
        size: entries kept at most; the least recently used is dropped first.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, *, ttl_s: float = KEY_CACHE_TTL_S, size: int = KEY_CACHE_SIZE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.size = size
        self.clock = clock
        self._entries: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self.revocations = 0
        """Bumped by :meth:`forget`: a lookup that began before must not :meth:`put`."""

    def get(self, key_hash: str) -> str | None:
        """The account of a key found less than ``ttl_s`` ago, or None."""
        entry = self._entries.get(key_hash)
        if entry is None:
            return None
        account, expires = entry
        if self.clock() >= expires:
            del self._entries[key_hash]
            return None
        self._entries.move_to_end(key_hash)
        return account

    def put(self, key_hash: str, account_id: str, *, revocations: int) -> None:
        """Remember a key the store has just confirmed.

        ``revocations`` is :attr:`revocations` as read before the store was
        asked: if a key was revoked meanwhile, nothing is remembered.
        """
        if revocations != self.revocations:
            return
        self._entries[key_hash] = (account_id, self.clock() + self.ttl_s)
        self._entries.move_to_end(key_hash)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def forget(self, key_hash: str) -> None:
        """Drop a key (it was revoked); lookups in flight remember nothing."""
        self.revocations += 1
        self._entries.pop(key_hash, None)

    def __len__(self) -> int:
        return len(self._entries)
