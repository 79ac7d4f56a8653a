"""Who pays what, decided by the state machine alone (seeds; docs/cancelling.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alallo import EventType, JobStatus, Message
from alallo._money import format_money
from alallo.jobs._billing import step_price
from alallo.jobs._job import Job
from alallo.jobs._lifecycle import (
    AutoCancel, CancelRequested, Input, LimitReached, NotAvailable, Started, TrainerExited,
    TrainerReported, apply,
)
from alallo.trainers import Checkpoint, Done, Error, Integration
from alallo.trainers import Progress as TrainerProgress

from test_lifecycle import T0, new_job

pytestmark = pytest.mark.unit


def play(job: Job, *inputs: Input) -> tuple[Job, list[EventType], float]:
    """Apply inputs; return the job, the event types, and the net ledger (charges - refunds)."""
    types: list[EventType] = []
    net = 0.0
    for event in inputs:
        transition = apply(job, event)
        job = transition.job
        types += [e.type for e in transition.events]
        net += sum(e.amount if e.kind == "charge" else -e.amount for e in transition.ledger)
    return job, types, net


def step(n: int, at: float = T0) -> TrainerReported:
    return TrainerReported(TrainerProgress(step=n, max_steps=30), now=at)


def checkpoint(n: int) -> TrainerReported:
    return TrainerReported(Checkpoint(step=n, path=f"/c/checkpoint-{n}"), now=T0)


def test_a_succeeded_job_pays_every_step_once() -> None:
    job = new_job(30)
    price = step_price(job)
    job, _, net = play(job, Started(now=T0), *(step(n) for n in range(1, 31)),
                       checkpoint(10), checkpoint(20), checkpoint(30),
                       TrainerReported(Done(model_path="/m"), now=T0),
                       TrainerExited(returncode=0, now=T0 + 1))
    assert job.status is JobStatus.SUCCEEDED
    assert net == pytest.approx(30 * price, abs=1e-8) and job.charged == pytest.approx(net, abs=1e-8)


def test_steps_redone_after_a_restart_are_not_charged_again() -> None:
    job = new_job(30)
    price = step_price(job)
    job, _, net1 = play(job, Started(now=T0), *(step(n) for n in range(1, 16)), checkpoint(10),
                        TrainerExited(returncode=-9, now=T0 + 1, max_restarts=3))
    assert job.restart_cause == "the trainer was killed by signal 9"
    job, types, net2 = play(job, Started(now=T0 + 2, resume_step=10, cause=job.restart_cause),
                            *(step(n) for n in range(11, 31)), checkpoint(20), checkpoint(30),
                            TrainerReported(Done(model_path="/m"), now=T0),
                            TrainerExited(returncode=0, now=T0 + 3, max_restarts=3))
    assert job.status is JobStatus.SUCCEEDED and types[0] is EventType.JOB_RESTARTED
    assert net1 + net2 == pytest.approx(30 * price, abs=1e-8)


def test_replaying_the_same_checkpoint_charges_once() -> None:
    job, _, net = play(new_job(30), Started(now=T0), step(10), checkpoint(10), checkpoint(10))
    assert net == pytest.approx(10 * step_price(job), abs=1e-8)


def test_a_failed_job_is_refunded_everything() -> None:
    job, types, net = play(new_job(30), Started(now=T0), step(10), checkpoint(10),
                           TrainerExited(returncode=-9, now=T0, max_restarts=0))
    assert job.status is JobStatus.FAILED and job.message == Message.PLATFORM_ERROR.value
    assert net == pytest.approx(0, abs=1e-8) and types[-2:] == [EventType.JOB_ERROR, EventType.REFUND]


def test_cancel_while_running_pays_completed_steps() -> None:
    job, _, net = play(new_job(30), Started(now=T0), *(step(n) for n in range(1, 14)),
                       checkpoint(10), CancelRequested(now=T0 + 1),
                       TrainerExited(returncode=-15, now=T0 + 2))
    assert job.status is JobStatus.CANCELLED
    assert net == pytest.approx(13 * step_price(job), abs=1e-8)


def test_cancel_after_the_estimated_time_is_free() -> None:
    job = new_job(30)
    late = job.created_at + job.estimate.high_s + 1
    job, types, net = play(job, Started(now=T0), step(10), checkpoint(10),
                           CancelRequested(now=late), TrainerExited(returncode=-15, now=late))
    assert job.status is JobStatus.CANCELLED and net == pytest.approx(0, abs=1e-8)
    assert types[-2:] == [EventType.JOB_STOPPED, EventType.REFUND]


@pytest.mark.parametrize(
    ("stop", "message"),
    [(LimitReached(now=T0, limit="budget"), "Stopped: the budget was reached"),
     (LimitReached(now=T0, limit="time_limit"), "Stopped: the time limit was reached")],
)
def test_stops_fail_with_their_message_and_cost_nothing(stop: LimitReached, message: str) -> None:
    job, types, net = play(new_job(30), Started(now=T0), step(10), checkpoint(10), stop,
                           TrainerExited(returncode=-15, now=T0 + 1, max_restarts=3))
    assert (job.status, job.message) == (JobStatus.FAILED, message)
    assert net == pytest.approx(0, abs=1e-8) and EventType.REFUND in types


@pytest.mark.parametrize(
    ("lower", "message"),
    [(False, "Not available right now."),
     (True, "Not available right now. Choose a lower precision.")],
)
def test_not_available_fails_at_once_for_free(lower: bool, message: str) -> None:
    job, _, net = play(new_job(), NotAvailable(now=T0, lower_precision_fits=lower))
    assert (job.status, job.message, net) == (JobStatus.FAILED, message, 0.0)


def test_wandb_failure_gives_the_seed_event_sequence() -> None:
    job, types, _ = play(
        new_job(), Started(now=T0),
        TrainerReported(Integration(ok=False, message="API key invalid"), now=T0),
        TrainerExited(returncode=1, now=T0))
    assert job.status is JobStatus.CANCELLED
    assert types[-3:] == [EventType.WANDB_INIT, EventType.CANCEL_REQUESTED, EventType.JOB_STOPPED]


def test_billing_limit_cancels_and_pays_completed_steps() -> None:
    job, types, net = play(new_job(30), Started(now=T0), *(step(n) for n in range(1, 22)),
                           checkpoint(20),
                           AutoCancel(now=T0, reason="billing_limit", detail="over"),
                           TrainerExited(returncode=-15, now=T0))
    assert job.status is JobStatus.CANCELLED
    assert types[-3:] == [EventType.BILLING_LIMIT, EventType.CANCEL_REQUESTED,
                          EventType.JOB_STOPPED]
    assert net == pytest.approx(21 * step_price(job), abs=1e-8)


SEED_FAILED_MESSAGES = {
    "Not available right now.",
    "Not available right now. Choose a lower precision.",
    "Stopped: the budget was reached",
    "Stopped: the time limit was reached",
    "Failed. We've been notified and are looking into it.",
}

inputs = st.one_of(
    st.builds(Started, now=st.just(T0), resume_step=st.sampled_from([None, 10])),
    st.builds(CancelRequested, now=st.sampled_from([T0, T0 + 10**6])),
    st.builds(TrainerExited, returncode=st.sampled_from([None, 0, 1, -9]), now=st.just(T0),
              max_restarts=st.integers(0, 2)),
    st.builds(LimitReached, now=st.just(T0), limit=st.sampled_from(["budget", "time_limit"])),
    st.builds(AutoCancel, now=st.just(T0),
              reason=st.sampled_from(["balance", "billing_limit", "wandb"]), detail=st.just("x")),
    st.builds(TrainerReported, now=st.just(T0), message=st.one_of(
        st.builds(TrainerProgress, step=st.integers(1, 30), max_steps=st.just(30)),
        st.builds(Checkpoint, step=st.integers(1, 30), path=st.just("/c")),
        st.builds(Done, model_path=st.just("/m")),
        st.builds(Error, kind=st.sampled_from(["user", "platform"]), message=st.just("boom")),
        st.builds(Integration, ok=st.booleans(), message=st.just("w")),
    )),
)


@settings(max_examples=300)
@given(st.lists(inputs, max_size=30))
def test_money_properties_hold_for_any_input_sequence(sequence: list[Input]) -> None:
    job = new_job(30)
    price = step_price(job)
    net = 0.0
    for event in sequence:
        try:
            transition = apply(job, event)
        except Exception:
            assert job.status.is_final and isinstance(event, CancelRequested)
            continue
        net += sum(e.amount if e.kind == "charge" else -e.amount for e in transition.ledger)
        job = transition.job
        assert net <= job.charged_through * price + 1e-9, "never more than productive steps"
        assert net >= -1e-9, "never negative"
        if job.status is JobStatus.FAILED:
            assert job.message in SEED_FAILED_MESSAGES or job.message.startswith(
                "Training failed: ")
            assert net == pytest.approx(0, abs=1e-9), "a failed job costs nothing"
    assert job.charged - job.refunded == pytest.approx(net, abs=1e-9)


def test_the_quote_holds_the_charge_and_a_move_to_dearer_capacity_never_passes_its_top() -> None:
    job = new_job()
    low, high = job.price_estimate
    assert low < 30 * step_price(job) < high  # the charge on its plan is inside the quote
    dearer = job.plan.model_copy(update={"device_type": "H100-80GB", "devices": 2,
                                         "price_per_hour": job.plan.price_per_hour * 4})
    moved, types, net = play(
        job, Started(now=T0), step(10), checkpoint(10),
        Started(now=T0 + 5, resume_step=10, plan=dearer, cause="re-scheduled: memory"),
        *[step(n) for n in range(11, 31)], checkpoint(30),
        TrainerReported(Done(model_path="/m"), now=T0 + 9), TrainerExited(0, now=T0 + 10))
    assert moved.status is JobStatus.SUCCEEDED
    uncapped = 10 * step_price(job) + 20 * step_price(moved)
    assert uncapped > high and net == pytest.approx(high) and moved.charged == pytest.approx(high)
    revised = apply(job.model_copy(update={"attempt": 1}), Started(
        now=T0, resume_step=10, plan=dearer)).events[0]
    assert revised.type is EventType.ESTIMATE_REVISED
    assert revised.message.startswith("Estimate revised for 2 × H100-80GB: ")
    assert revised.message.endswith(f"the job costs at most {format_money(high)}, the top of "
                                    "its quote")
    assert revised.data["price_cap"] == high
