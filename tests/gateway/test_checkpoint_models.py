"""OpenAI's model ids and checkpoint models, through the official ``openai`` package (issue 32).

A job's model is ``ft:BASE:ACCOUNT:SUFFIX:JOB``; each checkpoint the server keeps (a job's
newest three, as OpenAI keeps) is a model ``…:ckpt-step-N``: listed as a checkpoint's
``fine_tuned_model_checkpoint``, retrieved and deleted with ``models``, a job's starting
``model``, and asked in chat and text completions (the real tiny TRL job at the end). Every
answer is read with the SDK's own types, warnings as errors. Sharing a checkpoint:
test_checkpoint_permissions.py.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types import Model, ModelDeleted
from openai.types.chat import ChatCompletion
from openai.types.completion import Completion
from openai.types.fine_tuning.jobs import FineTuningJobCheckpoint
from support import EXAMPLES, LiveServer, wait_final
from test_tenants import new_account

from alallo.runtime import parse_model_id
from alallo.runtime._model_ids import ModelRef

pytestmark = pytest.mark.any_backend  # ids and files on disk: the store is not the subject

TINY = "alallo/tiny-gpt2"


def strict(shape: Any, raw: Any) -> Any:
    """``raw`` read by the SDK's type ``shape``, any warning (a field of the wrong type, an
    unknown status) an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return shape.model_validate(raw)


def sdk_for(server: LiveServer, key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=key or server.api_key,
                         max_retries=0, timeout=120)


def simulated_job(server: LiveServer, sdk: openai.OpenAI, model: str, steps: int, *,
                  key: str | None = None, **spec: Any) -> dict[str, Any]:
    """A simulated job of ``steps`` steps created with the SDK, once it ended."""
    with (EXAMPLES / "sample.jsonl").open("rb") as f:
        file_id = sdk.files.create(file=f, purpose="fine-tune").id
    job = sdk.fine_tuning.jobs.create(
        model=model, training_file=file_id, **spec,
        extra_body={"hyperparameters": {"max_steps": steps},
                    "trainer": {"type": "simulated", "step_delay_s": 0}})
    return wait_final(server, job.id, key)


@pytest.fixture(scope="module")
def sdk(live_server: LiveServer) -> Iterator[openai.OpenAI]:
    with sdk_for(live_server) as client:
        yield client


@pytest.fixture(scope="module")
def finished(live_server: LiveServer, sdk: openai.OpenAI) -> dict[str, Any]:
    """A simulated job of 35 steps with suffix ``mine``: checkpoints at 10, 20, 30 and 35,
    the newest three kept."""
    job = simulated_job(live_server, sdk, TINY, 35, suffix="mine")
    assert job["status"] == "succeeded", (job["message"], job["error"])
    return job


def account_of(server: LiveServer, key: str | None = None) -> str:
    return str(httpx.get(f"{server.url}/v1/account", timeout=30, headers={
        "Authorization": f"Bearer {key or server.api_key}"}).json()["id"])


def test_ids_are_read_in_every_form() -> None:
    hex_ = "0190a" + "1" * 19
    assert parse_model_id(f"ft:alallo--tiny-gpt2:acct-1:mine:{hex_}") == ModelRef(
        f"ft-{hex_}", None)
    assert parse_model_id(f"ft:alallo--tiny-gpt2:acct-1::{hex_}:ckpt-step-20") == ModelRef(
        f"ft-{hex_}", 20)
    assert parse_model_id(f"ft:alallo--tiny-gpt2:acct-1-mine:{hex_}") == ModelRef(
        f"ft-{hex_}", None), "the four fields of earlier versions"
    for other in (TINY, "ft:a:b", f"ft:a:b:c:{hex_}:step-3", f"ft:a:b:c:{hex_}:ckpt-step-x",
                  "ft:a:b:c:XYZ", f"ft:a:b:c:d:e:{hex_}"):
        assert parse_model_id(other) is None, other


def test_a_jobs_model_and_checkpoints_have_openai_ids(
        live_server: LiveServer, sdk: openai.OpenAI, finished: dict[str, Any]) -> None:
    account, hex_ = account_of(live_server), finished["id"].removeprefix("ft-")
    model = finished["fine_tuned_model"]
    assert model == f"ft:alallo--tiny-gpt2:{account}:mine:{hex_}"
    raw = sdk.fine_tuning.jobs.checkpoints.with_raw_response.list(finished["id"]).http_response
    checkpoints = [strict(FineTuningJobCheckpoint, c) for c in raw.json()["data"]]
    assert [c.step_number for c in checkpoints] == [35, 30, 20], "OpenAI keeps the last 3"
    assert [c.fine_tuned_model_checkpoint for c in checkpoints] == [
        f"{model}:ckpt-step-{step}" for step in (35, 30, 20)]

    # Every model retrieves as OpenAI's Model, the catalogue's ids with a "/" included.
    for name in (model, *(c.fine_tuned_model_checkpoint for c in checkpoints), TINY):
        answer = sdk.models.with_raw_response.retrieve(name).http_response
        found = strict(Model, answer.json())
        assert found.id == name and found.created > (-1 if name == TINY else 0), found
    assert sdk.models.retrieve(model).owned_by == account
    assert sdk.models.retrieve(f"{model}:ckpt-step-20").created >= finished["created_at"]
    listed = sdk.models.with_raw_response.list().http_response.json()["data"]
    assert all(strict(Model, m) for m in listed) and model in [m["id"] for m in listed]
    # The id earlier versions gave the model still names it.
    legacy = f"ft:alallo--tiny-gpt2:{account}-mine:{hex_}"
    assert sdk.models.retrieve(legacy).id == model

    for gone in (f"{model}:ckpt-step-10",  # pruned: 3 are kept
                 f"{model}:ckpt-step-21",  # never saved
                 f"ft:alallo--tiny-gpt2:{account}:other:{hex_}:ckpt-step-20",  # not its id
                 "alallo/no-such-model"):
        with pytest.raises(openai.NotFoundError):
            sdk.models.retrieve(gone)


def test_a_job_starts_from_a_checkpoint_model(
        live_server: LiveServer, sdk: openai.OpenAI, finished: dict[str, Any]) -> None:
    checkpoint = f"{finished['fine_tuned_model']}:ckpt-step-20"
    job = simulated_job(live_server, sdk, checkpoint, 2)
    assert job["status"] == "succeeded", job
    assert job["model"] == checkpoint
    assert job["fine_tuned_model"].startswith("ft:alallo--tiny-gpt2:"), "named by its base"
    with pytest.raises(openai.BadRequestError) as refused:  # a pruned checkpoint
        sdk.fine_tuning.jobs.create(model=f"{finished['fine_tuned_model']}:ckpt-step-10",
                                    training_file=job["training_file"])
    assert refused.value.body["param"] == "model"  # type: ignore[index]


def test_a_checkpoint_model_is_deleted_once_its_job_ended(
        live_server: LiveServer, sdk: openai.OpenAI, finished: dict[str, Any]) -> None:
    checkpoint = f"{finished['fine_tuned_model']}:ckpt-step-30"
    deleted = sdk.models.with_raw_response.delete(checkpoint).http_response.json()
    assert strict(ModelDeleted, deleted).deleted is True and deleted["id"] == checkpoint
    with pytest.raises(openai.NotFoundError):
        sdk.models.retrieve(checkpoint)
    with pytest.raises(openai.NotFoundError):
        sdk.models.delete(checkpoint)
    steps = [c.step_number for c in sdk.fine_tuning.jobs.checkpoints.list(finished["id"])]
    assert steps == [35, 20]
    latest = f"{finished['fine_tuned_model']}:ckpt-step-35"  # the job's latest, too
    assert sdk.models.delete(latest).deleted
    with pytest.raises(openai.NotFoundError):
        sdk.models.retrieve(latest)
    steps = [c.step_number for c in sdk.fine_tuning.jobs.checkpoints.list(finished["id"])]
    assert steps == [20]
    assert sdk.models.retrieve(finished["fine_tuned_model"]).id, "the job's model stays"

    # A live job may resume from its checkpoints: they are not deleted under it (409).
    with (EXAMPLES / "sample.jsonl").open("rb") as f:
        file_id = sdk.files.create(file=f, purpose="fine-tune").id
    live = sdk.fine_tuning.jobs.create(model=TINY, training_file=file_id, extra_body={
        "hyperparameters": {"max_steps": 100_000},
        "trainer": {"type": "simulated", "step_delay_s": 0.01}})
    try:
        with httpx.stream("GET", f"{live_server.url}/v1/fine_tuning/jobs/{live.id}/stream",
                          headers=live_server.headers, timeout=60) as response:
            for line in response.iter_lines():  # until its first checkpoint is saved
                if line.startswith("data:") and '"checkpoint":{' in line.replace(" ", ""):
                    break
        running = sdk.fine_tuning.jobs.retrieve(live.id)
        assert running.status == "running", running.status
        latest = sdk.fine_tuning.jobs.checkpoints.list(live.id).data[0]
        assert latest.fine_tuned_model_checkpoint == (
            f"ft:alallo--tiny-gpt2:{account_of(live_server)}::{live.id.removeprefix('ft-')}"
            f":ckpt-step-{latest.step_number}"), "no suffix: an empty field, as OpenAI's"
        with pytest.raises(openai.ConflictError):
            sdk.models.delete(latest.fine_tuned_model_checkpoint)
        assert sdk.models.retrieve(latest.fine_tuned_model_checkpoint).id
    finally:
        sdk.fine_tuning.jobs.cancel(live.id)
        wait_final(live_server, live.id)


# -- a real model: chatting with a checkpoint ------------------------------------------

@pytest.fixture(scope="module")
def trained(live_server: LiveServer, sdk: openai.OpenAI) -> dict[str, Any]:
    """A tiny TRL job of 4 steps: its checkpoint at step 4 is an adapter."""
    with (EXAMPLES / "sample.jsonl").open("rb") as f:
        file_id = sdk.files.create(file=f, purpose="fine-tune").id
    job = sdk.fine_tuning.jobs.create(model=TINY, training_file=file_id, extra_body={
        "hyperparameters": {"max_steps": 4, "batch_size": 2}})
    final = wait_final(live_server, job.id)
    assert final["status"] == "succeeded", (final["message"], final["error"])
    return final


@pytest.mark.slow
def test_a_checkpoint_model_answers_chat_and_text_and_a_shared_account_may_ask_it(
        live_server: LiveServer, sdk: openai.OpenAI, trained: dict[str, Any]) -> None:
    (checkpoint,) = [c.fine_tuned_model_checkpoint
                     for c in sdk.fine_tuning.jobs.checkpoints.list(trained["id"])]
    assert checkpoint == f"{trained['fine_tuned_model']}:ckpt-step-4"
    chat = sdk.chat.completions.with_raw_response.create(
        model=checkpoint, messages=[{"role": "user", "content": "Hello"}], max_tokens=4,
        temperature=0).http_response.json()
    assert strict(ChatCompletion, chat).model == checkpoint
    text = sdk.completions.with_raw_response.create(
        model=checkpoint, prompt="Hello", max_tokens=4, temperature=0).http_response.json()
    assert strict(Completion, text).model == checkpoint

    other_id, other_key = new_account(live_server, "checkpoint-user")
    with sdk_for(live_server, other_key) as other:
        with pytest.raises(openai.NotFoundError):  # not shared yet: as if none
            other.completions.create(model=checkpoint, prompt="Hello", max_tokens=2)
        shared = sdk.fine_tuning.checkpoints.permissions.create(checkpoint,
                                                                project_ids=[other_id])
        answer = other.completions.create(model=checkpoint, prompt="Hello", max_tokens=4,
                                          temperature=0)
        assert answer.choices[0].text == text["choices"][0]["text"], "the same weights"
        sdk.fine_tuning.checkpoints.permissions.delete(
            shared.data[0].id, fine_tuned_model_checkpoint=checkpoint)
        with pytest.raises(openai.NotFoundError):
            other.chat.completions.create(model=checkpoint, max_tokens=2,
                                          messages=[{"role": "user", "content": "Hi"}])
