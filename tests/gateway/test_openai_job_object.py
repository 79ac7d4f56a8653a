"""The job object as OpenAI's ``fine_tuning.job`` (issue 32, part A): every answer that is a
job (create, GET, list, cancel, the stream's ``job`` items; queued, running, succeeded,
failed, cancelled) is read by the ``openai`` package's own ``FineTuningJob`` with warnings
as errors; a job in one of alallo's own statuses differs in ``status`` alone. ``method`` is
OpenAI's object with the values that ran (and asks for the same training when sent back),
``organization_id`` is the account, ``trained_tokens`` counts what was charged, and a job
sent without a ``seed`` gets one drawn and kept."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.fine_tuning import FineTuningJob
from pydantic import ValidationError
from support import EXAMPLES, FINAL, LiveServer, read_stream, upload, wait_for_job

pytestmark = pytest.mark.any_backend  # the job's JSON is the subject, not the store

OPENAI_STATUSES = {"validating_files", "queued", "running", "succeeded", "failed", "cancelled"}
SAMPLE_LINES = 48  # examples/sample.jsonl
FAST = {"type": "simulated", "step_delay_s": 0}


def as_openai(raw: dict[str, Any]) -> FineTuningJob:
    """``raw`` read by the SDK's type, strictly: no error, no warning on the way back out."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        job = FineTuningJob.model_validate(raw)
        job.model_dump()
        job.model_dump_json()
    return job


def assert_openais(raw: dict[str, Any]) -> None:
    """``raw`` is OpenAI's job; in alallo's own statuses, but for its ``status`` alone."""
    if raw["status"] in OPENAI_STATUSES:
        as_openai(raw)
        return
    with pytest.raises(ValidationError) as refused:
        FineTuningJob.model_validate(raw)
    assert [error["loc"] for error in refused.value.errors()] == [("status",)]
    as_openai({**raw, "status": "running"})


@pytest.fixture
def sdk(live_server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=live_server.api_key,
                       max_retries=0, timeout=30) as client:
        yield client


async def sample_file(client: httpx.AsyncClient) -> dict[str, Any]:
    uploaded = await upload(client, EXAMPLES / "sample.jsonl")
    assert uploaded.status_code == 200, uploaded.text
    return dict(uploaded.json())


async def create(client: httpx.AsyncClient, **spec: Any) -> dict[str, Any]:
    created = await client.post("/v1/fine_tuning/jobs", json={"model": "alallo/tiny-gpt2",
                                                              "trainer": FAST, **spec})
    assert created.status_code == 200, created.text
    assert_openais(created.json())
    return dict(created.json())


async def test_every_answer_that_is_a_job_is_openais_fine_tuning_job(
        client: httpx.AsyncClient) -> None:
    file = await sample_file(client)
    done = await create(client, training_file=file["id"], hyperparameters={"max_steps": 10})
    items = await read_stream(client, done["id"])
    states = [data for kind, _, data in items if kind == "job"]
    assert states[-1]["status"] == "succeeded"  # queued: the create answer; running: below
    for job in states:
        assert_openais(job)
    assert_openais((await client.get(f"/v1/fine_tuning/jobs/{done['id']}")).json())
    listed = (await client.get("/v1/fine_tuning/jobs", params={"limit": 100})).json()["data"]
    assert done["id"] in {job["id"] for job in listed}
    for job in listed:
        assert_openais(job)

    running = await create(client, training_file=file["id"], hyperparameters={
        "max_steps": 100_000}, trainer={"type": "simulated", "step_delay_s": 0.05})
    assert_openais(await wait_for_job(client, running["id"],
                                      lambda job: job["status"] == "running"))
    cancelled = await client.post(f"/v1/fine_tuning/jobs/{running['id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] in {"cancelling", "cancelled"}
    assert_openais(cancelled.json())
    final = await wait_for_job(client, running["id"], lambda job: job["status"] in FINAL)
    assert final["status"] == "cancelled"
    assert_openais(final)

    # 70B at 16-bit fits on no node of this server: the job fails at once, for free.
    failed = await create(client, training_file=file["id"], model="meta-llama/Llama-3.1-70B")
    final = await wait_for_job(client, failed["id"], lambda job: job["status"] in FINAL)
    assert final["status"] == "failed"
    read = as_openai(final)
    assert read.error is not None and read.error.code == "not_available"
    assert read.trained_tokens == 0


async def test_method_and_hyperparameters_show_what_runs(client: httpx.AsyncClient) -> None:
    file = await sample_file(client)
    # 48 examples in batches of 8: 6 steps an epoch, so 50 steps are 9 passes (the last
    # partial), whatever n_epochs said; 2e-4 is a fifth of LoRA's default rate.
    job = await create(client, training_file=file["id"], method="supervised", hyperparameters={
        "max_steps": 50, "n_epochs": 2, "batch_size": 8, "learning_rate": 2e-4})
    ran = {"n_epochs": 9, "batch_size": 8, "learning_rate_multiplier": 0.2}
    assert job["method"] == {"type": "supervised", "supervised": {"hyperparameters": ran}}
    assert ran.items() <= job["hyperparameters"].items()
    assert (job["hyperparameters"]["max_steps"], job["hyperparameters"]["learning_rate"]) == (
        50, 2e-4)
    read = as_openai(job)
    assert read.method is not None and read.method.supervised is not None
    assert read.method.supervised.hyperparameters is not None
    assert read.method.supervised.hyperparameters.n_epochs == 9
    assert read.hyperparameters.learning_rate_multiplier == 0.2

    # Nothing given: alallo's defaults, by value (never "auto" or null).
    plain = await create(client, training_file=file["id"])
    default = {"n_epochs": 3, "batch_size": 4, "learning_rate_multiplier": 1.0}
    assert plain["method"] == {"type": "supervised", "supervised": {"hyperparameters": default}}
    assert plain["hyperparameters"]["max_steps"] == 3 * math.ceil(SAMPLE_LINES / 4)

    # Sent back as a new job's method, it asks for the same training.
    again = await create(client, training_file=file["id"], method=plain["method"])
    assert again["method"] == plain["method"]
    assert again["hyperparameters"] == plain["hyperparameters"]


async def test_a_dpo_jobs_method_is_openais_dpo_object(client: httpx.AsyncClient) -> None:
    pairs = b"".join(
        b'{"input": {"messages": [{"role": "user", "content": "Q%d"}]}, '
        b'"preferred_output": [{"role": "assistant", "content": "good"}], '
        b'"non_preferred_output": [{"role": "assistant", "content": "bad"}]}\n' % i
        for i in range(8))
    file = (await upload(client, content=pairs, name="pairs.jsonl")).json()
    job = await create(client, training_file=file["id"], method={
        "type": "dpo", "dpo": {"hyperparameters": {"beta": 0.3, "n_epochs": 2}}})
    assert job["method"] == {"type": "dpo", "dpo": {"hyperparameters": {
        "n_epochs": 2, "batch_size": 4, "learning_rate_multiplier": 1.0, "beta": 0.3}}}
    read = as_openai(job)
    assert read.method is not None and read.method.type == "dpo"
    assert read.method.dpo is not None and read.method.dpo.hyperparameters is not None
    assert read.method.dpo.hyperparameters.beta == 0.3 and read.method.supervised is None
    final = await wait_for_job(client, job["id"], lambda j: j["status"] in FINAL)
    assert final["status"] == "succeeded", final["error"]
    assert final["method"] == job["method"]


async def test_organization_seed_and_trained_tokens(client: httpx.AsyncClient) -> None:
    account = (await client.get("/v1/account")).json()
    file = await sample_file(client)
    first = await create(client, training_file=file["id"], hyperparameters={"max_steps": 10})
    second = await create(client, training_file=file["id"], hyperparameters={"max_steps": 10})
    seeded = await create(client, training_file=file["id"], seed=42,
                          hyperparameters={"max_steps": 10})
    assert first["organization_id"] == account["id"]
    # A job sent without a seed trains with one drawn for it and kept: two such jobs differ.
    assert first["seed"] != second["seed"]
    assert all(0 <= job["seed"] < 2**31 for job in (first, second))
    assert seeded["seed"] == 42
    assert first["trained_tokens"] is None  # not final yet

    final = await wait_for_job(client, first["id"], lambda j: j["status"] in FINAL)
    assert final["status"] == "succeeded", final["error"]
    assert final["seed"] == first["seed"]
    # Charged as 10 steps of 4 examples of the file's average length (one token a byte on
    # the tiny model's tokenizer).
    per_step = round(4 * file["bytes"] / file["line_count"], 3)
    assert final["trained_tokens"] == round(10 * per_step)
    assert as_openai(final).trained_tokens == final["trained_tokens"]


def test_the_openai_sdk_reads_the_method_object(sdk: openai.OpenAI) -> None:
    with (EXAMPLES / "sample.jsonl").open("rb") as f:
        file = sdk.files.create(file=f, purpose="fine-tune")
    job = sdk.fine_tuning.jobs.create(
        model="alallo/tiny-gpt2", training_file=file.id,
        method={"type": "supervised", "supervised": {"hyperparameters": {
            "n_epochs": 1, "batch_size": 8, "learning_rate_multiplier": 2.0}}},
        extra_body={"trainer": FAST})
    assert job.method is not None and job.method.type == "supervised"
    assert job.method.supervised is not None
    hyperparameters = job.method.supervised.hyperparameters
    assert hyperparameters is not None
    assert (hyperparameters.n_epochs, hyperparameters.batch_size,
            hyperparameters.learning_rate_multiplier) == (1, 8, 2.0)
    assert job.hyperparameters.n_epochs == 1 and isinstance(job.seed, int)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        job.model_dump()  # a method that is no object warned here
    retrieved = sdk.fine_tuning.jobs.retrieve(job.id)
    assert retrieved.method == job.method and retrieved.seed == job.seed
