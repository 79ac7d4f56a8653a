"""Stored rows that no longer validate are repaired where they are read (``alallo.store._tolerant``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import structlog

from alallo import Event, Job, LogLine
from alallo.jobs._job import Progress
from alallo.jobs._plan import Plan
from alallo.jobs._spec import JobSpec
from alallo._status import EventType
from alallo.store._tolerant import UnreadableRow, read_item, read_job
from alallo.jobs._timetext import TimeRange


def stored(**spec: Any) -> dict[str, Any]:
    """A job's state as the store keeps it (JSON-ready), with ``spec`` on top."""
    job = Job(id="ft-1", account_id="acct-1", max_steps=10, created_at=1,
              spec=JobSpec(model="alallo/tiny-gpt2", training_file="file-1"),
              progress=Progress(max_steps=10), price_estimate=(0.0, 1.0),
              plan=Plan(device_type="cpu", devices=1, memory_gb=1, price_per_hour=0.1,
                        step_time_s=1, startup_s=1),
              estimate=TimeRange(low_s=1, high_s=2))
    data: dict[str, Any] = json.loads(job.model_dump_json())
    data["spec"].update(spec)
    return data


def test_a_valid_row_reads_as_it_is() -> None:
    data = stored()
    assert read_job(json.dumps(data)).model_dump(mode="json") == data


def test_an_integration_without_a_key_is_left_out_and_the_rest_is_kept() -> None:
    good = {"type": "wandb", "wandb": {"project": "keep", "api_key": "k" * 40}}
    bad = {"type": "wandb", "wandb": {"project": "old", "api_key": ""}}
    with structlog.testing.capture_logs() as logs:
        job = read_job(json.dumps(stored(integrations=[bad, good], name="mine")))
        read_job(json.dumps(stored(integrations=[bad])))  # the same job again: logged once
    assert [i.wandb.project for i in job.spec.integrations] == ["keep"]
    assert job.spec.name == "mine" and job.id == "ft-1"
    assert [entry["event"] for entry in logs] == ["store.row_repaired"]
    assert logs[0]["dropped"] == ["spec.integrations.0"]


def test_a_field_that_no_longer_validates_falls_back_to_its_default() -> None:
    job = read_job(json.dumps(stored(goal="cheapest_please", trainer={"type": "simulated",
                                                                       "step_delay_s": -1})))
    assert job.spec.goal == "lowest_cost" and job.spec.trainer == "trl"


def test_a_row_without_what_makes_a_job_is_unreadable() -> None:
    data = stored()
    del data["id"], data["spec"]["model"]
    with pytest.raises(UnreadableRow):
        read_job(json.dumps(data))


@pytest.mark.parametrize("cut", [0, 1, 40, -1])
def test_a_row_cut_short_is_unreadable_not_an_error_of_the_reader(cut: int) -> None:
    data = stored()
    data["id"] = f"ft-cut-{cut}"
    text = json.dumps(data)
    with structlog.testing.capture_logs() as logs:
        with pytest.raises(UnreadableRow, match="cannot be read") as info:
            read_job(text[:cut])
    if cut in (0, 1):
        assert info.value.job_id is None
    else:
        assert info.value.job_id == data["id"]
        assert [entry["event"] for entry in logs] == ["store.row_unreadable"]


def test_an_event_of_a_type_that_is_gone_is_left_out() -> None:
    good = Event(seq=1, created_at=1, type=EventType.JOB_PENDING, message="created")
    assert read_item(Event, good.model_dump(mode="json"), job_id="ft-1") == good
    gone = {**good.model_dump(mode="json"), "type": "NO_SUCH_EVENT"}
    assert read_item(Event, gone, job_id="ft-1") is None
    assert read_item(LogLine, {"n": "x"}, job_id="ft-1") is None
