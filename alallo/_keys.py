"""API keys: made once, stored as a hash, handed to the local user in a file."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

__all__ = ["DEFAULT_DATA_DIR", "KEY_ID_LENGTH", "KEY_PREFIX", "hash_key", "key_id", "new_key",
           "read_key_file", "write_key_file"]

DEFAULT_DATA_DIR = Path(".alallo")
"""Where a server keeps its data, and where the local key file is, unless told otherwise
(``ALALLO_DATA_DIR``): the settings' default and the clients' place to look for a key."""

KEY_PREFIX = "sk-alallo-"
KEY_ID_LENGTH = len(KEY_PREFIX) + 8
"""Characters of a key kept in the store to name it (``sk-alallo-AbC12x_9``): 48 random
bits tell millions of keys apart (a clash is refused as ambiguous, never guessed), and
24 of the 32 random characters (144 bits) stay secret."""


def new_key() -> str:
    """A fresh API key: the prefix and 32 random URL-safe characters."""
    return KEY_PREFIX + secrets.token_urlsafe(24)


def key_id(key: str) -> str:
    """The start of a key that names it in lists and ``alallo keys revoke``."""
    return key[:KEY_ID_LENGTH]


def hash_key(key: str) -> str:
    """The stored form of a key (SHA-256 hex): the store never holds keys."""
    return hashlib.sha256(key.encode()).hexdigest()


def read_key_file(path: Path) -> str | None:
    """The key in ``path``, or None when there is no such file."""
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


def write_key_file(path: Path, key: str) -> None:
    """Write the key readable by its owner only (mode 0600), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    os.replace(tmp, path)
