"""The depth limit of JSON from untrusted input (alallo/_json.py), without I/O."""

from __future__ import annotations

import json

import pytest

from alallo._json import MAX_JSON_DEPTH, NestingTooDeep, loads, loads_request, nesting_depth

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


@pytest.mark.parametrize("text", [
    b'{"name": "\\ud800"}',            # a lone high surrogate
    b'{"name": "a\\udc00b"}',          # a lone low one
    b'{"name": "\xed\xa0\x80"}',      # one written as UTF-8 bytes
    b'{"name": "\xff"}',                # not UTF-8
    b'{"a": 1} {"b": 2}',
])
def test_a_request_that_no_answer_or_store_could_hold_is_not_json(text: bytes) -> None:
    with pytest.raises(ValueError):
        loads_request(text)


def test_a_request_is_parsed_as_the_stdlib_would_for_what_it_may_hold() -> None:
    text = '{"a": [1, 2.5, "\\u00e9\\ud83d\\ude00", null, true], "b": {"c": "\\\\ud800"}}'
    assert loads_request(text) == json.loads(text) == {
        "a": [1, 2.5, "é😀", None, True], "b": {"c": "\\ud800"}}
    assert loads_request(b"\xef\xbb\xbf[1]") == [1]  # a byte order mark is ignored
    # Non-finite numbers are parsed, for the request's model to refuse by their field.
    parsed = loads_request(b'{"x": NaN, "y": Infinity, "z": -Infinity, "w": 1e400}')
    assert [str(v) for v in parsed.values()] == ["nan", "inf", "-inf", "inf"]
    with pytest.raises(NestingTooDeep):
        loads_request("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1))
