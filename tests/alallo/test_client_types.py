"""The clients' result types (``alallo.client._types``) against ``/openapi.json`` and a live server.

The TypedDicts are written out by hand (alallo may not import the gateway's
pydantic models), so these tests keep them honest: every type's keys, and
which of them are required, equal its schema's properties in the server's
OpenAPI document, following nested objects from each answer down; every
public method of both clients names one of them; and the answers of a live
server carry exactly their keys, nested objects included.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import AsyncGenerator, Iterator
from types import GenericAlias
from typing import Any, get_args, get_origin, get_type_hints

import pytest
from support import EXAMPLES, LiveServer
from typing_extensions import is_typeddict

import alallo
from alallo import AsyncClient, Client
from alallo import api as shapes
from alallo.client import StreamItem
from gateway._openapi import openapi_document

ANSWERS: dict[type, str] = {
    shapes.FileObject: "FileObject",
    shapes.FileList: "FileList",
    shapes.FileDeleted: "FileDeleted",
    shapes.ModelList: "ModelList",
    shapes.TrainerList: "TrainerList",
    shapes.Capacity: "Capacity",
    shapes.NodeDrain: "NodeDrain",
    shapes.Estimate: "Estimate",
    shapes.FineTuningJob: "JobObject",
    shapes.JobList: "JobList",
    shapes.JobEventList: "EventList",
    shapes.CheckpointList: "JobCheckpointList",
    shapes.LogPage: "LogPage",
    shapes.Health: "Health",
    shapes.DashboardLink: "DashboardLink",
}
"""Each answer's TypedDict and its schema in /openapi.json; nested ones are found from these."""


def hints(td: type) -> dict[str, Any]:
    """A TypedDict's key types, with ``Page[X]``'s ``T`` read as ``X``."""
    found = get_type_hints(td)
    for base in getattr(td, "__orig_bases__", ()):
        if get_origin(base) is shapes.Page:
            (item,) = get_args(base)
            page_items = GenericAlias(list, (shapes.T,))
            found = {key: GenericAlias(list, (item,)) if hint == page_items else hint
                     for key, hint in found.items()}
    return found


def required_keys(td: type) -> frozenset[str]:
    """The keys a TypedDict requires."""
    return frozenset(td.__required_keys__)


def typeddicts_in(hint: Any) -> set[type]:
    """The TypedDicts a type names (inside ``| None``, ``list[...]``, ``NotRequired``...)."""
    if is_typeddict(hint):
        return {hint}
    return {td for arg in get_args(hint) for td in typeddicts_in(arg)}


def refs_in(schema: Any) -> set[str]:
    """The schema names a JSON Schema refers to (inside ``anyOf``, ``items``...)."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        own = {ref.rsplit("/", 1)[-1]} if isinstance(ref, str) else set()
        return own | {name for value in schema.values() for name in refs_in(value)}
    if isinstance(schema, list):
        return {name for value in schema for name in refs_in(value)}
    return set()


@pytest.fixture(scope="module")
def schemas() -> dict[str, Any]:
    return openapi_document()["components"]["schemas"]  # type: ignore[no-any-return]


def pairs(schemas: dict[str, Any]) -> dict[type, str]:
    """Every TypedDict reachable from :data:`ANSWERS`, with its schema's name."""
    found: dict[type, str] = {}
    todo = list(ANSWERS.items())
    while todo:
        td, name = todo.pop()
        if td in found:
            assert found[td] == name, f"{td.__name__} stands for {found[td]} and {name}"
            continue
        found[td] = name
        properties = schemas[name]["properties"]
        for key, hint in hints(td).items():
            nested, named = typeddicts_in(hint), refs_in(properties.get(key))
            assert len(nested) == len(named) <= 1, (td.__name__, key, nested, named)
            todo += zip(nested, named, strict=True)
    return found


def test_every_type_has_its_schemas_keys_and_required_keys(schemas: dict[str, Any]) -> None:
    found = pairs(schemas)
    for td, name in found.items():
        schema = schemas[name]
        assert set(hints(td)) == set(schema["properties"]), name
        assert required_keys(td) == set(schema.get("required", ())), name
    exported = {getattr(shapes, n) for n in shapes.__all__} - {shapes.Page, shapes.ErrorBody,
                                                               shapes.JobStatusName}
    assert exported == set(found), "a result type that no answer uses"


def test_every_public_method_of_both_clients_returns_a_result_type() -> None:
    allowed = {getattr(shapes, n) for n in shapes.__all__} | {str, StreamItem}
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
