from __future__ import annotations

import math
import random

import pytest

from actors import Backoff, Restart, RestartIntensity
from actors._restart import _RestartWindow, restarts


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_restarts": -1}, "max_restarts must be >= 0"),
        ({"within": 0.0}, "within must be a positive"),
        ({"within": -1.0}, "within must be a positive"),
        ({"within": math.inf}, "within must be a positive"),
        ({"within": math.nan}, "within must be a positive"),
    ],
)
def test_intensity_rejects_bad_arguments(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RestartIntensity(**kwargs)  # type: ignore[arg-type]


def test_intensity_is_a_frozen_value_with_a_readable_repr() -> None:
    intensity = RestartIntensity(max_restarts=3, within=5.0)
    assert repr(intensity) == "RestartIntensity(max_restarts=3, within=5.0)"
    assert intensity == RestartIntensity()
    with pytest.raises(AttributeError):
        intensity.max_restarts = 4  # type: ignore[misc]


def test_window_admits_max_restarts_then_refuses() -> None:
    window = _RestartWindow(RestartIntensity(max_restarts=2, within=5.0))
    assert window.admit(0.0)
    assert window.admit(1.0)
    assert not window.admit(2.0)


def test_window_forgets_restarts_older_than_the_window() -> None:
    window = _RestartWindow(RestartIntensity(max_restarts=1, within=5.0))
    assert window.admit(0.0)
    assert window.admit(5.0)  # the restart at 0.0 has left the window
    assert not window.admit(9.0)


def test_zero_restarts_refuses_the_first() -> None:
    assert not _RestartWindow(RestartIntensity(max_restarts=0)).admit(0.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial": -1.0},
        {"cap": math.inf},
        {"factor": 0.5},
        {"jitter": 1.5},
        {"jitter": -0.1},
        {"reset_after": math.nan},
    ],
)
def test_backoff_rejects_bad_arguments(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)


def test_default_backoff_does_not_wait() -> None:
    assert Backoff().delay(10) == 0.0


def test_backoff_grows_exponentially_up_to_the_cap() -> None:
    backoff = Backoff(initial=0.1, factor=2.0, cap=1.0, jitter=0.0)
    assert [backoff.delay(n) for n in range(6)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert backoff.delay(10_000) == 1.0


def test_backoff_jitter_only_shortens_within_its_fraction() -> None:
    backoff = Backoff(initial=1.0, factor=1.0, cap=1.0, jitter=0.5)
    rng = random.Random(7)
    delays = [backoff.delay(0, rng=rng) for _ in range(200)]
    assert all(0.5 <= d <= 1.0 for d in delays)
    assert len(set(delays)) > 100


@pytest.mark.parametrize(
    ("restart", "crashed", "expected"),
    [
        (Restart.PERMANENT, True, True),
        (Restart.PERMANENT, False, True),
        (Restart.TRANSIENT, True, True),
        (Restart.TRANSIENT, False, False),
        (Restart.TEMPORARY, True, False),
        (Restart.TEMPORARY, False, False),
    ],
)
def test_restart_types_decide_as_otp_does(restart: Restart, crashed: bool, expected: bool) -> None:
    assert restarts(restart, crashed=crashed) is expected
