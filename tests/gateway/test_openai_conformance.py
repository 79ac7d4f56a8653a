"""Every method of the official ``openai`` SDK that a fine-tuning user calls, unchanged,
against a live server, each answer validated with the SDK's own pydantic types, strictly
(a field missing, of the wrong type, or a warning fails it): issue 32's "done when".

Covered: ``files`` (create, retrieve, list, content, retrieve_content, wait_for_processing,
delete), ``fine_tuning.jobs`` (create, retrieve, list, list_events, checkpoints.list,
pause, resume, cancel), ``fine_tuning.checkpoints.permissions`` (create, retrieve, list,
delete), ``models`` (list, retrieve, delete), ``chat.completions.create`` (streamed and
not) and ``completions.create``. Out of scope (issue 32): stored chat completions and
``fine_tuning.alpha.graders``. docs/api.md's table lists each endpoint and field.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import openai
import pytest
from openai.types import FileDeleted, FileObject, Model, ModelDeleted
from openai.types.chat import ChatCompletion
from openai.types.completion import Completion
from openai.types.fine_tuning import FineTuningJob, FineTuningJobEvent
from openai.types.fine_tuning.checkpoints import (
    PermissionCreateResponse,
    PermissionDeleteResponse,
    PermissionListResponse,
    PermissionRetrieveResponse,
)
from openai.types.fine_tuning.jobs import FineTuningJobCheckpoint
from pydantic import BaseModel
from support import EXAMPLES, LiveServer, wait_until_sync
from test_tenants import new_account

pytestmark = pytest.mark.any_backend  # the SDK's reading of the answers is the subject

T = TypeVar("T", bound=BaseModel)
FINAL = {"succeeded", "failed", "cancelled"}


ALALLOS_OWN = {"re-scheduling": "running", "cancelling": "running", "paused": "running"}
"""alallo's statuses that OpenAI's job has not, each as the OpenAI status it stands in for:
such a job differs from OpenAI's type in its ``status`` alone (docs/api.md)."""


def strict(shape: type[T], raw: Any) -> T:
    """``raw`` (an answer's JSON) read as the SDK's ``shape``, every warning an error; a
    job in one of alallo's own statuses is read with the OpenAI status it stands in for."""
    if shape is FineTuningJob and raw.get("status") in ALALLOS_OWN:
        raw = {**raw, "status": ALALLOS_OWN[raw["status"]]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return shape.model_validate(raw)


def called(call: Callable[..., Any], shape: type[T], **kwargs: Any) -> T:
    """The SDK's ``call`` made as a user makes it (through ``with_raw_response``, so that
    its JSON is at hand), its answer parsed by the SDK and validated strictly."""
    raw = call(**kwargs)
    raw.parse()  # what the user's code gets
    return strict(shape, raw.http_response.json())


def page(call: Callable[..., Any], shape: type[T], **kwargs: Any) -> list[T]:
    """A list call's page: each item validated strictly; the page's own keys too."""
    raw = call(**kwargs)
    raw.parse()
    body = raw.http_response.json()
    assert body["object"] == "list" and isinstance(body["has_more"], bool), body
    return [strict(shape, item) for item in body["data"]]


@pytest.fixture
def server(server_factory: Callable[..., LiveServer]) -> LiveServer:
    return server_factory()


@pytest.fixture
def sdk(server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.api_key,
                       max_retries=0, timeout=60) as client:
        yield client


def finished(sdk: openai.OpenAI, job_id: str) -> FineTuningJob:
    return wait_until_sync(lambda: (job := sdk.fine_tuning.jobs.retrieve(job_id)).status
                           in FINAL and job, timeout=120, interval=0.1, what="the job ended")


def test_files_unchanged(sdk: openai.OpenAI) -> None:
    raw = sdk.files.with_raw_response
    with (EXAMPLES / "sample.jsonl").open("rb") as f:
        uploaded = called(raw.create, FileObject, file=f, purpose="fine-tune")
    assert uploaded.purpose == "fine-tune" and uploaded.bytes > 0
    assert called(raw.retrieve, FileObject, file_id=uploaded.id) == uploaded
    listed = page(raw.list, FileObject, purpose="fine-tune", order="desc", limit=5)
    assert uploaded.id in [f.id for f in listed]
    content = sdk.files.content(uploaded.id).read()
    assert content == (EXAMPLES / "sample.jsonl").read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the SDK's own deprecation
        assert sdk.files.retrieve_content(uploaded.id).encode() == content
    assert sdk.files.wait_for_processing(uploaded.id, poll_interval=0.1).status == "processed"
    deleted = called(raw.delete, FileDeleted, file_id=uploaded.id)
    assert deleted.deleted and deleted.id == uploaded.id


def test_jobs_events_checkpoints_pause_resume_and_cancel_unchanged(
        sdk: openai.OpenAI) -> None:
    jobs = sdk.fine_tuning.jobs.with_raw_response
    with (EXAMPLES / "sample.jsonl").open("rb") as f:
        file_id = sdk.files.create(file=f, purpose="fine-tune").id
    created = called(jobs.create, FineTuningJob, model="alallo/tiny-gpt2",
                     training_file=file_id, suffix="conformance", seed=5,
                     metadata={"team": "conformance"},
                     method={"type": "supervised", "supervised": {"hyperparameters": {
                         "n_epochs": 1, "batch_size": 2}}},
                     extra_body={"trainer": {"type": "simulated", "step_delay_s": 0.05}})
    assert created.method is not None and created.method.type == "supervised"
    assert created.seed == 5 and created.metadata == {"team": "conformance"}
    assert called(jobs.retrieve, FineTuningJob, fine_tuning_job_id=created.id).id == created.id
    listed = page(jobs.list, FineTuningJob, metadata={"team": "conformance"}, limit=10)
    assert [job.id for job in listed] == [created.id]

    pausing = jobs.pause(fine_tuning_job_id=created.id)
    assert pausing.parse().status == "paused"  # answered once its checkpoint is saved
    strict(FineTuningJob, pausing.http_response.json())
    resumed = called(jobs.resume, FineTuningJob, fine_tuning_job_id=created.id)
    assert resumed.status in ("queued", "running")
    done = finished(sdk, created.id)
    assert done.status == "succeeded" and done.trained_tokens
    assert done.fine_tuned_model is not None
    assert done.fine_tuned_model.split(":")[3] == "conformance"  # ft:BASE:ACCOUNT:SUFFIX:ID

    events = page(jobs.list_events, FineTuningJobEvent, fine_tuning_job_id=created.id, limit=50)
    assert [e.created_at for e in events] == sorted((e.created_at for e in events),
                                                    reverse=True)  # newest first
    assert {e.type for e in events} == {"message", "metrics"}
    checkpoints = page(jobs.checkpoints.list, FineTuningJobCheckpoint,
                       fine_tuning_job_id=created.id)
    assert checkpoints and checkpoints[0].fine_tuned_model_checkpoint.startswith(
        done.fine_tuned_model + ":ckpt-step-")

    running = sdk.fine_tuning.jobs.create(
        model="alallo/tiny-gpt2", training_file=file_id,
        extra_body={"trainer": {"type": "simulated", "step_delay_s": 0.5},
                    "hyperparameters": {"max_steps": 1000}})
    cancelling = jobs.cancel(fine_tuning_job_id=running.id)
    assert cancelling.parse().status in ("cancelling", "cancelled")
    strict(FineTuningJob, cancelling.http_response.json())
    assert finished(sdk, running.id).status == "cancelled"


def test_checkpoint_permissions_and_models_unchanged(sdk: openai.OpenAI,
                                                     server: LiveServer) -> None:
    with (EXAMPLES / "sample.jsonl").open("rb") as f:
        file_id = sdk.files.create(file=f, purpose="fine-tune").id
    job = sdk.fine_tuning.jobs.create(
        model="alallo/tiny-gpt2", training_file=file_id,
        extra_body={"trainer": {"type": "simulated", "step_delay_s": 0},
                    "hyperparameters": {"max_steps": 20}})
    done = finished(sdk, job.id)
    checkpoint = sdk.fine_tuning.jobs.checkpoints.list(job.id).data[0]
    model_id = checkpoint.fine_tuned_model_checkpoint
    other, _ = new_account(server, "other team")

    permissions = sdk.fine_tuning.checkpoints.permissions.with_raw_response
    granted = page(permissions.create, PermissionCreateResponse,
                   fine_tuned_model_checkpoint=model_id, project_ids=[other])
    assert [p.project_id for p in granted] == [other]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the SDK's: "use list"
        retrieved = called(permissions.retrieve, PermissionRetrieveResponse,
                           fine_tuned_model_checkpoint=model_id)
    assert [p.id for p in retrieved.data] == [granted[0].id]
    listed = page(permissions.list, PermissionListResponse,
                  fine_tuned_model_checkpoint=model_id, project_id=other, limit=5)
    assert [p.id for p in listed] == [granted[0].id]
    revoked = called(permissions.delete, PermissionDeleteResponse,
                     permission_id=granted[0].id, fine_tuned_model_checkpoint=model_id)
    assert revoked.deleted

    models = sdk.models.with_raw_response
    ids = [m.id for m in page(models.list, Model)]
    assert "alallo/tiny-gpt2" in ids and done.fine_tuned_model in ids
    assert called(models.retrieve, Model, model="alallo/tiny-gpt2").id == "alallo/tiny-gpt2"
    assert called(models.retrieve, Model, model=model_id).id == model_id
    assert called(models.delete, ModelDeleted, model=done.fine_tuned_model).deleted
    with pytest.raises(openai.NotFoundError):
        sdk.models.retrieve(done.fine_tuned_model)  # type: ignore[arg-type]


def test_completions_unchanged(sdk: openai.OpenAI) -> None:
    chat = called(sdk.chat.completions.with_raw_response.create, ChatCompletion,
                  model="alallo/tiny-gpt2", max_tokens=4, temperature=0, seed=1,
                  messages=[{"role": "user", "content": "Hello"}])
    assert chat.choices[0].message.role == "assistant"
    chunks = list(sdk.chat.completions.create(
        model="alallo/tiny-gpt2", max_tokens=4, temperature=0, stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "Hello"}]))
    assert chunks[-1].usage is not None and chunks[0].choices[0].delta.role == "assistant"
    text = called(sdk.completions.with_raw_response.create, Completion,
                  model="alallo/tiny-gpt2", prompt="Hello", max_tokens=4, temperature=0)
    assert text.choices[0].finish_reason in ("stop", "length")
    several = called(sdk.chat.completions.with_raw_response.create, ChatCompletion,
                     model="alallo/tiny-gpt2", max_tokens=3, n=2, logprobs=True, temperature=0,
                     top_logprobs=2, messages=[{"role": "user", "content": "Hello"}])
    assert [c.index for c in several.choices] == [0, 1]
    assert all(c.logprobs and c.logprobs.content for c in several.choices)
    with pytest.raises(openai.BadRequestError) as refused:  # nothing is silently ignored
        sdk.chat.completions.create(model="alallo/tiny-gpt2", response_format={
            "type": "json_object"}, messages=[{"role": "user", "content": "Hello"}])
    assert refused.value.param == "response_format" and \
        refused.value.type == "invalid_request_error"
