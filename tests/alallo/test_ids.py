"""Job and file ids: the documented shape, and later ids sort after earlier ones (so the
store's B-trees append them: alallo._ids)."""

from __future__ import annotations

import re

import pytest

from alallo._ids import new_id

pytestmark = pytest.mark.unit


def test_an_id_is_the_prefix_and_24_hex_digits_time_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("alallo._ids.time.time_ns", lambda: 1_796_000_000_123_456_789)
    made = new_id("ft-")
    assert re.fullmatch(r"ft-[0-9a-f]{24}", made)
    assert made[3:15] == f"{1_796_000_000_123:012x}"  # Unix time in ms
    assert new_id("ft-") != made  # the random half tells ids of one millisecond apart


def test_ids_made_later_sort_after(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(1_796_000_000_000_000_000, 1_796_000_100_000_000_000, 7_000_000))
    monkeypatch.setattr("alallo._ids.time.time_ns", lambda: next(clock))
    ids = [new_id("file-") for _ in range(1000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == 1000
