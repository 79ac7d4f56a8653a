"""What an engine generates, for Prometheus: tokens in all, and tokens per second lately."""

from __future__ import annotations

import time
from collections import deque

__all__ = ["TokenMeter"]


class TokenMeter:
    """Generated tokens: a running total and the rate over the last ``window_s`` seconds.

    Args:
        window_s: the window of :attr:`per_second` (s).
    """

    def __init__(self, window_s: float = 10.0) -> None:
        self.total = 0
        """Tokens generated since the server started."""
        self._window_s = window_s
        self._recent: deque[tuple[float, int]] = deque()

    def add(self, tokens: int) -> None:
        """Count ``tokens`` generated now."""
        if tokens > 0:
            self.total += tokens
            self._recent.append((time.monotonic(), tokens))

    @property
    def per_second(self) -> float:
        """Tokens per second over the last ``window_s`` seconds."""
        since = time.monotonic() - self._window_s
        while self._recent and self._recent[0][0] < since:
            self._recent.popleft()
        return sum(tokens for _, tokens in self._recent) / self._window_s
