"""alallo's exceptions.

::

    AlalloError
    ├── InvalidRequest      the request is malformed or names a bad value (422)
    │   └── InvalidFile     an uploaded JSONL file has a bad line (422)
    ├── NotFound            no such file, job or model in this account (404)
    ├── Conflict            the request clashes with the current state (409)
    │   └── InvalidTransition   e.g. cancelling a job that has finished
    ├── Forbidden           the key is valid but its account may not do this (403)
    ├── Unauthorized        no or unknown API key (401)
    └── SettingError        a setting that cannot work: the server refuses to start

Each carries a machine-readable ``code`` and, where one field is at fault,
``param``: the dotted path of that field. The gateway turns each class into
an HTTP status in one table (``gateway/_errors.py``).
"""

from __future__ import annotations


class AlalloError(Exception):
    """Root of alallo's errors. ``message`` is for people, ``code`` for programs."""

    code = "error"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class InvalidRequest(AlalloError):
    """A request that cannot be carried out as asked; nothing was changed."""

    code = "invalid_request"


class InvalidFile(InvalidRequest):
    """An uploaded file is not valid training data; nothing was stored."""

    code = "invalid_file"


class NotFound(AlalloError):
    """No such object in the caller's account."""

    code = "not_found"


class Conflict(AlalloError):
    """The object is in a state that does not allow the request."""

    code = "conflict"


class InvalidTransition(Conflict):
    """A job cannot make the asked change from its current status."""

    code = "invalid_transition"


class Unauthorized(AlalloError):
    """No API key, or one that belongs to no account."""

    code = "unauthorized"


class Forbidden(AlalloError):
    """The key is valid, but its account may not do this (e.g. run a command of its own)."""

    code = "forbidden"


class SettingError(AlalloError):
    """A setting that cannot work here (a storage URL that cannot be written, a trainer
    user that does not exist): the runtime refuses to start. ``param`` names the
    setting (``storage_url``); the message says what was found."""

    code = "invalid_setting"


class StoreUnavailable(AlalloError):
    """The database could not be reached or refused the change."""

    code = "store_unavailable"


class LeaseLost(AlalloError):
    """A write carried a stale epoch: another process has taken the job's lease.

    The store changed nothing. The writer must stop running the job (its
    trainer included) and never write it again: the new owner runs it.
    """

    code = "lease_lost"

    def __init__(self, job_id: str, epoch: int) -> None:
        super().__init__(f"job {job_id}: the lease of epoch {epoch} was taken by another process")
        self.job_id = job_id
        self.epoch = epoch
