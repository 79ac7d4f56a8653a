"""Errors become HTTP answers here, in one table (STYLE.md, rule 25).

Every error body is ``{"error": {"code", "message", "param"}}``; bad input
never gets a 500.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from alallo import (
    AlalloError,
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    Unauthorized,
)

__all__ = ["EXCEPTION_HANDLERS", "BadJSON", "Forbidden", "RequestTooLarge", "error_response"]


class BadJSON(InvalidRequest):
    """The request body is not the JSON object the endpoint expects."""

    code = "invalid_json"


class RequestTooLarge(AlalloError):
    """The request body (or the uploaded file) is over its size limit (``gateway._limits``)."""

    code = "request_too_large"


_STATUS: tuple[tuple[type[AlalloError], int], ...] = (
    (Forbidden, 403),
    (BadJSON, 400),
    (Unauthorized, 401),
    (NotFound, 404),
    (Conflict, 409),
    (RequestTooLarge, 413),
    (InvalidRequest, 422),
)


def error_response(status: int, code: str, message: str, param: str | None) -> JSONResponse:
    """The error body of API.md with its status."""
    return JSONResponse({"error": {"code": code, "message": message, "param": param}},
                        status_code=status)


async def _alallo_error(request: Request, exc: AlalloError) -> JSONResponse:
    status = next((s for cls, s in _STATUS if isinstance(exc, cls)), 400)
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
