"""Reading request bodies and query parameters, with 4xx errors that name the field.

What they take is what ``/openapi.json`` says (:mod:`gateway._openapi`): a query integer is
written in ASCII digits (``int()`` would also take ``" 7"``, ``"1_0"`` and ``"٧"``), and
a JSON number with a zero fraction is an integer (``2.0`` is ``2``), as JSON Schema reads
it (2020-12 Validation §6.1.1): no schema can tell ``2.0`` from ``2``, so a server that
refused one would refuse what its own document allows.
"""

from __future__ import annotations

import math
import re
from typing import Any

from starlette.requests import Request

from alallo import InvalidRequest
from alallo._json import NestingTooDeep, loads_request

from ._errors import BadJSON

__all__ = ["json_object", "parse_int", "query_int", "whole_numbers"]

_INTEGER = re.compile(r"-?[0-9]+")


async def json_object(request: Request) -> dict[str, Any]:
    """The body as a JSON object.

    ``NaN``, ``Infinity`` and numbers too large for a float are parsed (to non-finite
    floats), for the endpoint's model to refuse naming the field (422); a string with a
    lone surrogate is not valid JSON here (:func:`alallo._json.loads_request`).

    Raises:
        BadJSON: the body is not valid JSON, nests deeper than
            :data:`alallo._json.MAX_JSON_DEPTH`, or is not an object (400).
    """
    raw = await request.body()
    try:
        data = loads_request(raw or b"null")
    except NestingTooDeep as exc:
        raise BadJSON(f"the body is {exc}") from exc
    except ValueError as exc:
        raise BadJSON(f"the body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BadJSON("the body must be a JSON object")
    return whole_numbers(data)


def whole_numbers(value: Any) -> Any:
    """``value`` (parsed JSON) with every finite float that has no fraction made an ``int``
    (``2.0`` → ``2``, ``1e3`` → ``1000``), at any depth: JSON has one kind of number, and
    JSON Schema's ``integer`` is any number with a zero fraction. The request's models are
    strict (a boolean or a string is no number), so without this they would refuse ``2.0``
    for an integer field; a float field takes the ``int`` as it always did."""
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else value
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    return value


def query_int(request: Request, name: str, default: int, *, low: int = 0,
              high: int = 10_000) -> int:
    """An integer query parameter within ``[low, high]``; ``default`` when it is absent or
    empty (``?limit=``, as a form sends a field left blank: ``allowEmptyValue`` in
    ``/openapi.json``).

    Raises:
        InvalidRequest: not an integer in ASCII digits, or out of range (422, ``param=name``).
    """
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    return parse_int(raw, name, low=low, high=high)


def parse_int(raw: str, name: str, *, low: int = 0, high: int = 10_000) -> int:
    """``raw`` as an integer within ``[low, high]``: ASCII digits with an optional ``-``,
    nothing around them.

    Raises:
        InvalidRequest: anything else (422, ``param=name``).
    """
    if _INTEGER.fullmatch(raw) is None or len(raw) > 40:
        raise InvalidRequest(f"{name} must be an integer, got {raw[:40]!r}", param=name)
    value = int(raw)
    if not low <= value <= high:
        raise InvalidRequest(f"{name} must be between {low} and {high}, got {value}", param=name)
    return value
