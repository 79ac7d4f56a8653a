"""The events list's views and cursor (:mod:`alallo.runtime._event_list`), without a server:
each view is one the ``openai`` package's ``FineTuningJobEvent`` reads without a warning."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from openai.types.fine_tuning import FineTuningJobEvent

from alallo import InvalidRequest
from alallo._status import EventLevel, EventType
from alallo.jobs import Event, MetricsPoint
from alallo.runtime import views
from alallo.runtime._event_list import event_cursor, metrics_event_view

pytestmark = pytest.mark.unit


def strictly_read(raw: Any) -> FineTuningJobEvent:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        event = FineTuningJobEvent.model_validate(raw)
        event.model_dump()
    return event


def test_a_metrics_report_is_openais_metrics_event() -> None:
    point = MetricsPoint(n=7, at=100.9, step=10, epoch=0.5, train_loss=1.234,
                         train_mean_token_accuracy=0.5, valid_loss=1.3111)
    raw = metrics_event_view(point, "ft-ab", 20)
    event = strictly_read(raw)
    assert (event.id, event.type, event.level, event.created_at) == (
        "ft-ab-event-7", "metrics", "info", 100)
    assert event.message == "Step 10/20: training loss=1.23, validation loss=1.31"
    assert event.data == {"step": 10, "total_steps": 20, "train_loss": 1.234, "epoch": 0.5,
                          "train_mean_token_accuracy": 0.5, "valid_loss": 1.3111}
    final = metrics_event_view(MetricsPoint(n=9, at=1, step=20, valid_loss=1.0,
                                            full_valid_loss=0.9), "ft-ab", 20)
    assert final["message"] == "Step 20/20: validation loss=1.00, full validation loss=0.90"
    assert metrics_event_view(MetricsPoint(n=3, at=1, step=2, learning_rate=1e-4), "ft-ab",
                              20)["message"] == "Step 2/20"


@pytest.mark.parametrize(("level", "shown"), [(EventLevel.INFO, "info"),
                                              (EventLevel.WARNING, "warn"),
                                              (EventLevel.ERROR, "error")])
def test_a_job_event_is_a_message_event_with_its_kind_in_alallo_type(
        level: EventLevel, shown: str) -> None:
    raw = views.event_view(Event(seq=4, created_at=5, type=EventType.CHECKPOINT_SAVE,
                                 message="Checkpoint saved at step 10", level=level,
                                 hash="abc", step=10), "ft-ab")
    event = strictly_read(raw)
    assert (event.type, event.level, event.id) == ("message", shown, "ft-ab-event-4")
    assert (raw["alallo_type"], raw["seq"], raw["hash"], raw["step"]) == (
        "CHECKPOINT_SAVE", 4, "abc", 10)


def test_after_is_an_event_id_of_the_job_or_a_seq() -> None:
    assert event_cursor("ft-ab", "ft-ab-event-12") == 12
    assert event_cursor("ft-ab", "12") == 12
    assert event_cursor("ft-ab", None) is None and event_cursor("ft-ab", "") is None
    for bad in ("ft-cd-event-12", "ft-ab-event-", "-1", "²", "ft-ab-event-1x", "9" * 19):
        with pytest.raises(InvalidRequest, match="after must be an event id") as refused:
            event_cursor("ft-ab", bad)
        assert refused.value.param == "after"
