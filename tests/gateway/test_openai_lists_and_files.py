"""``jobs.list(metadata=...)``, ``files.list(purpose, order, limit, after)`` and
``files.create(expires_after=...)`` through the official ``openai`` package, its answers
read by its own types with warnings as errors."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types import FileObject
from support import EXAMPLES, LiveServer

pytestmark = pytest.mark.any_backend  # the openai SDK's reading of the answers is the subject


@pytest.fixture
def sdk(live_server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=live_server.api_key,
                       max_retries=0, timeout=30) as client:
        yield client


def strictly(kind: Any, raw: dict[str, Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return kind.model_validate(raw)


def create(sdk: openai.OpenAI, file_id: str, metadata: dict[str, str] | None) -> str:
    job = sdk.fine_tuning.jobs.create(
        model="alallo/tiny-gpt2", training_file=file_id, metadata=metadata,
        extra_body={"hyperparameters": {"max_steps": 2},
                    "trainer": {"type": "simulated", "step_delay_s": 0}})
    return job.id


def upload(sdk: openai.OpenAI, **options: Any) -> FileObject:
    with (EXAMPLES / "sample.jsonl").open("rb") as f:
        return sdk.files.create(file=f, purpose="fine-tune", **options)


def test_jobs_list_filters_on_metadata_as_the_sdk_sends_it(sdk: openai.OpenAI,
                                                           live_server: LiveServer) -> None:
    run = uuid.uuid4().hex  # the session's server holds other tests' jobs too
    file = upload(sdk)
    red = [create(sdk, file.id, {"run": run, "color": "red"}) for _ in range(3)]
    blue = create(sdk, file.id, {"run": run, "color": "blue", "q": 'a "quoted" é'})
    plain = create(sdk, file.id, None)

    # limit=1: the SDK pages with the last job's id, the filter kept on every page.
    found = [j.id for j in sdk.fine_tuning.jobs.list(metadata={"run": run, "color": "red"},
                                                     limit=1)]
    assert found == red[::-1]  # newest first
    assert [j.id for j in sdk.fine_tuning.jobs.list(metadata={"run": run})] == [
        blue, *red[::-1]]
    assert [j.id for j in sdk.fine_tuning.jobs.list(
        metadata={"run": run, "q": 'a "quoted" é'})] == [blue]
    assert list(sdk.fine_tuning.jobs.list(metadata={"run": run, "color": "green"})) == []
    assert list(sdk.fine_tuning.jobs.list(metadata={"run": run, "color": ""})) == []
    # metadata=null: the jobs created without metadata.
    raw = httpx.get(f"{live_server.url}/v1/fine_tuning/jobs",
                    params={"metadata": "null", "limit": 1000},
                    headers=live_server.headers).json()["data"]
    assert plain in [j["id"] for j in raw] and not any(j["metadata"] for j in raw)
    assert not {*red, blue} & {j["id"] for j in raw}


@pytest.mark.parametrize(("metadata", "why"), [
    ({f"k{i}": "v" for i in range(17)}, "at most 16 keys, got 17"),
    ({"k" * 65: "v"}, "keys are at most 64 characters"),
    ({"k": "v" * 513}, "values are at most 512 characters"),
])
def test_metadata_beyond_openais_limits_is_refused_naming_it(
        sdk: openai.OpenAI, metadata: dict[str, str], why: str) -> None:
    file = upload(sdk)
    with pytest.raises(openai.BadRequestError) as refused:
        create(sdk, file.id, metadata)
    error = refused.value.body
    assert isinstance(error, dict) and error["param"] == "metadata" and why in error["message"]
    with pytest.raises(openai.BadRequestError) as filtered:
        list(sdk.fine_tuning.jobs.list(metadata=metadata))
    assert filtered.value.body["param"] == "metadata"  # type: ignore[index]


def test_at_the_limits_metadata_is_kept(sdk: openai.OpenAI) -> None:
    metadata = {f"{i:02d}" + "k" * 62: "v" * 512 for i in range(16)}
    job = sdk.fine_tuning.jobs.retrieve(create(sdk, upload(sdk).id, metadata))
    assert job.metadata == metadata


def test_files_list_honours_purpose_order_limit_and_after(sdk: openai.OpenAI,
                                                          live_server: LiveServer) -> None:
    mine = [upload(sdk).id for _ in range(3)]
    newest_first = [f.id for f in sdk.files.list(limit=2) if f.id in mine]  # pages of 2
    assert newest_first == mine[::-1]
    oldest_first = [f.id for f in sdk.files.list(order="asc", limit=1) if f.id in mine]
    assert oldest_first == mine
    assert {f.purpose for f in sdk.files.list(purpose="fine-tune")} == {"fine-tune"}
    assert not [f for f in sdk.files.list(purpose="fine-tune-results") if f.id in mine]
    assert list(sdk.files.list(purpose="batch")) == []

    page = httpx.get(f"{live_server.url}/v1/files", headers=live_server.headers,
                     params={"order": "asc", "limit": 1, "after": mine[0]}).json()
    assert page["data"][0]["id"] == mine[1] and page["has_more"]
    assert page["first_id"] == page["last_id"] == mine[1]
    for raw in page["data"]:
        strictly(FileObject, raw)
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.files.list(order="sideways")  # type: ignore[arg-type]
    assert refused.value.body["param"] == "order"  # type: ignore[index]


def test_files_create_honours_expires_after(sdk: openai.OpenAI,
                                            live_server: LiveServer) -> None:
    file = upload(sdk, expires_after={"anchor": "created_at", "seconds": 3600})
    assert file.expires_at == file.created_at + 3600
    raw = httpx.get(f"{live_server.url}/v1/files/{file.id}", headers=live_server.headers)
    assert strictly(FileObject, raw.json()).expires_at == file.expires_at
    assert strictly(FileObject, upload(sdk).model_dump()).expires_at is None
    assert sdk.files.retrieve(upload(sdk).id).expires_at is None

    for expires_after, why in [({"anchor": "created_at", "seconds": 3599}, "between 3600"),
                               ({"anchor": "created_at", "seconds": 2_592_001}, "between"),
                               ({"anchor": "last_active_at", "seconds": 3600}, "anchor")]:
        with pytest.raises(openai.BadRequestError) as refused:
            upload(sdk, expires_after=expires_after)
        assert refused.value.body["param"] == "expires_after"  # type: ignore[index]
        assert why in refused.value.body["message"]  # type: ignore[index]


def test_an_upload_field_alallo_does_not_take_is_refused_naming_it(
        live_server: LiveServer) -> None:
    before = httpx.get(f"{live_server.url}/v1/files", headers=live_server.headers).json()
    with (EXAMPLES / "sample.jsonl").open("rb") as f:
        answer = httpx.post(f"{live_server.url}/v1/files", headers=live_server.headers,
                            files={"file": ("a.jsonl", f)},
                            data={"purpose": "fine-tune", "expires_in": "3600"})
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "expires_in"
    after = httpx.get(f"{live_server.url}/v1/files", headers=live_server.headers).json()
    # Nothing uploaded: what is new on the shared account is only the results files of
    # other tests' jobs that ended meanwhile (a flake once compared the two lists whole).
    new = [f for f in after["data"] if f["id"] not in {g["id"] for g in before["data"]}]
    assert all(f["purpose"] == "fine-tune-results" for f in new), new
    assert not any(f["filename"] == "a.jsonl" for f in new), new
