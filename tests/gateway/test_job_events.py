"""A job's events as OpenAI lists them (issue 32, part C): newest first, ``after`` an event id
paging toward older events, ``message`` and ``metrics`` events that the ``openai`` package's
own types read without a warning; and alallo's view of the same list (``order=asc``,
``type=message``, the seed's kinds in ``alallo_type``) that its client and CLI read."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.fine_tuning import FineTuningJobEvent
from support import EXAMPLES, FINAL, LiveServer, upload, wait_for_job

from alallo.client import Client
from alallo.trainers.simulated import fake_loss

pytestmark = pytest.mark.any_backend  # the list's order and pages are the subject

MAX_STEPS = 12
LOGGING_STEPS = 2


@pytest.fixture
def sdk(live_server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=live_server.api_key,
                       max_retries=0, timeout=30) as client:
        yield client


@pytest.fixture
async def trained(client: httpx.AsyncClient) -> str:
    """A succeeded job of the simulated trainer: a loss every 2 steps of 12."""
    uploaded = await upload(client, EXAMPLES / "sample.jsonl")
    created = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": uploaded.json()["id"],
        "hyperparameters": {"max_steps": MAX_STEPS, "logging_steps": LOGGING_STEPS},
        "trainer": {"type": "simulated", "step_delay_s": 0}})
    assert created.status_code == 200, created.text
    job = await wait_for_job(client, created.json()["id"], lambda j: j["status"] in FINAL,
                             timeout=60)
    assert job["status"] == "succeeded", job
    return str(job["id"])


def strictly_read(raw: dict[str, Any]) -> FineTuningJobEvent:
    """The event as the openai package reads it, any warning an error (a field of the wrong
    type warns only when the model is dumped)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        event = FineTuningJobEvent.model_validate(raw)
        event.model_dump()
        event.model_dump_json()
    return event


async def test_events_come_newest_first_with_a_metrics_event_per_logged_step(
        client: httpx.AsyncClient, sdk: openai.OpenAI, trained: str) -> None:
    whole = (await client.get(f"/v1/fine_tuning/jobs/{trained}/events",
                              params={"limit": 1000})).json()
    assert whole["object"] == "list" and whole["has_more"] is False
    events = [strictly_read(raw) for raw in whole["data"]]
    seqs = [int(e.id.removeprefix(f"{trained}-event-")) for e in events]
    assert seqs == sorted(seqs, reverse=True) and len(set(seqs)) == len(seqs)
    assert {e.type for e in events} == {"message", "metrics"}
    kinds = [raw["alallo_type"] for raw in whole["data"] if raw["type"] == "message"]
    assert kinds[0] == "JOB_COMPLETE" and kinds[-1] == "JOB_PENDING"
    assert "TRAINING_START" in kinds and "CHECKPOINT_SAVE" in kinds

    # One metrics event per logged step, newest first, OpenAI's data and message.
    metrics = [e for e in events if e.type == "metrics"]
    steps = list(range(MAX_STEPS, 0, -LOGGING_STEPS))
    assert [e.data["step"] for e in metrics] == steps  # type: ignore[index]
    for event, step in zip(metrics, steps, strict=True):
        data: dict[str, Any] = event.data  # type: ignore[assignment]
        assert data["total_steps"] == MAX_STEPS and event.level == "info"
        assert math.isclose(data["train_loss"], fake_loss(step))
        assert event.message == f"Step {step}/{MAX_STEPS}: training loss={fake_loss(step):.2f}"
    series = (await client.get(f"/v1/fine_tuning/jobs/{trained}/metrics")).json()["data"]
    assert {row["step"]: row["train_loss"] for row in series} == {
        e.data["step"]: e.data["train_loss"] for e in metrics}  # type: ignore[index]

    # The SDK pages by the last event's id, toward older events: 3 pages, nothing twice.
    per_page = math.ceil(len(events) / 3)
    first = sdk.fine_tuning.jobs.list_events(trained, limit=per_page)
    pages = list(first.iter_pages())
    assert len(pages) == 3 and [p.has_more for p in pages] == [True, True, False]
    assert [e.id for p in pages for e in p.data] == [e.id for e in events]
    assert [e.id for e in sdk.fine_tuning.jobs.list_events(trained, limit=per_page)] == [
        e.id for e in events]  # the auto-pager: the same, in the same order
    older = sdk.fine_tuning.jobs.list_events(trained, after=events[4].id, limit=2)
    assert [e.id for e in older.data] == [e.id for e in events[5:7]]


async def test_alallo_reads_the_message_events_oldest_first_as_a_log(
        client: httpx.AsyncClient, live_server: LiveServer, trained: str) -> None:
    path = f"/v1/fine_tuning/jobs/{trained}/events"
    newest_first = (await client.get(path, params={"limit": 1000})).json()["data"]
    messages = [e for e in reversed(newest_first) if e["type"] == "message"]
    page = (await client.get(path, params={"order": "asc", "type": "message",
                                           "limit": 3})).json()
    assert page["data"] == messages[:3] and page["has_more"] is True
    rest = (await client.get(path, params={"order": "asc", "type": "message", "limit": 1000,
                                           "after": page["data"][-1]["seq"]})).json()
    assert rest["data"] == messages[3:] and rest["has_more"] is False
    by_id = (await client.get(path, params={"order": "asc", "type": "message",
                                            "after": page["data"][-1]["id"]})).json()
    assert by_id["data"] == messages[3:][:20]  # an event id works as well as its seq
    metrics = (await client.get(path, params={"type": "metrics", "limit": 1000})).json()
    assert [e["type"] for e in metrics["data"]] == ["metrics"] * (MAX_STEPS // LOGGING_STEPS)

    with Client(live_server.url, api_key=live_server.api_key) as alallo:
        assert list(alallo.iter_events(trained)) == messages
    assert messages[0]["alallo_type"] == "JOB_PENDING"
    assert all(e["level"] in {"info", "warn", "error"} for e in messages)


async def test_a_bad_query_is_refused_naming_the_parameter_and_an_unknown_job_is_404(
        client: httpx.AsyncClient, trained: str) -> None:
    for params, param in [({"order": "newest"}, "order"), ({"type": "log"}, "type"),
                          ({"after": "ft-0-event-x"}, "after"), ({"after": "-1"}, "after"),
                          ({"after": "ft-0123abcd-event-3"}, "after"),  # another job's
                          ({"limit": "0"}, "limit")]:
        answer = await client.get(f"/v1/fine_tuning/jobs/{trained}/events", params=params)
        assert answer.status_code == 400, (params, answer.text)
        assert answer.json()["error"]["param"] == param, answer.text
    missing = await client.get("/v1/fine_tuning/jobs/ft-nope/events")
    assert missing.status_code == 404
