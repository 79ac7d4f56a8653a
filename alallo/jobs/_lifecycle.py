"""The job state machine: ``(job, input) -> (job', events, ledger)``, pure.

Every rule of the seeds about what a user sees (statuses, messages, events)
and who pays what is decided here and nowhere else; the job actor feeds
inputs in, persists what comes out, then publishes it (DESIGN.md, "persist,
then publish"). Nothing here reads a clock, a setting or a file: what it
needs comes in the input. See ``docs/design.md``.

Sequence numbers are handed out here too, so that they are part of the
state: a transition's events get the next numbers in order, then the job
itself (it changed) gets the one after. A transition that changes nothing
returns the job as it was (``changed`` is False).
"""

from __future__ import annotations

import time
from typing import Literal

from .._errors import InvalidTransition
from .._money import format_money
from .._status import EventLevel, EventType, JobStatus, Message
from ..trainers import Checkpoint, Done, Error, Integration, Metrics, Stage
from ..trainers import Progress as TrainerProgress
from ._draft import Draft as _Draft
from ._estimate import estimate_time
from ._inputs import (
    ActorFailed,
    AutoCancel,
    CancelRequested,
    CheckpointNotShared,
    Created,
    Input,
    LimitReached,
    NotAvailable,
    PauseRequested,
    Rescheduled,
    ResumeRequested,
    Started,
    TrainerExited,
    TrainerReported,
    Transition,
    WaitingForCapacity,
)
from ._job import Job, JobError, LogLine, Progress, SavedCheckpoint
from ._metrics import MetricsPoint
from ._pausing import ends_paused, pause, paused, paused_total, resume
from ._plan import DEVICE_TYPES, Plan
from ._spec import CommandTrainer

__all__ = [  # the inputs (alallo.jobs._inputs), re-exported: callers say lifecycle.Created
    "ActorFailed", "AutoCancel", "CancelRequested", "CheckpointNotShared", "Created", "Input",
    "LimitReached", "NotAvailable", "PauseRequested", "Rescheduled", "ResumeRequested", "Started",
    "TrainerExited", "TrainerReported", "Transition", "WaitingForCapacity", "append_log",
    "append_metrics", "apply",
    "checkpoint_not_shared",
]


def apply(job: Job, event: Input) -> Transition:
    """Apply one input to a job.

    Raises:
        InvalidTransition: the user cancels a job that has finished.
    """
    if job.status.is_final:
        if isinstance(event, CancelRequested | PauseRequested | ResumeRequested):
            verb = {CancelRequested: "cancel", PauseRequested: "pause"}.get(type(event), "resume")
            raise InvalidTransition(
                f"cannot {verb} {job.id}: the job has already finished ({job.status.value})")
        return _unchanged(job)
    draft = _Draft(job, event.now)
    match event:
        case Created(warnings=warnings):
            draft.set(message=Message.STARTING.value).event(
                EventType.JOB_PENDING, "Fine tune request created")
            for warning in warnings:
                draft.event(EventType.WARNING, warning, level=EventLevel.WARNING)
        case WaitingForCapacity(position=position):
            if job.status is not JobStatus.QUEUED or (
                    job.message == Message.WAITING_FOR_CAPACITY.value
                    and job.queue_position == position):
                return _unchanged(job)
            draft.set(message=Message.WAITING_FOR_CAPACITY.value, queue_position=position)
        case NotAvailable(lower_precision_fits=lower, detail=detail):
            message = (Message.CHOOSE_LOWER_PRECISION if lower else Message.NOT_AVAILABLE).value
            _fail(draft, message, "not_available", EventType.JOB_ERROR, detail=detail)
            if detail:  # the status message stays the seed's; the error says why
                draft.set(error=JobError(code="not_available", message=f"{message} {detail}."))
        case Started():
            if job.status in (JobStatus.CANCELLING, JobStatus.PAUSED):
                return _unchanged(job)
            _started(draft, event)
        case TrainerReported(message=message):
            if not _reported(draft, message):
                return _unchanged(job)
        case CheckpointNotShared(step=step, reason=reason):
            draft.event(EventType.WARNING, checkpoint_not_shared(step, reason),
                        level=EventLevel.WARNING, step=step)
        case TrainerExited(returncode=code, max_restarts=limit, result_file=made):
            _exited(draft, code, limit, made)
        case CancelRequested():
            if job.status is JobStatus.CANCELLING:
                return _unchanged(job)
            late = event.now - paused_total(job, event.now) > job.created_at + job.estimate.high_s
            draft.set(status=JobStatus.CANCELLING, message=None, cancel_free=late).event(
                EventType.CANCEL_REQUESTED, "Cancel requested by user")
        case AutoCancel(reason=reason, detail=detail):
            if job.status is JobStatus.CANCELLING:
                return _unchanged(job)
            _auto_cancel(draft, reason, detail)
        case Rescheduled(reason=reason):
            if job.status is not JobStatus.RUNNING:
                return _unchanged(job)
            draft.set(status=JobStatus.RE_SCHEDULING, message=Message.RE_SCHEDULING.value,
                      restart_cause=f"re-scheduled: {reason}")
            draft.event(EventType.JOB_RESCHEDULED, f"Job re-scheduled: {reason}")
        case ActorFailed(reason=reason):
            if job.status is JobStatus.CANCELLING:
                _exited(draft, None, 0, None)
            else:
                _fail(draft, Message.PLATFORM_ERROR.value, "platform_error", EventType.JOB_ERROR,
                      detail=reason)
        case LimitReached(limit=limit):
            if job.status is JobStatus.CANCELLING or job.stop_reason is not None:
                return _unchanged(job)
            message = (Message.BUDGET_REACHED if limit == "budget"
                       else Message.TIME_LIMIT_REACHED).value
            draft.set(stop_reason=message).event(EventType.WARNING, message,
                                                 level=EventLevel.WARNING)
        case PauseRequested():
            if not pause(draft):
                return _unchanged(job)
        case ResumeRequested():
            resume(draft)
        case _:
            raise TypeError(f"not a lifecycle input: {event!r}")
    return draft.done()


def checkpoint_not_shared(step: int, reason: str) -> str:
    """What the log and the events say of a checkpoint the shared storage refused."""
    return (f"Checkpoint at step {step} was not saved: the shared storage refused it "
            f"({reason}); training goes on, and a restart resumes from the last saved one")


def append_log(job: Job, text: str, *, now: float) -> tuple[Job, LogLine]:
    """Add a line to the current run's training log."""
    seq = job.seq + 1
    line = LogLine(n=seq, at=now, text=text, attempt=max(job.attempt, 1))
    updates: dict[str, object] = {"seq": seq, "log_lines": job.log_lines + 1}
    if text.strip():
        updates["last_log_line"] = text
    return job.model_copy(update=updates), line


def append_metrics(job: Job, message: Metrics, *, now: float) -> tuple[Job, MetricsPoint]:
    """Record the figures the trainer reported as the job's next item (the metrics series
    and the streams' ``metrics`` items); the job's state is unchanged but for its ``seq``."""
    point = MetricsPoint(n=job.seq + 1, at=now, attempt=max(job.attempt, 1),
                         **message.model_dump())
    return job.model_copy(update={"seq": point.n}), point


def _unchanged(job: Job) -> Transition:
    return Transition(job, changed=False)


def _started(draft: _Draft, event: Started) -> None:
    job, now = draft.job, event.now
    updates: dict[str, object] = {
        "status": JobStatus.RUNNING, "message": None, "attempt": job.attempt + 1,
        "run_started_at": now, "first_step_at": None, "first_step": event.resume_step or 0,
        "last_step_at": None,
        "log_lines": 0, "last_log_line": None, "trainer_error": None,
        "restart_cause": None, "fine_tuned_model": None, "queue_position": None,
        "stopped_early": None,
        "started_at": job.started_at or int(now),
    }
    if event.plan is not None:
        updates["plan"] = event.plan
        updates["placement"] = event.placement
        if job.attempt > 0 and (event.plan.device_type, event.plan.devices) != (
                job.plan.device_type, job.plan.devices):
            _revised(draft, event.plan, event.resume_step or 0)
    if job.attempt > 0:
        updates["progress"] = job.progress.model_copy(update={"step": event.resume_step or 0})
        resumed = (f" from the checkpoint at step {event.resume_step}"
                   if event.resume_step is not None else " from the start")
        draft.event(EventType.JOB_RESTARTED,
                    f"Job restarted{resumed}: {event.cause or 'the previous run stopped'}")
    draft.set(**updates).event(EventType.JOB_START, f"Job started at {_clock(now)}",
                               event.config_hash)


def _revised(draft: _Draft, plan: Plan, done_steps: int) -> None:
    """A job moved to other capacity: the time left on it, and the price it stays under."""
    left = estimate_time(plan.model_copy(update={"max_steps": draft.job.max_steps - done_steps}))
    cap = draft.job.price_estimate[1]
    draft.event(EventType.ESTIMATE_REVISED,
                f"Estimate revised for {plan.devices} × {plan.device_type}: {left.text} left; "
                f"the job costs at most {format_money(cap)}, the top of its quote",
                data={"time_left": {"low_s": round(left.low_s), "high_s": round(left.high_s),
                                    "text": left.text}, "price_cap": cap})


def _reported(draft: _Draft, message: Stage | TrainerProgress | Metrics | Checkpoint | Done
              | Error | Integration) -> bool:
    job, now, model = draft.job, draft.now, draft.job.spec.model
    match message:
        case Stage(stage="model_loaded", hash=h):
            draft.event(EventType.MODEL_DOWNLOAD_COMPLETE,
                        f"Model data downloaded for {model} at {_clock(now)}", h)
        case Stage(stage="data_loaded", hash=h):
            draft.event(EventType.TRAINING_DATA_DOWNLOAD_COMPLETE,
                        f"Training data downloaded for {model} at {_clock(now)}", h)
        case Stage(stage="validation_loaded", hash=h):
            draft.event(EventType.VALIDATION_DATA_DOWNLOAD_COMPLETE,
                        f"Validation data downloaded for {model} at {_clock(now)}", h)
        case Stage(stage="training_start", hash=h):
            draft.event(EventType.TRAINING_START, f"Training started for model {model}", h)
        case TrainerProgress():
            return _progress(draft, message)
        case Checkpoint(step=step, path=path, hash=h):
            saved = SavedCheckpoint(step=step, path=path, created_at=int(now), hash=h)
            draft.set(checkpoint=saved).event(EventType.CHECKPOINT_SAVE,
                                              f"Checkpoint saved at step {step}", h, step=step)
            if job.status is JobStatus.RUNNING:
                draft.charge(step)
        case Metrics(step=step, valid_loss=float() as loss):
            accuracy = message.valid_mean_token_accuracy
            draft.event(EventType.EVAL_COMPLETE, f"Evaluation at step {step}: validation loss "
                        f"{loss:.4f}" + (f", mean token accuracy {accuracy:.4f}"
                                         if accuracy is not None else ""), step=step,
                        data={"valid_loss": loss, "valid_mean_token_accuracy": accuracy})
        case Metrics():
            return False  # training figures: items of the series, not events
        case Done(model_path=path, hash=h, stopped_at=int() as last, best_step=best):
            patience = job.spec.early_stopping.patience if job.spec.early_stopping else "N"
            draft.set(fine_tuned_model=path, final_hash=h, stopped_early=(last, best)).event(
                EventType.TRAINING_COMPLETE,
                f"Training stopped early at step {last} of {job.max_steps}: the validation "
                f"loss did not improve for {patience} evaluations in a row; the model is "
                f"the checkpoint of step {best}", h, step=last)
        case Done(model_path=path, hash=h):
            draft.set(fine_tuned_model=path, final_hash=h).event(
                EventType.TRAINING_COMPLETE, "Training completed", h)
        case Error(kind=kind, message=text):
            draft.set(trainer_error=(kind, text))
        case Integration(ok=True):
            draft.event(EventType.WANDB_INIT, f"WandB run initialized: {message.message}")
        case Integration(ok=False, message=reason):
            if job.status is JobStatus.CANCELLING:
                return False
            _auto_cancel(draft, "wandb", reason)
        case _:
            raise TypeError(f"not a trainer message: {message!r}")
    return True


def _progress(draft: _Draft, message: TrainerProgress) -> bool:
    job = draft.job
    if message.step <= job.progress.step and job.first_step_at is not None:
        return False
    progress = Progress(
        step=min(message.step, job.progress.max_steps),
        max_steps=job.progress.max_steps,
        epoch=message.epoch if message.epoch is not None else job.progress.epoch,
        loss=message.loss if message.loss is not None else job.progress.loss,
    )
    draft.set(progress=progress)
    device = DEVICE_TYPES.get(job.plan.device_type)
    if (message.memory_gb is not None and device is not None and job.status is JobStatus.RUNNING
            and message.memory_gb > device.memory_gb):
        reason = (f"it needs {message.memory_gb:.1f} GB per device; "
                  f"a {device.name} has {device.memory_gb:.0f} GB")
        draft.set(status=JobStatus.RE_SCHEDULING, message=Message.RE_SCHEDULING.value,
                  restart_cause=f"re-scheduled: {reason}",
                  memory_factor=message.memory_gb / max(job.plan.memory_gb, 1e-9))
        draft.event(EventType.JOB_RESCHEDULED, f"Job re-scheduled: {reason}")
    before, after = job.progress.epoch, progress.epoch
    if after is not None and int(after) > int(before or 0) and int(after) >= 1:
        draft.event(EventType.EPOCH_COMPLETE, f"Epoch {int(after)} completed", step=progress.step)
    if job.first_step_at is None:
        draft.set(first_step_at=draft.now, first_step=message.step)
    elif job.last_step_at is not None and message.step > job.progress.step:
        draft.set(**_step_time_stats(job, (draft.now - job.last_step_at)
                                     / (message.step - job.progress.step)))
    draft.set(last_step_at=draft.now)
    return True


_EWMA = 0.1
"""Weight of the newest step in the moving step-time statistics (about the last 20 steps)."""


def _step_time_stats(job: Job, step_s: float) -> dict[str, object]:
    """Exponentially weighted mean and variance of step times (West 1979)."""
    if job.step_s_mean is None:
        return {"step_s_mean": step_s, "step_s_var": 0.0}
    delta = step_s - job.step_s_mean
    mean = job.step_s_mean + _EWMA * delta
    var = (1 - _EWMA) * (job.step_s_var + _EWMA * delta * delta)
    return {"step_s_mean": mean, "step_s_var": var}


def _auto_cancel(draft: _Draft, reason: Literal["balance", "billing_limit", "wandb"],
                 detail: str) -> None:
    draft.set(status=JobStatus.CANCELLING, message=None)
    if reason == "wandb":
        draft.event(EventType.WANDB_INIT, f"WandB login or init failed: {detail}",
                    level=EventLevel.ERROR)
        draft.event(EventType.CANCEL_REQUESTED, "Job cancelled due to error in WandB login/init")
    elif reason == "billing_limit":
        draft.event(EventType.BILLING_LIMIT, f"Billing limit reached: {detail}",
                    level=EventLevel.WARNING)
        draft.event(EventType.CANCEL_REQUESTED, "Job cancelled because the billing limit was reached")
    else:
        draft.event(EventType.CANCEL_REQUESTED,
                    f"Job cancelled due to insufficient balance: {detail}")


def _exited(draft: _Draft, returncode: int | None, max_restarts: int,
            result_file: str | None) -> None:
    job, now = draft.job, draft.now
    ran = job.ran_s + (now - job.run_started_at if job.run_started_at is not None else 0.0)
    draft.set(ran_s=ran, run_started_at=None)
    if job.status is not JobStatus.CANCELLING and ends_paused(job, returncode):
        return paused(draft)  # at its latest checkpoint: the one it just saved, if it could
    if job.status in (JobStatus.RE_SCHEDULING, JobStatus.PAUSED):
        return  # it moves, or a pause stopped its run: the next run starts from its checkpoint
    if job.status is JobStatus.CANCELLING:
        draft.set(status=JobStatus.CANCELLED, finished_at=int(now))
        draft.event(EventType.JOB_STOPPED, "Job stopped due to cancel request")
        if job.cancel_free:
            draft.refund("the job had not finished by the end of its estimated time")
        else:
            draft.charge(job.progress.step)
        return
    if job.stop_reason is not None:
        _fail(draft, job.stop_reason, "stopped", EventType.JOB_STOPPED, level=EventLevel.WARNING)
        return
    error = job.trainer_error
    if returncode == 0 and job.fine_tuned_model and error is None:
        # A run stopped early ends at its last step, and is charged through that step only.
        last = job.stopped_early[0] if job.stopped_early else job.progress.max_steps
        done = job.progress.model_copy(update={"step": last, "max_steps": last})
        draft.set(status=JobStatus.SUCCEEDED, message=None, progress=done, finished_at=int(now),
                  result_files=(result_file,) if result_file else ())
        draft.charge(last)
        draft.event(EventType.JOB_COMPLETE, f"Job finished at {_clock(now)}", job.final_hash)
        return
    reason = error[1] if error else _exit_reason(returncode, job)
    if (error is not None and error[0] == "user") or isinstance(job.spec.trainer, CommandTrainer):
        # The account's own command failing is the user's failure, never the platform's:
        # no restart, no operator notice; its last words say why.
        said = error[1] if error else job.last_log_line or reason
        _fail(draft, Message.training_failed(said), "training_failed", EventType.JOB_USER_ERROR)
        return
    if job.restarts < max_restarts:
        draft.set(restarts=job.restarts + 1, restart_cause=reason, trainer_error=None)
        return
    _fail(draft, Message.PLATFORM_ERROR.value, "platform_error", EventType.JOB_ERROR,
          detail=reason)


def _fail(draft: _Draft, message: str, code: str, kind: EventType, *,
          detail: str | None = None, level: EventLevel = EventLevel.ERROR) -> None:
    draft.set(status=JobStatus.FAILED, message=message, finished_at=int(draft.now),
              error=JobError(code=code, message=message))
    draft.event(kind, f"{message} ({detail})" if detail else message, level=level)
    draft.refund("failed jobs cost nothing")


def _exit_reason(returncode: int | None, job: Job) -> str:
    if returncode is None:
        return "the trainer could not start"
    if returncode < 0:
        return f"the trainer was killed by signal {-returncode}"
    if returncode == 0:
        return "the trainer exited without finishing"
    return f"the trainer exited with code {returncode}"


def _clock(now: float) -> str:
    """The seeds' way of writing a time: ``Tue Jan 23 07:20:10 UTC 2024``."""
    return time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(now))
