"""The job object's OpenAI fields, from a :class:`~alallo.jobs._job.Job` alone (no server):
alallo's own statuses differ from OpenAI's ``FineTuningJob`` in ``status`` alone;
``n_epochs`` and ``learning_rate_multiplier`` as they run; ``trained_tokens`` as charged;
jobs stored before these were recorded still answer as OpenAI's job."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from openai.types.fine_tuning import FineTuningJob
from pydantic import ValidationError

from alallo import JobSpec, JobStatus
from alallo.capacity._catalogue import Catalogue
from alallo.capacity._plans import plan_options
from alallo.capacity._pool import NodeSpec, Pool
from alallo.jobs._estimate import estimate_price, estimate_time
from alallo.jobs._job import Job, JobError, Progress
from alallo.jobs._lifecycle import Created, apply
from alallo.runtime import views

pytestmark = pytest.mark.unit

T0 = 1_700_000_000.0
LOCAL = Pool([NodeSpec(name="local", device="cpu", count=1)])
OPENAI_STATUSES = {"validating_files", "queued", "running", "succeeded", "failed", "cancelled"}


def job_of(*, max_steps: int = 100, steps_per_epoch: int | None = 12, **spec: Any) -> Job:
    job_spec = JobSpec.model_validate({"model": "alallo/tiny-gpt2", "training_file": "file-1",
                                       **spec})
    plan = plan_options(Catalogue().resolve(job_spec.model), job_spec, LOCAL,
                        max_steps=max_steps, tokens_per_example=50).pick(job_spec.goal)
    job = Job(id="ft-" + "1" * 24, account_id="acct-7", spec=job_spec, max_steps=max_steps,
              progress=Progress(max_steps=max_steps), plan=plan, estimate=estimate_time(plan),
              price_estimate=estimate_price(plan), created_at=int(T0),
              steps_per_epoch=steps_per_epoch)
    return apply(job, Created(now=T0)).job


def raw(job: Job) -> dict[str, Any]:
    return dict(json.loads(json.dumps(views.job_view(job, now=T0 + 30))))


def read(answer: dict[str, Any]) -> FineTuningJob:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        job = FineTuningJob.model_validate(answer)
        job.model_dump()
    return job


@pytest.mark.parametrize("status", list(JobStatus))
def test_every_status_is_openais_job_and_alallos_own_differ_in_status_alone(
        status: JobStatus) -> None:
    job = job_of(seed=5).model_copy(update={"status": status})
    answer = raw(job)
    if status.value in OPENAI_STATUSES:
        assert read(answer).status == status.value
        return
    with pytest.raises(ValidationError) as refused:
        FineTuningJob.model_validate(answer)
    assert [error["loc"] for error in refused.value.errors()] == [("status",)]
    read({**answer, "status": "running"})


def test_the_openai_fields_of_a_new_job() -> None:
    answer = raw(job_of(seed=5, suffix="mine"))
    assert (answer["organization_id"], answer["seed"], answer["trained_tokens"]) == (
        "acct-7", 5, None)
    assert answer["user_provided_suffix"] == answer["suffix"] == "mine"
    assert answer["method"] == {"type": "supervised", "supervised": {"hyperparameters": {
        "n_epochs": 9, "batch_size": 4, "learning_rate_multiplier": 1.0}}}  # 100 steps of 12


@pytest.mark.parametrize(("hyperparameters", "adapter", "multiplier", "rate"), [
    ({}, "lora", 1.0, 1e-3),
    ({"learning_rate_multiplier": 3}, "lora", 3, 3e-3),
    ({"learning_rate": 2e-4}, "lora", 0.2, 2e-4),
    ({"learning_rate": 5e-5}, "full", 0.5, 5e-5),
    ({"learning_rate_multiplier": "auto"}, "full", 1.0, 1e-4),
])
def test_the_learning_rate_multiplier_is_the_rate_that_runs_over_the_default(
        hyperparameters: dict[str, Any], adapter: str, multiplier: float, rate: float) -> None:
    answer = raw(job_of(adapter=adapter, hyperparameters=hyperparameters))
    shown = answer["hyperparameters"]
    assert (shown["learning_rate_multiplier"], shown["learning_rate"]) == pytest.approx(
        (multiplier, rate))
    assert answer["method"]["supervised"]["hyperparameters"]["learning_rate_multiplier"] == (
        shown["learning_rate_multiplier"])


def test_n_epochs_counts_the_passes_the_steps_make() -> None:
    assert raw(job_of(max_steps=24, steps_per_epoch=12))["hyperparameters"]["n_epochs"] == 2
    assert raw(job_of(max_steps=25, steps_per_epoch=12))["hyperparameters"]["n_epochs"] == 3
    assert raw(job_of(max_steps=5, steps_per_epoch=12))["hyperparameters"]["n_epochs"] == 1


def test_trained_tokens_are_the_charged_steps_once_final() -> None:
    job = job_of(max_steps=10, seed=1)
    per_step = job.plan.tokens_per_step
    assert per_step == 4 * 50  # the batch, of examples of 50 tokens
    done = job.model_copy(update={"status": JobStatus.SUCCEEDED, "charged_through": 10,
                                  "charged": 0.01})
    assert raw(done)["trained_tokens"] == 2000
    stopped = done.model_copy(update={"status": JobStatus.CANCELLED, "charged_through": 4})
    assert raw(stopped)["trained_tokens"] == 800
    failed = done.model_copy(update={"status": JobStatus.FAILED, "refunded": 0.01,
                                     "error": JobError(code="x", message="y")})
    assert raw(failed)["trained_tokens"] == 0  # failed jobs cost nothing
    running = done.model_copy(update={"status": JobStatus.RUNNING})
    assert raw(running)["trained_tokens"] is None


def test_a_job_stored_before_these_fields_answers_as_openais_job() -> None:
    """Stored without a seed (it trained with 0), the steps of an epoch, or the tokens of a
    step: the seed shows 0, ``n_epochs`` as asked, ``trained_tokens`` null."""
    job = job_of(steps_per_epoch=None, hyperparameters={"n_epochs": 2})
    old = job.model_copy(update={
        "plan": job.plan.model_copy(update={"tokens_per_step": None}),
        "status": JobStatus.SUCCEEDED, "charged_through": 100, "charged": 0.5})
    stored = Job.model_validate_json(old.model_dump_json(exclude={"steps_per_epoch"}))
    answer = raw(stored)
    assert (answer["seed"], answer["hyperparameters"]["n_epochs"], answer["trained_tokens"]) == (
        0, 2, None)
    read(answer)
