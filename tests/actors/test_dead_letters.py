from __future__ import annotations

import pytest

from actors import DeadLetter, DeadLetterReason, DeadLetters


def test_counts_everything_but_keeps_only_recent_history() -> None:
    sink = DeadLetters(history=2)
    for n in range(5):
        sink.record(DeadLetter("a", n, DeadLetterReason.STOPPED))
    assert sink.count == 5
    assert [letter.message for letter in sink.recent()] == [3, 4]


def test_history_zero_still_counts() -> None:
    sink = DeadLetters(history=0)
    sink.record(DeadLetter("a", 1, DeadLetterReason.CRASHED))
    assert sink.count == 1
    assert sink.recent() == []


def test_negative_history_is_refused() -> None:
    with pytest.raises(ValueError, match="history must be >= 0"):
        DeadLetters(history=-1)
