"""Reading request bodies and query parameters, with 4xx errors that name the field."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from alallo import InvalidRequest
from alallo._json import NestingTooDeep, loads

from ._errors import BadJSON

__all__ = ["json_object", "query_int"]


async def json_object(request: Request) -> dict[str, Any]:
    """The body as a JSON object.

    Raises:
        BadJSON: the body is not valid JSON, nests deeper than
            :data:`alallo._json.MAX_JSON_DEPTH`, or is not an object (400).
    """
    raw = await request.body()
    try:
        data = loads(raw or b"null")
    except NestingTooDeep as exc:
        raise BadJSON(f"the body is {exc}") from exc
    except ValueError as exc:
        raise BadJSON(f"the body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BadJSON("the body must be a JSON object")
    return data


def query_int(request: Request, name: str, default: int, *, low: int = 0,
              high: int = 10_000) -> int:
    """An integer query parameter within ``[low, high]``.

    Raises:
        InvalidRequest: not an integer or out of range (422, ``param=name``).
    """
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise InvalidRequest(f"{name} must be an integer, got {raw!r}", param=name) from exc
    if not low <= value <= high:
        raise InvalidRequest(f"{name} must be between {low} and {high}, got {value}", param=name)
    return value
