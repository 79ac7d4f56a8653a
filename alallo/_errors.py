"""alallo's exceptions: one tree for the runtime, the gateway and the clients.

::

    AlalloError                     every error alallo raises, embedded or over HTTP
    ├── ApiError                    a refusal, as the server sends it: status_code, code,
    │                               message, param
    │   ├── InvalidRequest      400 the request is malformed or names a bad value
    │   │   └── InvalidFile     400 an uploaded JSONL file has a bad line
    │   ├── Unauthorized        401 no or unknown API key
    │   ├── Forbidden           403 the key is valid but its account may not do this
    │   ├── NotFound            404 no such file, job or model in this account
    │   ├── Conflict            409 the request clashes with the current state
    │   │   └── InvalidTransition 409 e.g. cancelling a job that has finished
    │   └── Unavailable         503 alallo cannot serve the request now; it may later
    │       └── StoreUnavailable 503 the database could not be reached or refused the change
    ├── ClientError                 a client's call could not be made: no API key, no server,
    │                               or an answer that is not what API.md promises
    ├── SettingError                a setting that cannot work: the server refuses to start
    └── LeaseLost                   internal: a write with a stale lease epoch; never leaves
                                    the runtime

Each :class:`ApiError` class carries the HTTP status it is answered with
(``status_code``) and its machine-readable ``code`` beside it. The gateway
answers ``exc.status_code`` (``gateway/_errors.py``, which adds ``BadJSON``
400 and ``RequestTooLarge`` 413 under :class:`InvalidRequest`), and a client
raises the class an error answer names (:func:`api_error`), so ``except
alallo.NotFound`` reads the same embedded and over HTTP.

The split follows "you or the world did it": an :class:`ApiError` is the
server's verdict on a request (4xx: fix the request; 503: try it again
later); a :class:`ClientError` says the conversation itself failed (fix the
setup). Transport errors from HTTPX never leave a client: they become a
:class:`ClientError` chained to the original (``__cause__``).
"""

from __future__ import annotations

__all__ = [
    "AlalloError",
    "ApiError",
    "ClientError",
    "Conflict",
    "Forbidden",
    "InvalidFile",
    "InvalidRequest",
    "InvalidTransition",
    "LeaseLost",
    "NotFound",
    "SettingError",
    "StoreUnavailable",
    "Unauthorized",
    "Unavailable",
    "api_error",
]


class AlalloError(Exception):
    """Root of alallo's errors: catch this to handle every failure of alallo's making.

    ``message`` is for people, ``code`` for programs; ``param``, where one field
    or setting is at fault, is its dotted path (``hyperparameters.n_epochs``).
    """

    code: str = "error"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class ApiError(AlalloError):
    """The server refused the request, with the error body of API.md.

    A client raises the subclass the answer names (a 404 is a :class:`NotFound`),
    or this class itself for a status that none names (402, 405, 500, a proxy's
    502...). ``str(err)`` reads as one line, e.g.
    ``400 invalid_request: line 7: not a JSON object (param: file)``.

    Args:
        status_code: The HTTP status of the answer, e.g. 404 or 409.
        code: The machine-readable ``error.code``, e.g. ``"not_found"``.
        message: The ``error.message`` meant for people, shown as is.
        param: The dotted path of the field at fault, or None.
    """

    status_code: int
    """The HTTP status: the class's own on a named subclass, the answer's when a client
    raised it."""

    def __init__(self, status_code: int, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message, param=param)
        self.status_code = status_code
        self.code = code

    def __str__(self) -> str:
        text = f"{self.status_code} {self.code}: {self.message}"
        return f"{text} (param: {self.param})" if self.param else text

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status_code={self.status_code!r}, code={self.code!r}, "
            f"message={self.message!r}, param={self.param!r})"
        )


class _NamedApiError(ApiError):
    # The refusals the server raises by name: NotFound("no job 'ft-1'", param="job_id").
    # Status and code come from the class; a client passes the answer's own, which
    # may differ (a 400 invalid_json is read as an InvalidRequest).

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None,
                 status_code: int | None = None) -> None:
        cls = type(self)
        super().__init__(cls.status_code if status_code is None else status_code,
                         cls.code if code is None else code, message, param)


class InvalidRequest(_NamedApiError):
    """A request that cannot be carried out as asked; nothing was changed (HTTP 400, as
    OpenAI answers a bad request: ``error.type`` ``invalid_request_error``)."""

    status_code = 400
    code = "invalid_request"


class InvalidFile(InvalidRequest):
    """An uploaded file is not valid training data; nothing was stored."""

    code = "invalid_file"


class Unauthorized(_NamedApiError):
    """No API key, or one that belongs to no account."""

    status_code = 401
    code = "unauthorized"


class Forbidden(_NamedApiError):
    """The key is valid, but its account may not do this (e.g. run a command of its own)."""

    status_code = 403
    code = "forbidden"


class NotFound(_NamedApiError):
    """No such object in the caller's account."""

    status_code = 404
    code = "not_found"


class Conflict(_NamedApiError):
    """The object is in a state that does not allow the request."""

    status_code = 409
    code = "conflict"


class InvalidTransition(Conflict):
    """A job cannot make the asked change from its current status."""

    code = "invalid_transition"


class Unavailable(_NamedApiError):
    """alallo cannot serve the request now, through no fault of the request; the same
    request may succeed later."""

    status_code = 503
    code = "unavailable"


class StoreUnavailable(Unavailable):
    """The database could not be reached or refused the change."""

    code = "store_unavailable"


class ClientError(AlalloError):
    """A client's call could not be made or understood; the message says what to do."""

    code = "client_error"


class SettingError(AlalloError):
    """A setting that cannot work here (a storage URL that cannot be written, a trainer
    user that does not exist): the runtime refuses to start. ``param`` names the
    setting (``storage_url``); the message says what was found."""

    code = "invalid_setting"


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


_NAMED = (InvalidRequest, InvalidFile, Unauthorized, Forbidden, NotFound, Conflict,
          InvalidTransition, Unavailable, StoreUnavailable)
_BY_CODE: dict[str, type[_NamedApiError]] = {cls.code: cls for cls in _NAMED}
_BY_STATUS: dict[int, type[_NamedApiError]] = {
    400: InvalidRequest,  # the gateway's BadJSON is one, as is any other malformed request
    413: InvalidRequest,  # the gateway's RequestTooLarge
    **{cls.status_code: cls for cls in (InvalidRequest, Unauthorized, Forbidden, NotFound,
                                        Conflict, Unavailable)},
}


def shown(value: str, limit: int = 256) -> str:
    """``value`` quoted for an error message, as ``repr`` quotes it, its first ``limit``
    characters only and ``…`` after them: a 10,000-character id sent back whole would
    bury the sentence it is in. Every id alallo makes fits (a fine-tuned model's, with a
    hub base and a suffix, is under 200 characters)."""
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}…"


def api_error(status_code: int, code: str, message: str, param: str | None = None) -> ApiError:
    """The error an answer names: the class of its ``code`` if alallo has one, else the
    class of its status, else a plain :class:`ApiError`; with the answer's own status,
    code, message and param either way."""
    named = _BY_CODE.get(code) or _BY_STATUS.get(status_code)
    if named is None:
        return ApiError(status_code, code, message, param)
    return named(message, param=param, code=code, status_code=status_code)
