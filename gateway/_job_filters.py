"""The ``metadata`` filter of ``GET /v1/fine_tuning/jobs``, read from the query as OpenAI's
SDK sends it: ``metadata[key]=value`` per pair (``jobs.list(metadata={...})``), or
``metadata=null`` for the jobs created without metadata. An empty ``metadata`` (or none)
filters nothing; the filter is held to the limits of the metadata it matches
(:func:`alallo.jobs.check_metadata`): a filter beyond them could match no job.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic_core import PydanticCustomError
from starlette.requests import Request

from alallo import InvalidRequest
from alallo.jobs import (
    METADATA_MAX_KEY_CHARS,
    METADATA_MAX_KEYS,
    METADATA_MAX_VALUE_CHARS,
    check_metadata,
)
from alallo.store import NULL_METADATA

__all__ = ["METADATA_DOC", "METADATA_SCHEMA", "metadata_filter"]

METADATA_SCHEMA = {"type": "object", "maxProperties": METADATA_MAX_KEYS,
                   "propertyNames": {"maxLength": METADATA_MAX_KEY_CHARS},
                   "additionalProperties": {"type": "string",
                                            "maxLength": METADATA_MAX_VALUE_CHARS}}
"""The filter's JSON Schema in ``/openapi.json`` (a ``deepObject`` query parameter)."""
METADATA_DOC = ("Only the jobs whose metadata holds each pair (metadata[KEY]=VALUE, as the "
                "openai package sends it); metadata=null: the jobs without metadata.")


def metadata_filter(request: Request) -> Mapping[str, str] | None:
    """The request's ``metadata`` filter: pairs, :data:`~alallo.store.NULL_METADATA`, or None.

    Raises:
        InvalidRequest: a ``metadata`` value other than ``null`` or empty, a key without
            its closing bracket, the two forms at once, or a filter beyond the metadata
            limits (422, ``param="metadata"``).
    """
    params = request.query_params
    whole = params.get("metadata")
    pairs = {}
    for name, value in params.multi_items():
        if name.startswith("metadata[") and name.endswith("]"):
            pairs[name[len("metadata["):-1]] = value
        elif name.startswith("metadata["):
            raise InvalidRequest(f"metadata filters are metadata[KEY]=VALUE; got {name[:80]!r}",
                                 param="metadata")
    if whole not in (None, "", "null"):
        raise InvalidRequest("metadata filters are metadata[KEY]=VALUE, or metadata=null for "
                             "jobs without metadata", param="metadata")
    if whole == "null":
        if pairs:
            raise InvalidRequest("give metadata=null or metadata[KEY]=VALUE filters, not both",
                                 param="metadata")
        return NULL_METADATA
    try:
        check_metadata(pairs)
    except PydanticCustomError as exc:
        raise InvalidRequest(f"metadata: {exc.message()}", param="metadata") from None
    return pairs or None
