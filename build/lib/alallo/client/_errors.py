"""The errors of alallo's Python client.

::

    AlalloClientError
    ├── ClientError     the call could not be made: no API key, the server is
    │                   unreachable, or its answer was not what API.md promises
    └── ApiError        the server answered with an error status (4xx or 5xx)

The split follows "you or the world did it": an :class:`ApiError` carries the
server's verdict on the request (fix the request); a :class:`ClientError`
says the conversation itself failed (fix the setup). Transport errors from
HTTPX never leave the client: they become a :class:`ClientError` chained to
the original (``__cause__``).

These do not derive from :class:`alallo._errors.AlalloError`: that tree is the
server's, and the gateway turns each of its classes into an HTTP status; a
client-side failure must never be mistaken for one of those.
"""

from __future__ import annotations

__all__ = ["AlalloClientError", "ApiError", "ClientError"]


class AlalloClientError(Exception):
    """Root of the client's errors: catch this to handle every failed call."""


class ClientError(AlalloClientError):
    """The call could not be made or understood; the message says what to do."""


class ApiError(AlalloClientError):
    """The server refused the request, with the error body of API.md.

    ``str(err)`` reads as one line, e.g.
    ``422 invalid_request: line 7: not a JSON object (param: file)``.

    Args:
        status_code: The HTTP status of the answer, e.g. 404 or 409.
        code: The machine-readable ``error.code``, e.g. ``"not_found"``.
        message: The ``error.message`` meant for people, shown as is.
        param: The dotted path of the field at fault, or None.
    """

    def __init__(self, status_code: int, code: str, message: str, param: str | None = None) -> None:
        self.status_code = status_code
        self.code = code
        self.message = message
        self.param = param
        text = f"{status_code} {code}: {message}"
        if param:
            text += f" (param: {param})"
        super().__init__(text)

    def __repr__(self) -> str:
        return (
            f"ApiError(status_code={self.status_code!r}, code={self.code!r}, "
            f"message={self.message!r}, param={self.param!r})"
        )
