"""The job state machine alone: no I/O, no clock."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alallo import EventType, InvalidTransition, JobSpec, JobStatus, Message
from alallo.capacity._pool import NodeSpec, Pool
from alallo.jobs._estimate import estimate_price, estimate_time
from alallo.capacity._plans import plan_options
from alallo.capacity._catalogue import Catalogue
from alallo.jobs._job import Job, Progress
from alallo._money import format_money
from alallo.jobs._lifecycle import (
    ActorFailed, CancelRequested, Created, Input, PauseRequested, ResumeRequested, Started,
    TrainerExited, TrainerReported, WaitingForCapacity, append_log, apply,
)
from alallo.trainers import Checkpoint, Done, Error, Progress as TrainerProgress, Stage

pytestmark = pytest.mark.unit

T0 = 1_700_000_000.0


LOCAL = Pool([NodeSpec(name="local", device="cpu", count=1)])


def tiny_plan(spec: JobSpec, max_steps: int):  # type: ignore[no-untyped-def]
    return plan_options(Catalogue().resolve(spec.model), spec, LOCAL, max_steps=max_steps,
                        tokens_per_example=50).pick(spec.goal)


def new_job(max_steps: int = 30) -> Job:
    spec = JobSpec(model="alallo/tiny-gpt2", training_file="file-1")
    plan = tiny_plan(spec, max_steps)
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


def test_created_job_is_queued_starting_with_job_pending() -> None:
    spec = JobSpec(model="alallo/tiny-gpt2", training_file="file-1")
    plan = tiny_plan(spec, 5)
    blank = Job(id="ft-1", account_id="a", spec=spec, max_steps=5, progress=Progress(max_steps=5),
                plan=plan, estimate=estimate_time(plan), price_estimate=(0.0, 0.0),
                created_at=int(T0))
    transition = apply(blank, Created(now=T0))
    assert (transition.job.status, transition.job.message) == (JobStatus.QUEUED, "Starting")
    assert [(e.seq, e.type, e.message) for e in transition.events] == [
        (1, EventType.JOB_PENDING, "Fine tune request created")]
    assert transition.job.seq == transition.job.state_seq == 2


def test_successful_run_emits_the_seed_events_in_order() -> None:
    job, types = run(
        new_job(20),
        Started(now=T0 + 1, config_hash="c0ffee"),
        TrainerReported(Stage(stage="model_loaded", hash="m"), now=T0 + 2),
        TrainerReported(Stage(stage="data_loaded", hash="d"), now=T0 + 2),
        TrainerReported(Stage(stage="training_start"), now=T0 + 3),
        *[TrainerReported(TrainerProgress(step=s, max_steps=20), now=T0 + 3 + s) for s in range(1, 21)],
        TrainerReported(Checkpoint(step=20, path="/c/checkpoint-20", hash="k"), now=T0 + 24),
        TrainerReported(Done(model_path="/m", hash="f"), now=T0 + 25),
        TrainerExited(returncode=0, now=T0 + 26),
    )
    assert job.status is JobStatus.SUCCEEDED and job.message is None
    assert job.progress.step == 20 and job.progress.percent == 100.0
    assert job.fine_tuned_model == "/m" and job.finished_at == int(T0 + 26)
    assert types == [EventType.JOB_START, EventType.MODEL_DOWNLOAD_COMPLETE,
                     EventType.TRAINING_DATA_DOWNLOAD_COMPLETE, EventType.TRAINING_START,
                     EventType.CHECKPOINT_SAVE, EventType.TRAINING_COMPLETE,
                     EventType.JOB_COMPLETE]


def test_start_message_uses_the_seed_clock_format() -> None:
    transition = apply(new_job(), Started(now=T0, config_hash="h"))
    (event,) = transition.events
    assert event.message == "Job started at Tue Nov 14 22:13:20 UTC 2023"
    assert event.hash == "h"


def test_user_error_fails_with_training_failed_and_the_line() -> None:
    job, types = run(new_job(), Started(now=T0),
                     TrainerReported(Error(kind="user", message='line 3: missing column "text"'),
                                     now=T0 + 1),
                     TrainerExited(returncode=1, now=T0 + 2))
    assert job.status is JobStatus.FAILED
    assert job.message == 'Training failed: line 3: missing column "text"'
    assert job.error is not None and job.error.message == job.message
    assert types[-1] is EventType.JOB_USER_ERROR


@pytest.mark.parametrize("returncode", [-9, 1, 0])
def test_crash_without_a_user_error_is_a_platform_error(returncode: int) -> None:
    job, types = run(new_job(), Started(now=T0), TrainerExited(returncode=returncode, now=T0 + 1))
    assert job.status is JobStatus.FAILED
    assert job.message == Message.PLATFORM_ERROR.value
    assert types[-1] is EventType.JOB_ERROR


def test_a_failed_actor_fails_the_job_for_the_platform_and_refunds_what_it_paid() -> None:
    job, _ = run(new_job(30), Started(now=T0),
                 TrainerReported(TrainerProgress(step=12, max_steps=30), now=T0 + 1),
                 TrainerReported(Checkpoint(step=10, path="/c/checkpoint-10"), now=T0 + 1))
    assert job.charged > 0
    transition = apply(job, ActorFailed(now=T0 + 2, reason="its actor failed 6 times"))
    failed = transition.job
    assert (failed.status, failed.message) == (JobStatus.FAILED, Message.PLATFORM_ERROR.value)
    assert failed.error is not None and failed.error.code == "platform_error"
    assert failed.charged - failed.refunded == 0
    assert [(e.type, e.message) for e in transition.events] == [
        (EventType.JOB_ERROR, f"{Message.PLATFORM_ERROR.value} (its actor failed 6 times)"),
        (EventType.REFUND, f"Refunded {format_money(job.charged)}: failed jobs cost nothing")]
    assert not apply(failed, ActorFailed(now=T0 + 3, reason="again")).changed


def test_a_failed_actor_of_a_job_being_cancelled_ends_it_cancelled() -> None:
    job, types = run(new_job(), Started(now=T0), CancelRequested(now=T0 + 1),
                     ActorFailed(now=T0 + 2, reason="its actor failed"))
    assert job.status is JobStatus.CANCELLED
    assert types[-1] is EventType.JOB_STOPPED


def test_cancel_while_running_goes_cancelling_then_cancelled() -> None:
    job, types = run(new_job(), Started(now=T0), CancelRequested(now=T0 + 1))
    assert job.status is JobStatus.CANCELLING
    again = apply(job, CancelRequested(now=T0 + 2))
    assert not again.changed and again.job == job
    job, more = run(job, TrainerExited(returncode=-15, now=T0 + 3))
    assert job.status is JobStatus.CANCELLED
    assert types + more == [EventType.JOB_START, EventType.CANCEL_REQUESTED, EventType.JOB_STOPPED]


def test_cancel_while_queued_never_starts() -> None:
    job, types = run(new_job(), WaitingForCapacity(now=T0), CancelRequested(now=T0 + 1),
                     Started(now=T0 + 2), TrainerExited(returncode=None, now=T0 + 2))
    assert job.status is JobStatus.CANCELLED and job.attempt == 0
    assert types == [EventType.CANCEL_REQUESTED, EventType.JOB_STOPPED]


def test_waiting_for_capacity_is_a_queued_message() -> None:
    job = apply(new_job(), WaitingForCapacity(now=T0)).job
    assert (job.status, job.message) == (JobStatus.QUEUED, "Waiting for capacity")


def test_cancelling_a_finished_job_is_refused() -> None:
    job, _ = run(new_job(), Started(now=T0), TrainerExited(returncode=1, now=T0))
    with pytest.raises(InvalidTransition, match=r"cannot cancel ft-1: the job has already finished \(failed\)"):
        apply(job, CancelRequested(now=T0))


def test_restart_resumes_from_the_checkpoint_step() -> None:
    job, _ = run(new_job(30), Started(now=T0),
                 TrainerReported(TrainerProgress(step=12, max_steps=30), now=T0 + 1),
                 TrainerReported(Checkpoint(step=10, path="/c/checkpoint-10"), now=T0 + 1))
    job, types = run(job, Started(now=T0 + 5, resume_step=10, cause="the server restarted"))
    assert job.attempt == 2 and job.progress.step == 10
    assert types == [EventType.JOB_RESTARTED, EventType.JOB_START]


def test_log_lines_take_sequence_numbers_but_leave_the_state_alone() -> None:
    job = new_job()
    job2, line = append_log(job, "Step 10/30: loss 2.5", now=T0)
    assert line.n == job.seq + 1 and job2.seq == line.n
    assert job2.state_seq == job.state_seq and job2.last_log_line == "Step 10/30: loss 2.5"


inputs = st.one_of(
    st.builds(Started, now=st.just(T0)),
    st.builds(ActorFailed, now=st.just(T0), reason=st.just("its actor failed")),
    st.builds(CancelRequested, now=st.just(T0)),
    st.builds(PauseRequested, now=st.just(T0)),
    st.builds(ResumeRequested, now=st.just(T0)),
    st.builds(WaitingForCapacity, now=st.just(T0)),
    st.builds(TrainerExited, returncode=st.sampled_from([None, 0, 1, -9]), now=st.just(T0)),
    st.builds(TrainerReported, now=st.just(T0), message=st.one_of(
        st.builds(TrainerProgress, step=st.integers(1, 30), max_steps=st.just(30)),
        st.builds(Done, model_path=st.just("/m")),
        st.builds(Error, kind=st.sampled_from(["user", "platform"]), message=st.just("boom")),
    )),
)

FAILED_MESSAGES = {Message.PLATFORM_ERROR.value}


@given(st.lists(inputs, max_size=25))
def test_properties_of_any_input_sequence(sequence: list[Input]) -> None:
    job = new_job(30)
    final_seen: Job | None = None
    for event in sequence:
        try:
            transition = apply(job, event)
        except InvalidTransition:
            if isinstance(event, CancelRequested):
                assert job.status.is_final
            elif isinstance(event, PauseRequested):
                assert job.status.is_final or job.status is JobStatus.CANCELLING
            else:
                assert isinstance(event, ResumeRequested) and job.status is not JobStatus.PAUSED
            continue
        assert transition.job.seq >= job.seq, "sequence numbers never go back"
        seqs = [e.seq for e in transition.events]
        assert seqs == sorted(set(seqs)) and all(s > job.seq for s in seqs)
        job = transition.job
        if final_seen is not None:
            assert job == final_seen, "a final status never changes"
        if job.status.is_final:
            final_seen = job
        if job.status is JobStatus.FAILED:
            assert job.message in FAILED_MESSAGES or job.message.startswith("Training failed: ")
            assert job.error is not None
        assert 0 <= job.progress.step <= job.progress.max_steps


def test_rescheduling_moves_the_job_and_it_continues_from_its_checkpoint() -> None:
    from alallo.jobs._lifecycle import Rescheduled

    job, types = run(new_job(30), Started(now=T0),
                     TrainerReported(TrainerProgress(step=12, max_steps=30), now=T0 + 1),
                     TrainerReported(Checkpoint(step=10, path="/c/checkpoint-10"), now=T0 + 1),
                     Rescheduled(now=T0 + 2, reason="it needs more memory than planned"))
    assert (job.status, job.message) == (JobStatus.RE_SCHEDULING, "Re-scheduling")
    job, more = run(job, TrainerExited(returncode=-15, now=T0 + 3, max_restarts=0))
    assert job.status is JobStatus.RE_SCHEDULING and job.restarts == 0 and more == []
    job, more = run(job, Started(now=T0 + 4, resume_step=10, cause=job.restart_cause))
    assert job.status is JobStatus.RUNNING and job.progress.step == 10
    assert types[-1] is EventType.JOB_RESCHEDULED
    assert more == [EventType.JOB_RESTARTED, EventType.JOB_START]


def test_epochs_completed_are_events() -> None:
    job, types = run(new_job(30), Started(now=T0), *[
        TrainerReported(TrainerProgress(step=s, max_steps=30, epoch=s / 10), now=T0)
        for s in range(1, 31)])
    assert types.count(EventType.EPOCH_COMPLETE) == 3


# Every row of the seeds' tables: (status, the message it shows), from inputs alone.
SEED_ROWS = [
    ("queued", "Starting", [Created]),
    ("queued", "Waiting for capacity", ["waiting"]),
    ("running", None, ["start"]),
    ("re-scheduling", "Re-scheduling", ["start", "reschedule"]),
    ("cancelling", None, ["start", "cancel"]),
    ("cancelled", None, ["start", "cancel", "exit"]),
    ("succeeded", None, ["start", "done", "exit0"]),
    ("failed", "Not available right now.", ["not_available"]),
    ("failed", "Not available right now. Choose a lower precision.", ["lower_precision"]),
    ("failed", "Stopped: the budget was reached", ["start", "budget", "exit"]),
    ("failed", "Stopped: the time limit was reached", ["start", "time_limit", "exit"]),
    ("failed", "Training failed: line 3: missing column \"text\"", ["start", "user_error", "exit"]),
    ("failed", "Failed. We've been notified and are looking into it.", ["start", "exit"]),
]


@pytest.mark.parametrize(("status", "message", "steps"), SEED_ROWS)
def test_every_seed_status_and_message(status: str, message: str | None,
                                       steps: list[object]) -> None:
    from alallo.jobs._lifecycle import LimitReached, NotAvailable, Rescheduled

    make = {
        "waiting": lambda: WaitingForCapacity(now=T0),
        "start": lambda: Started(now=T0),
        "reschedule": lambda: Rescheduled(now=T0, reason="memory"),
        "cancel": lambda: CancelRequested(now=T0),
        "exit": lambda: TrainerExited(returncode=1, now=T0),
        "exit0": lambda: TrainerExited(returncode=0, now=T0),
        "done": lambda: TrainerReported(Done(model_path="/m"), now=T0),
        "not_available": lambda: NotAvailable(now=T0),
        "lower_precision": lambda: NotAvailable(now=T0, lower_precision_fits=True),
        "budget": lambda: LimitReached(now=T0, limit="budget"),
        "time_limit": lambda: LimitReached(now=T0, limit="time_limit"),
        "user_error": lambda: TrainerReported(
            Error(kind="user", message='line 3: missing column "text"'), now=T0),
    }
    job = new_job()
    for name in steps:
        if name is Created:
            continue
        job = apply(job, make[str(name)]()).job
    assert (job.status.value, job.message) == (status, message)


def test_cancel_while_re_scheduling_ends_cancelled() -> None:
    from alallo.jobs._lifecycle import Rescheduled

    job, types = run(new_job(30), Started(now=T0), Rescheduled(now=T0, reason="memory"),
                     CancelRequested(now=T0), TrainerExited(returncode=-15, now=T0))
    assert job.status is JobStatus.CANCELLED
    assert types[-2:] == [EventType.CANCEL_REQUESTED, EventType.JOB_STOPPED]
