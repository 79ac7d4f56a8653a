"""JSON from untrusted input, with a limit on how deeply it nests.

The stdlib's ``json.loads`` has no depth option: its C scanner recurses once
per level and raises ``RecursionError`` (not ``ValueError``) near 1,000
levels, which reached clients as a 500; and a value a few hundred levels
deep that it does parse can still exhaust the stack of whatever walks it
next (pydantic's validation, ``json.dumps``, our own code). So the depth is
measured *before* parsing, and anything deeper than :data:`MAX_JSON_DEPTH`
is refused without being parsed. No job spec, subscription or training
example needs more than a handful of levels.

Why a scan of our own: neither the stdlib nor a library already here offers
a depth limit one can set (pydantic-core's JSON parser stops at a fixed,
undocumented 200 levels). The scan is two regular-expression and bytes
passes in C plus one ``itertools.accumulate``: about 10 ms per MiB.

A request's JSON (:func:`loads_request`) is parsed by pydantic-core's parser
(jiter) instead of the stdlib's, because the stdlib turns ``"\\ud800"`` into a
string with a lone surrogate, which no UTF-8 answer, log line or database
can hold: a job spec with one answered 500. jiter refuses it as invalid
JSON, as RFC 8259 §8.2 allows (and I-JSON, RFC 7493 §2.1, requires).
``NaN``, ``Infinity`` and numbers too large for a float (``1e400``) are still
parsed, to non-finite floats: the request's model refuses them with the
field that holds them (``allow_inf_nan=False``; docs/api.md, "Errors").
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from pydantic_core import from_json

__all__ = ["MAX_JSON_DEPTH", "NestingTooDeep", "loads", "loads_request", "nesting_depth"]

MAX_JSON_DEPTH = 64
"""Levels of arrays and objects a JSON text may nest (``[[1]]`` is 2 levels)."""

# A JSON string, escapes included (RFC 8259 §7), in the "unrolled loop" form: linear time.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1
_BOM = "\ufeff".encode()


class NestingTooDeep(ValueError):
    """A JSON text nests arrays and objects deeper than allowed (see :func:`loads`)."""

    def __init__(self, max_depth: int) -> None:
        super().__init__(f"nested deeper than {max_depth} levels of arrays and objects")
        self.max_depth = max_depth


def nesting_depth(text: str | bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text (0 for a scalar).

    Brackets inside strings do not count. On a text that is not valid JSON
    the figure is an upper bound (an unterminated string's brackets count).
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def loads(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads(text)``, refusing before parsing a text nested deeper than ``max_depth``.

    Raises:
        NestingTooDeep: more than ``max_depth`` levels (a ``ValueError``).
        json.JSONDecodeError: not valid JSON (a ``ValueError``).
    """
    if nesting_depth(text) > max_depth:
        raise NestingTooDeep(max_depth)
    return json.loads(text)


def loads_request(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A request's JSON: as :func:`loads`, refusing also what no answer or store can hold.

    Refused as invalid JSON: a lone surrogate (``"\\ud800"``), bytes that are not UTF-8
    (RFC 8259 §8.1: JSON between systems is UTF-8; a leading byte order mark is ignored,
    as it allows). ``NaN``, ``Infinity`` and numbers that overflow a float come back as
    non-finite floats, for the request's model to refuse by name (see the module).

    Raises:
        NestingTooDeep: more than ``max_depth`` levels (a ``ValueError``).
        ValueError: not valid JSON (the message says where).
    """
    if nesting_depth(text) > max_depth:
        raise NestingTooDeep(max_depth)
    if isinstance(text, bytes) and text.startswith(_BOM):
        text = text[len(_BOM):]
    return from_json(text, allow_inf_nan=True, cache_strings="keys")
