"""The depth limit of JSON from untrusted input (alallo/_json.py), without I/O."""

from __future__ import annotations

import json

import pytest

from alallo._json import MAX_JSON_DEPTH, NestingTooDeep, loads, nesting_depth

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("text", "depth"), [
    ("1", 0),
    ('"[{"', 0),
    ('{"a": "]]]\\"[["}', 1),
    ('["\\\\", [[]]]', 3),
    ('[[1], {"a": [2]}]', 3),
    ("[" * 10_000 + "]" * 10_000, 10_000),
])
def test_nesting_depth_counts_arrays_and_objects_not_brackets_in_strings(
        text: str, depth: int) -> None:
    assert nesting_depth(text) == depth
    assert nesting_depth(text.encode()) == depth


def test_loads_parses_up_to_the_limit_and_refuses_one_level_more_before_parsing() -> None:
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert loads(at_limit) == json.loads(at_limit)
    with pytest.raises(NestingTooDeep, match=f"deeper than {MAX_JSON_DEPTH} levels"):
        loads("[" + at_limit + "]")
    with pytest.raises(NestingTooDeep):
        loads("[" * 100_000)  # not even valid JSON: refused for its depth first
    with pytest.raises(json.JSONDecodeError):
        loads("{oops")
