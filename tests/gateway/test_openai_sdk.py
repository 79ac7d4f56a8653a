"""The official ``openai`` package, pointed at the live server, end to end."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest
from support import EXAMPLES, LiveServer

pytestmark = pytest.mark.any_backend  # the openai SDK's reading of the answers is the subject


@pytest.fixture
def sdk(live_server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=live_server.api_key,
                       max_retries=0, timeout=30) as client:
        yield client


def wait_final(sdk: openai.OpenAI, job_id: str, live_server: LiveServer) -> None:
    # The job's stream ends after its final state: reading it is the wait.
    with httpx.stream("GET", f"{live_server.url}/v1/fine_tuning/jobs/{job_id}/stream",
                      headers=live_server.headers, timeout=60) as response:
        for _ in response.iter_lines():
            pass
    assert sdk.fine_tuning.jobs.retrieve(job_id).status in {"succeeded", "cancelled", "failed"}


def test_files_jobs_events_and_checkpoints_through_the_openai_sdk(
        sdk: openai.OpenAI, live_server: LiveServer) -> None:
    with (EXAMPLES / "sample.jsonl").open("rb") as f:
        uploaded = sdk.files.create(file=f, purpose="fine-tune")
    assert uploaded.id.startswith("file-") and uploaded.bytes > 0
    assert sdk.files.retrieve(uploaded.id).filename == "sample.jsonl"

    job = sdk.fine_tuning.jobs.create(
        model="alallo/tiny-gpt2", training_file=uploaded.id, seed=3,
        method={"type": "supervised", "supervised": {"hyperparameters": {
            "n_epochs": "auto", "batch_size": 4}}},
        extra_body={"hyperparameters": {"max_steps": 12},
                    "trainer": {"type": "simulated", "step_delay_s": 0}},
    )
    assert job.object == "fine_tuning.job" and job.status == "queued"
    wait_final(sdk, job.id, live_server)
    done = sdk.fine_tuning.jobs.retrieve(job.id)
    assert done.status == "succeeded" and done.fine_tuned_model
    assert job.id in [j.id for j in sdk.fine_tuning.jobs.list(limit=100)]

    events = list(sdk.fine_tuning.jobs.list_events(job.id, limit=2))  # pages by event id
    kinds = [e.alallo_type for e in events if e.type == "message"]  # type: ignore[attr-defined]
    assert kinds[0] == "JOB_COMPLETE" and kinds[-1] == "JOB_PENDING"  # newest first
    assert {e.type for e in events} == {"message", "metrics"}
    seqs = [int(e.id.rsplit("-", 1)[1]) for e in events]
    assert seqs == sorted(set(seqs), reverse=True)

    # Saved at step 10 and at the last step; limit=1 makes the SDK page by checkpoint id.
    checkpoints = list(sdk.fine_tuning.jobs.checkpoints.list(job.id, limit=1))
    assert [c.step_number for c in checkpoints] == [12, 10]
    assert all(c.fine_tuning_job_id == job.id and c.id.startswith("ftckpt-")
               and c.metrics.step == c.step_number and c.metrics.train_loss
               and c.fine_tuned_model_checkpoint for c in checkpoints)

    running = sdk.fine_tuning.jobs.create(
        model="alallo/tiny-gpt2", training_file=uploaded.id,
        extra_body={"hyperparameters": {"max_steps": 100_000},
                    "trainer": {"type": "simulated", "step_delay_s": 0.05}})
    cancelled = sdk.fine_tuning.jobs.cancel(running.id)
    assert cancelled.status in {"cancelling", "cancelled"}
    wait_final(sdk, running.id, live_server)
    assert sdk.fine_tuning.jobs.retrieve(running.id).status == "cancelled"
    with pytest.raises(openai.ConflictError):
        sdk.fine_tuning.jobs.cancel(running.id)
    with pytest.raises(openai.NotFoundError):
        sdk.fine_tuning.jobs.retrieve("ftjob-nope")


def test_learning_rate_multiplier_scales_the_default_rate(sdk: openai.OpenAI,
                                                          live_server: LiveServer) -> None:
    with (EXAMPLES / "sample.jsonl").open("rb") as f:
        file_id = sdk.files.create(file=f, purpose="fine-tune").id
    extra = {"extra_body": {"hyperparameters": {"max_steps": 2}, "trainer": "simulated"}}

    def rate(multiplier: float | str, adapter: str = "lora") -> float:
        job = sdk.fine_tuning.jobs.create(
            model="alallo/tiny-gpt2", training_file=file_id,
            method={"type": "supervised", "supervised": {  # type: ignore[arg-type]
                "hyperparameters": {"learning_rate_multiplier": multiplier}}},
            extra_body={**extra["extra_body"], "adapter": adapter})
        wait_final(sdk, job.id, live_server)
        return float(sdk.fine_tuning.jobs.retrieve(job.id).hyperparameters
                     .model_extra["learning_rate"])  # type: ignore[index]

    assert rate(2) == pytest.approx(2e-3)  # LoRA's default 1e-3, twice
    assert rate("auto") == pytest.approx(1e-3)
    assert rate(0.5, adapter="full") == pytest.approx(5e-5)  # full fine-tuning's 1e-4, halved

    with pytest.raises(openai.BadRequestError) as refused:
        sdk.fine_tuning.jobs.create(
            model="alallo/tiny-gpt2", training_file=file_id,
            method={"type": "supervised", "supervised": {"hyperparameters": {
                "learning_rate_multiplier": 2}}},
            extra_body={"hyperparameters": {"learning_rate": 0.01}, "trainer": "simulated"})
    assert refused.value.body == {  # the SDK hands over the body's "error" object
        "code": "invalid_request", "param": "hyperparameters.learning_rate_multiplier",
        "type": "invalid_request_error",
        "message": "hyperparameters.learning_rate_multiplier: give learning_rate or "
                   "learning_rate_multiplier, not both"}
    with pytest.raises(openai.BadRequestError):
        sdk.fine_tuning.jobs.create(
            model="alallo/tiny-gpt2", training_file=file_id,
            hyperparameters={"learning_rate_multiplier": -1},  # OpenAI's older, top-level form
            extra_body={"trainer": "simulated"})
