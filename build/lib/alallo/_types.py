"""Type aliases shared across alallo."""

from __future__ import annotations

from typing import TypeAlias

JobId: TypeAlias = str
"""A job's id, ``ft-`` followed by 24 hex digits."""
FileId: TypeAlias = str
"""A file's id, ``file-`` followed by 24 hex digits."""
AccountId: TypeAlias = str
Seq: TypeAlias = int
"""A per-job sequence number: every event, log line and job change gets the next one."""
