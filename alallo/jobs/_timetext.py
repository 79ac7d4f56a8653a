"""Time ranges and how the seeds write them ("40 min to 1.3 h")."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["ESTIMATE_MINUTES_BELOW_S", "TIME_LEFT_MINUTES_BELOW_S", "TimeRange", "format_duration"]

ESTIMATE_MINUTES_BELOW_S = 3600.0
"""Estimates write times under an hour in minutes (the seeds: "40 min to 1.3 h")."""
TIME_LEFT_MINUTES_BELOW_S = 5400.0
"""Time left writes times under 1.5 hours in minutes, longer ones in hours (the seeds)."""


_ROUNDINGS: dict[str, Callable[[float], int]] = {
    "nearest": round, "down": math.floor, "up": math.ceil}


def format_duration(
    seconds: float,
    *,
    minutes_below: float = TIME_LEFT_MINUTES_BELOW_S,
    rounding: Literal["nearest", "down", "up"] = "nearest",
) -> str:
    """Write a duration as the seeds do: ``"40 min"`` or ``"1.3 h"``.

    Times under ``minutes_below`` seconds are whole minutes (``"< 1 min"``
    under half a minute, or under a minute when rounding down); longer ones
    are hours with one decimal. ``rounding`` says which way a value between
    two steps goes: a range rounds its low end down and its high end up, so
    that the text still holds the range (:attr:`TimeRange.text`).
    """
    round_to = _ROUNDINGS[rounding]
    if seconds < (60 if rounding == "down" else 30):
        return "< 1 min"
    if seconds < minutes_below:
        return f"{max(1, round_to(_tidy(seconds / 60)))} min"
    return f"{round_to(_tidy(seconds / 360)) / 10:.1f} h"


def _tidy(value: float) -> float:
    # 4680 s is 13.000000000000002 tenths of an hour in floating point: that is 1.3 h, not 1.4.
    return round(value, 6)


class TimeRange(BaseModel):
    """A range of seconds with its text, e.g. ``low_s=2400, high_s=4680, "40 min to 1.3 h"``."""

    model_config = ConfigDict(frozen=True)

    low_s: float
    high_s: float
    basis: Literal["estimate", "pace"] = "estimate"
    minutes_below: float = ESTIMATE_MINUTES_BELOW_S

    @property
    def text(self) -> str:
        """The range as the seeds write it, low end rounded down and high end up.

        ``"< 1 min"`` when it all lies under a minute; one value when both
        ends read the same.
        """
        if self.high_s < 60:
            return "< 1 min"
        low = format_duration(max(self.low_s, 60.0), minutes_below=self.minutes_below,
                              rounding="down")
        high = format_duration(self.high_s, minutes_below=self.minutes_below, rounding="up")
        return low if low == high else f"{low} to {high}"
