"""Pause and resume in the job state machine alone (:mod:`alallo.jobs._pausing`): no I/O."""

from __future__ import annotations

import pytest

from alallo import EventType, InvalidTransition, JobSpec, JobStatus
from alallo.capacity._catalogue import Catalogue
from alallo.capacity._plans import plan_options
from alallo.capacity._pool import NodeSpec, Pool
from alallo.jobs._estimate import estimate_price, estimate_time
from alallo.jobs._job import Job, Progress
from alallo.jobs._lifecycle import (
    CancelRequested, Created, Input, PauseRequested, ResumeRequested, Started, TrainerExited,
    TrainerReported, apply,
)
from alallo.jobs._timeleft import time_left
from alallo.trainers import Checkpoint, Done, Error, Progress as TrainerProgress

pytestmark = pytest.mark.unit

T0 = 1_700_000_000.0


def new_job(max_steps: int = 30) -> Job:
    spec = JobSpec(model="alallo/tiny-gpt2", training_file="file-1")
    plan = plan_options(Catalogue().resolve(spec.model), spec,
                        Pool([NodeSpec(name="local", device="cpu", count=1)]),
                        max_steps=max_steps, tokens_per_example=50).pick(spec.goal)
    job = Job(id="ft-1", account_id="acct", spec=spec, max_steps=max_steps,
              progress=Progress(max_steps=max_steps), plan=plan, estimate=estimate_time(plan),
              price_estimate=estimate_price(plan), created_at=int(T0))
    return apply(job, Created(now=T0)).job


def run(job: Job, *inputs: Input) -> tuple[Job, list[EventType]]:
    types: list[EventType] = []
    for event in inputs:
        transition = apply(job, event)
        job = transition.job
        types += [e.type for e in transition.events]
    return job, types


def _running_to(step: int, saved: int) -> list[Input]:
    return [Started(now=T0), *(TrainerReported(TrainerProgress(step=s, max_steps=30), now=T0)
                               for s in range(1, step + 1)),
            TrainerReported(Checkpoint(step=saved, path=f"/c/checkpoint-{saved}"), now=T0)]


def test_a_queued_job_pauses_at_once_without_a_checkpoint_and_resumes_queued() -> None:
    job, types = run(new_job(), PauseRequested(now=T0 + 5))
    assert job.status is JobStatus.PAUSED
    assert job.message == "Paused. Resume it to queue it again; it starts from the beginning."
    assert types == [EventType.PAUSE_REQUESTED, EventType.JOB_PAUSED]
    job, types = run(job, ResumeRequested(now=T0 + 65))
    assert (job.status, job.message, job.paused_s) == (JobStatus.QUEUED, "Starting", 60.0)
    assert types == [EventType.JOB_RESUMED]


def test_a_running_job_saves_then_pauses_charged_through_that_checkpoint_only() -> None:
    job, _ = run(new_job(), *_running_to(7, 7))
    charged = job.charged
    job, types = run(job, PauseRequested(now=T0 + 1))
    assert (job.status, job.message) == (JobStatus.RUNNING, "Pausing: saving a checkpoint")
    assert types == [EventType.PAUSE_REQUESTED]
    assert apply(job, PauseRequested(now=T0 + 2)).changed is False  # idempotent
    job, types = run(job, TrainerExited(returncode=0, now=T0 + 3))
    assert job.status is JobStatus.PAUSED and types == [EventType.JOB_PAUSED]
    assert job.message == "Paused at step 7. Resume it to continue from step 7."
    assert job.charged == charged and job.charged_through == 7
    assert time_left(job, now=T0 + 10_000) == time_left(job, now=T0 + 20_000)  # frozen
    job, _ = run(job, ResumeRequested(now=T0 + 100), Started(now=T0 + 101, resume_step=7,
                                                             cause="resumed by user"))
    assert job.status is JobStatus.RUNNING and job.progress.step == 7
    job, _ = run(job, *(TrainerReported(TrainerProgress(step=s, max_steps=30), now=T0 + 102)
                        for s in range(8, 31)),
                 TrainerReported(Checkpoint(step=30, path="/c/checkpoint-30"), now=T0 + 103),
                 TrainerReported(Done(model_path="/m"), now=T0 + 103),
                 TrainerExited(returncode=0, now=T0 + 104))
    assert job.status is JobStatus.SUCCEEDED and job.charged_through == 30


def test_a_trainer_killed_while_pausing_pauses_at_the_last_checkpoint() -> None:
    job, _ = run(new_job(), *_running_to(9, 5), PauseRequested(now=T0),
                 TrainerExited(returncode=-15, now=T0))
    assert (job.status, job.progress.step, job.charged_through) == (JobStatus.PAUSED, 5, 5)


def test_a_finish_beats_a_pause() -> None:
    job, _ = run(new_job(), *_running_to(30, 30), PauseRequested(now=T0),
                 TrainerReported(Done(model_path="/m"), now=T0),
                 TrainerExited(returncode=0, now=T0))
    assert job.status is JobStatus.SUCCEEDED
    with pytest.raises(InvalidTransition, match="cannot pause ft-1: the job has already"):
        apply(job, PauseRequested(now=T0))
    with pytest.raises(InvalidTransition, match="cannot resume"):
        apply(job, ResumeRequested(now=T0))


def test_a_users_error_while_pausing_fails_the_job() -> None:
    job, _ = run(new_job(), *_running_to(3, 3), PauseRequested(now=T0),
                 TrainerReported(Error(kind="user", message="line 2: bad"), now=T0),
                 TrainerExited(returncode=1, now=T0))
    assert (job.status, job.message) == (JobStatus.FAILED, "Training failed: line 2: bad")


def test_cancel_of_a_paused_job_ends_cancelled_charged_for_the_steps_run() -> None:
    job, _ = run(new_job(), *_running_to(4, 4), PauseRequested(now=T0),
                 TrainerExited(returncode=0, now=T0))
    charged = job.charged
    # Days later: the pause does not make the cancel late (free).
    job, _ = run(job, CancelRequested(now=T0 + 10 * 86_400))
    assert job.status is JobStatus.CANCELLING and not job.cancel_free
    job, _ = run(job, TrainerExited(returncode=None, now=T0 + 10 * 86_400))
    assert job.status is JobStatus.CANCELLED and job.charged == charged and charged > 0


def test_pause_while_cancelling_and_resume_while_running_are_refused() -> None:
    job, _ = run(new_job(), Started(now=T0), CancelRequested(now=T0))
    with pytest.raises(InvalidTransition, match="it is being cancelled"):
        apply(job, PauseRequested(now=T0))
    job, _ = run(new_job(), Started(now=T0))
    with pytest.raises(InvalidTransition, match=r"it is not paused \(it is running\)"):
        apply(job, ResumeRequested(now=T0))
    job, _ = run(job, PauseRequested(now=T0))
    with pytest.raises(InvalidTransition, match="it is still pausing"):
        apply(job, ResumeRequested(now=T0))


def test_a_run_start_that_crosses_a_pause_is_ignored() -> None:
    job, _ = run(new_job(), PauseRequested(now=T0), Started(now=T0))
    assert job.status is JobStatus.PAUSED and job.attempt == 0


def test_a_node_lost_while_pausing_leaves_the_job_paused_at_its_checkpoint() -> None:
    from alallo.jobs._lifecycle import Rescheduled

    job, _ = run(new_job(), *_running_to(12, 10), PauseRequested(now=T0),
                 Rescheduled(now=T0, reason="node n1 was lost"),
                 TrainerExited(returncode=-9, now=T0))
    assert (job.status, job.progress.step, job.restart_cause) == (JobStatus.PAUSED, 10, None)


def test_a_server_gone_while_pausing_leaves_the_job_paused() -> None:
    """The actor of a job caught pausing at a restart ends its run as never finished."""
    job, _ = run(new_job(), *_running_to(5, 5), PauseRequested(now=T0),
                 TrainerExited(returncode=None, now=T0 + 1))
    assert job.status is JobStatus.PAUSED and job.message.startswith("Paused at step 5.")
