"""A job's JSON rendered once per state: the same bytes as ``JSONResponse(job_view(...))``."""

from __future__ import annotations

import pytest
from starlette.responses import JSONResponse

from alallo import JobSpec, JobStatus
from alallo.capacity._catalogue import Catalogue
from alallo.capacity._plans import plan_options
from alallo.capacity._pool import NodeSpec, Pool
from alallo.jobs._estimate import estimate_price, estimate_time
from alallo.jobs._job import Job, Progress
from alallo.jobs._lifecycle import Created, apply
from alallo.runtime import views
from gateway._job_json import JobJson

pytestmark = pytest.mark.unit

T0 = 1_700_000_000.0
LOCAL = Pool([NodeSpec(name="local", device="cpu", count=1)])


def queued_job(**spec: object) -> Job:
    job_spec = JobSpec(model="alallo/tiny-gpt2", training_file="file-1", **spec)  # type: ignore[arg-type]
    plan = plan_options(Catalogue().resolve(job_spec.model), job_spec, LOCAL, max_steps=100,
                        tokens_per_example=50).pick(job_spec.goal)
    job = Job(id="ft-" + "1" * 24, account_id="acct", spec=job_spec, max_steps=100,
              progress=Progress(max_steps=100), plan=plan, estimate=estimate_time(plan),
              price_estimate=estimate_price(plan), created_at=int(T0))
    return apply(job, Created(now=T0)).job


def states() -> list[Job]:
    """Queued, running by the plan, running by its pace (time left moves with the clock),
    finished; with metadata that JSON must escape and that names a clock key."""
    queued = queued_job(metadata={"note": "é \"quoted\" ✓", "time_left": "mine"})
    early = queued.model_copy(update={"status": JobStatus.RUNNING, "run_started_at": T0 + 5,
                                      "progress": Progress(step=2, max_steps=100)})
    paced = early.model_copy(update={"progress": Progress(step=40, max_steps=100),
                                     "first_step_at": T0 + 10, "first_step": 1,
                                     "step_s_mean": 0.5, "step_s_var": 0.01})
    done = paced.model_copy(update={"status": JobStatus.SUCCEEDED, "finished_at": int(T0) + 90})
    return [queued, early, paced, done]


@pytest.mark.parametrize("index", range(4))
def test_the_bytes_are_those_of_the_json_response_at_every_moment(index: int) -> None:
    job = states()[index]
    rendered = JobJson()
    for now in (T0 + 20, T0 + 20.4, T0 + 61.7, T0 + 3600):  # a miss, then hits
        assert rendered.render(job, now=now) == JSONResponse(views.job_view(job, now=now)).body


def test_a_new_state_of_the_job_is_rendered_anew_and_the_entries_are_bounded() -> None:
    queued, early, paced, _ = states()
    rendered = JobJson(size=1)
    now = T0 + 30
    assert rendered.render(queued, now=now) == JSONResponse(views.job_view(queued, now=now)).body
    assert rendered.render(paced, now=now) == JSONResponse(views.job_view(paced, now=now)).body
    other = queued.model_copy(update={"id": "ft-" + "2" * 24})
    rendered.render(other, now=now)
    assert len(rendered) == 1
    response = rendered.response(early, now=now)
    assert response.body == JSONResponse(views.job_view(early, now=now)).body
    assert response.headers["content-type"] == "application/json"
