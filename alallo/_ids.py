"""Ids of jobs and files: time-ordered, so that the store appends them.

``<prefix><12 hex digits: Unix time in ms><12 hex digits: random>``, 24 hex
digits after the prefix as before (``ft-`` + 24, ``file-`` + 24). The time
first is UUIDv7's layout (RFC 9562, section 5.7: 48 bits of Unix ms, then
random bits). Why: every primary key and foreign key that holds a job's id
(``jobs``, ``job_items``, ``job_feed``) is a B-tree; a random id lands on a
random leaf, so a batch of 16 new jobs dirtied ~85 pages of SQLite's WAL,
a time-ordered one ~43 (``bench/bench_store.py``; each WAL page is written
again at the next checkpoint). Ids are not secrets: another account's id
answers as one nobody has (docs/security.md); the 48 random bits keep two
ids of one millisecond apart (and the primary key refuses a repeat).
"""

from __future__ import annotations

import secrets
import time

__all__ = ["new_id"]


def new_id(prefix: str) -> str:
    """A new id: ``prefix`` + 12 hex digits of the Unix time in ms + 12 random hex digits.

    Ids made later sort after (to the millisecond, by the wall clock); ids of
    one millisecond sort at random.
    """
    return f"{prefix}{time.time_ns() // 1_000_000:012x}{secrets.token_hex(6)}"
