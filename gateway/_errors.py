"""Errors become HTTP answers here (STYLE.md, rule 25).

Every error body is ``{"error": {"code", "message", "param"}}``; bad input
never gets a 500. An :class:`~alallo.ApiError` is answered with the status
its class carries (``exc.status_code``, beside each class in
``alallo/_errors.py``); the two refusals only HTTP has, :class:`BadJSON` and
:class:`RequestTooLarge`, are added here under :class:`~alallo.InvalidRequest`.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Match

from alallo import AlalloError, ApiError, Forbidden, InvalidRequest

__all__ = ["EXCEPTION_HANDLERS", "BadJSON", "Forbidden", "RequestTooLarge", "allowed_methods",
           "error_response"]


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


def error_type(status: int) -> str:
    """OpenAI's ``error.type`` for an answer's status: ``server_error`` for a 5xx, else
    ``invalid_request_error`` (what its API answers to a bad request, a key it does not
    know, an id it has not, a state conflict)."""
    return "server_error" if status >= 500 else "invalid_request_error"


def error_response(status: int, code: str, message: str, param: str | None) -> JSONResponse:
    """The error body of API.md with its status: OpenAI's ``{"error": {"message", "type",
    "param", "code"}}``."""
    return JSONResponse({"error": {"message": message, "type": error_type(status),
                                   "param": param, "code": code}}, status_code=status)


async def _alallo_error(request: Request, exc: AlalloError) -> JSONResponse:
    status = exc.status_code if isinstance(exc, ApiError) else _NOT_A_REFUSAL_STATUS
    return error_response(status, exc.code, exc.message, exc.param)


async def _validation_error(request: Request, exc: ValidationError) -> JSONResponse:
    first: dict[str, Any] = dict(exc.errors()[0])
    param = ".".join(str(part) for part in first["loc"]) or None
    message = str(first["msg"])
    if first["type"] == "extra_forbidden":  # pydantic's words name no field: OpenAI's do
        message = f"Unrecognized request argument supplied: {param}"
    given = first.get("input")
    if ("url" in first and first["type"] != "extra_forbidden"
            and isinstance(given, bool | int | float)):
        # What came, in pydantic's own messages ("url": not one of ours, which say it
        # themselves), when it is a number or a boolean: never a string (maybe a secret).
        message += f", got {json.dumps(given)[:40]}"
    if param is not None and param not in message:  # OpenAI's messages name the field
        message = f"{param}: {message}"
    return error_response(400, "invalid_request", message, param)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    response = error_response(exc.status_code, code, str(exc.detail), None)
    response.headers.update(exc.headers or {})
    if exc.status_code == 405:
        response.headers["Allow"] = allowed_methods(request, exc.headers)
    return response


def allowed_methods(request: Request, given: dict[str, str] | None = None) -> str:
    """The ``Allow`` header of a 405 (RFC 9110 §15.5.6: it must be sent): every method of
    every route of the request's path, sorted (``DELETE, GET, HEAD``).

    Starlette's own 405 names the methods of the one route it tried first, and a path
    served by two routes (``GET`` and ``POST /v1/files``) would allow only one of them;
    a mounted app's 405 (the static files) keeps the header it ``given``.
    """
    methods: set[str] = set()
    for route in request.app.router.routes:
        route_methods = getattr(route, "methods", None)
        if route_methods and route.matches(request.scope)[0] is not Match.NONE:
            methods |= set(route_methods)
    if not methods and given and "Allow" in given:
        return given["Allow"]
    return ", ".join(sorted(methods))


EXCEPTION_HANDLERS: dict[Any, Any] = {
    AlalloError: _alallo_error,
    ValidationError: _validation_error,
    HTTPException: _http_error,
}
