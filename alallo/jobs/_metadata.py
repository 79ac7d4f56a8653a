"""OpenAI's limits on an object's ``metadata``: a job's, checked as its spec is."""

from __future__ import annotations

from pydantic_core import PydanticCustomError

__all__ = ["METADATA_MAX_KEYS", "METADATA_MAX_KEY_CHARS", "METADATA_MAX_VALUE_CHARS",
           "check_metadata"]

METADATA_MAX_KEYS = 16
"""The most pairs a ``metadata`` object may hold (OpenAI's ``Metadata``)."""
METADATA_MAX_KEY_CHARS = 64
"""The longest key, in characters."""
METADATA_MAX_VALUE_CHARS = 512
"""The longest value, in characters."""


def check_metadata(value: dict[str, str] | None) -> dict[str, str] | None:
    """``value`` if it is within OpenAI's limits, else a pydantic error saying which and why
    (answered 422 naming ``metadata``).

    Raises:
        PydanticCustomError: ``metadata_limit``: too many keys, a key or a value too long.
    """
    if value is None:
        return None
    if len(value) > METADATA_MAX_KEYS:
        raise PydanticCustomError(
            "metadata_limit", "at most {limit} keys, got {count}",
            {"limit": METADATA_MAX_KEYS, "count": len(value)})
    for key, text in value.items():
        if len(key) > METADATA_MAX_KEY_CHARS:
            raise PydanticCustomError(
                "metadata_limit", "keys are at most {limit} characters; {key} has {count}",
                {"limit": METADATA_MAX_KEY_CHARS, "key": repr(key[:20] + "…"),
                 "count": len(key)})
        if len(text) > METADATA_MAX_VALUE_CHARS:
            raise PydanticCustomError(
                "metadata_limit",
                "values are at most {limit} characters; the value of {key} has {count}",
                {"limit": METADATA_MAX_VALUE_CHARS, "key": repr(key), "count": len(text)})
    return value
