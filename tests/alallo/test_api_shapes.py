"""The API's shapes (:mod:`alallo.api`): one owner for the server, ``/openapi.json`` and the clients.

Every shape is an answer of a route or part of one; ``/openapi.json`` renders each
under its own name with exactly its keys; every public method of both clients
names one; and the answers of a live server carry exactly their keys, nested
objects included (the server builds them in :mod:`alallo.runtime._views`).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

import pytest
from support import EXAMPLES, LiveServer
from typing_extensions import is_typeddict

import alallo
from alallo import AsyncClient, Client
from alallo import api as shapes
from alallo.client import StreamItem
from gateway._openapi import OPERATIONS, openapi_document
from gateway._openapi_events import EVENT_SHAPES

pytestmark = pytest.mark.any_backend  # the shapes are the same on every store


def hints(td: type) -> dict[str, Any]:
    """A TypedDict's key types."""
    return get_type_hints(td)


def required_keys(td: type) -> frozenset[str]:
    """The keys a TypedDict requires."""
    return frozenset(td.__required_keys__)  # type: ignore[attr-defined]


def typeddicts_in(hint: Any) -> set[type]:
    """The TypedDicts a type names (inside ``| None``, ``list[...]``, ``NotRequired``...)."""
    if is_typeddict(hint):
        return {hint}
    return {td for arg in get_args(hint) for td in typeddicts_in(arg)}


def reachable(roots: set[type]) -> set[type]:
    """The shapes ``roots`` are made of, ``roots`` included."""
    found: set[type] = set()
    todo = list(roots)
    while todo:
        td = todo.pop()
        if td not in found:
            found.add(td)
            todo += [n for hint in hints(td).values() for n in typeddicts_in(hint)]
    return found


ANSWERS = ({op.answer for op in OPERATIONS if is_typeddict(op.answer)} | {shapes.ErrorBody}
           | {shape for events in EVENT_SHAPES.values() for shape in events.values()}
           | {shapes.StreamError})
"""Every route's answer, the body of every refusal, and the data of every event of a
stream (a completion stream's error part way included)."""


def test_every_shape_is_an_answer_or_part_of_one() -> None:
    exported = {getattr(shapes, n) for n in shapes.__all__} - {shapes.Page, shapes.JobStatusName}
    assert reachable(ANSWERS) == exported


def test_the_openapi_document_has_each_shape_by_its_name_with_its_keys() -> None:
    schemas = openapi_document()["components"]["schemas"]
    for td in reachable(ANSWERS):
        schema = schemas[td.__name__]
        assert set(hints(td)) == set(schema["properties"]), td.__name__
        assert required_keys(td) == set(schema.get("required", ())), td.__name__


def test_every_public_method_of_both_clients_returns_a_result_type() -> None:
    allowed = {getattr(shapes, n) for n in shapes.__all__} | {str, bytes, StreamItem, Path}  # bytes: a file's content
    for name, method in inspect.getmembers(Client, inspect.isfunction):
        if name.startswith("_") or name == "close":
            continue
        returned = get_type_hints(method)["return"]
        if get_origin(returned) is Iterator:
            (returned,) = get_args(returned)
        assert returned in allowed, f"Client.{name} returns {returned}"
        async_hint = get_type_hints(getattr(AsyncClient, name))["return"]
        if get_origin(async_hint) is AsyncGenerator:
            async_hint = get_args(async_hint)[0]
        assert async_hint is returned, f"AsyncClient.{name} returns {async_hint}"


def test_the_types_are_exported_from_alallo() -> None:
    for name in set(shapes.__all__) - {"ErrorBody", "JobStatusName"}:
        assert getattr(alallo, name) is getattr(shapes, name)
        assert name in alallo.__all__


def assert_shape(value: Any, td: type, where: str) -> None:
    """``value`` has every required key of ``td``, no key ``td`` lacks; nested likewise."""
    assert isinstance(value, dict), where
    keys = set(value)
    assert required_keys(td) <= keys <= set(hints(td)), (
        f"{where}: missing {sorted(required_keys(td) - keys)}, "
        f"not in {td.__name__}: {sorted(keys - set(hints(td)))}")
    for key, hint in hints(td).items():
        for nested in typeddicts_in(hint):
            inner = value.get(key)
            for i, item in enumerate(inner if isinstance(inner, list) else [inner]):
                if item is not None:
                    assert_shape(item, nested, f"{where}[{key!r}][{i}]")


@pytest.fixture(scope="module")
def finished(live_server: LiveServer) -> Iterator[tuple[Client, shapes.FineTuningJob]]:
    """A client and a finished job of 10 simulated steps (a checkpoint at 10)."""
    with Client(live_server.url, api_key=live_server.api_key) as client:
        yield client, _finished_job(client)


def _finished_job(client: Client) -> shapes.FineTuningJob:
    file = client.upload_file(EXAMPLES / "sample.jsonl")
    assert_shape(file, shapes.FileObject, "upload_file()")
    job = client.create_job(model="alallo/tiny-gpt2", training_file=file["id"],
                            hyperparameters={"max_steps": 10},
                            trainer={"type": "simulated", "step_delay_s": 0})
    assert_shape(job, shapes.FineTuningJob, "create_job()")
    last = [item.data for item in client.watch(job["id"]) if item.kind == "job"][-1]
    assert last["status"] == "succeeded", last["message"]
    return typing.cast(shapes.FineTuningJob, last)


def test_a_live_servers_answers_have_exactly_the_types_keys(
        finished: tuple[Client, shapes.FineTuningJob]) -> None:
    client, job = finished
    job_id = job["id"]
    answers: list[tuple[Any, type, str]] = [
        (client.get_job(job_id), shapes.FineTuningJob, "get_job()"),
        (client.list_jobs(limit=2), shapes.JobList, "list_jobs()"),
        (client.list_files(limit=2), shapes.FileList, "list_files()"),
        (client.list_events(job_id), shapes.JobEventList, "list_events()"),
        (client.list_checkpoints(job_id), shapes.CheckpointList, "list_checkpoints()"),
        (client.read_log(job_id), shapes.LogPage, "read_log()"),
        (client.estimate(model="alallo/tiny-gpt2", training_file=job["training_file"]),
         shapes.Estimate, "estimate()"),
        (client.capacity(), shapes.Capacity, "capacity()"),
        (client.list_models(), shapes.ModelList, "list_models()"),
        (client.list_trainers(), shapes.TrainerList, "list_trainers()"),
        (client.account(), shapes.Account, "account()"),
    ]
    for value, td, where in answers:
        assert_shape(value, td, where)
    finished_job = answers[0][0]
    assert finished_job["checkpoint"] is not None and answers[4][0]["data"], (
        "a finished job has a checkpoint to check the nested shapes of")
    assert answers[3][0]["data"] and answers[5][0]["data"], "events and log lines to check"


async def test_the_async_clients_answers_have_the_same_keys(
        live_server: LiveServer, finished: tuple[Client, shapes.FineTuningJob]) -> None:
    _, job = finished
    async with AsyncClient(live_server.url, api_key=live_server.api_key) as client:
        got = await client.get_job(job["id"])
        assert_shape(got, shapes.FineTuningJob, "AsyncClient.get_job()")
        assert set(got) == set(job)
        events = [event async for event in client.iter_events(job["id"])]
    for i, event in enumerate(events):
        assert_shape(event, shapes.JobEvent, f"iter_events()[{i}]")
    assert type(got) is dict, "results stay plain dicts at runtime"
