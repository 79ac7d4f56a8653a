"""Errors become HTTP answers here (STYLE.md, rule 25).

Every error body is ``{"error": {"code", "message", "param"}}``; bad input
never gets a 500. An :class:`~alallo.ApiError` is answered with the status
its class carries (``exc.status_code``, beside each class in
``alallo/_errors.py``); the two refusals only HTTP has, :class:`BadJSON` and
:class:`RequestTooLarge`, are added here under :class:`~alallo.InvalidRequest`.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from alallo import AlalloError, ApiError, Forbidden, InvalidRequest

__all__ = ["EXCEPTION_HANDLERS", "BadJSON", "Forbidden", "RequestTooLarge", "error_response"]


class BadJSON(InvalidRequest):
    """The request body is not the JSON object the endpoint expects."""

    status_code = 400
    code = "invalid_json"


class RequestTooLarge(InvalidRequest):
    """The request body (or the uploaded file) is over its size limit (``gateway._limits``)."""

    status_code = 413
    code = "request_too_large"


# An AlalloError that is no ApiError (SettingError, LeaseLost) should never meet a
# request; one that does is answered as it always was.
_NOT_A_REFUSAL_STATUS = 400


def error_response(status: int, code: str, message: str, param: str | None) -> JSONResponse:
    """The error body of API.md with its status."""
    return JSONResponse({"error": {"code": code, "message": message, "param": param}},
                        status_code=status)


async def _alallo_error(request: Request, exc: AlalloError) -> JSONResponse:
    status = exc.status_code if isinstance(exc, ApiError) else _NOT_A_REFUSAL_STATUS
    return error_response(status, exc.code, exc.message, exc.param)


async def _validation_error(request: Request, exc: ValidationError) -> JSONResponse:
    first: dict[str, Any] = dict(exc.errors()[0])
    param = ".".join(str(part) for part in first["loc"]) or None
    message = str(first["msg"])
    return error_response(422, "invalid_request", message, param)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return error_response(exc.status_code, code, str(exc.detail), None)


EXCEPTION_HANDLERS: dict[Any, Any] = {
    AlalloError: _alallo_error,
    ValidationError: _validation_error,
    HTTPException: _http_error,
}
