"""The job state machine: ``(job, input) -> (job', events)``, pure.

Every rule of the seeds about what a user sees (statuses, messages, events)
is decided here and nowhere else; the job actor feeds inputs in, persists
what comes out, then publishes it (DESIGN.md, "persist, then publish").
Nothing here reads a clock or touches a file: the time comes in the input.

Sequence numbers are handed out here too, so that they are part of the
state: a transition's events get the next numbers in order, then the job
itself (it changed) gets the one after. A transition that changes nothing
returns the job as it was and no events.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from ._errors import InvalidTransition
from ._job import Event, Job, JobError, LogLine, Progress, SavedCheckpoint
from ._status import EventLevel, EventType, JobStatus, Message
from .trainers import Checkpoint, Done, Error, Log, Stage
from .trainers import Progress as TrainerProgress

__all__ = [
    "CancelRequested",
    "Created",
    "Input",
    "Started",
    "TrainerExited",
    "TrainerReported",
    "Transition",
    "WaitingForCapacity",
    "append_log",
    "apply",
]


@dataclass(frozen=True)
class Created:
    """The job was accepted (``POST /v1/fine_tuning/jobs``)."""

    now: float


@dataclass(frozen=True)
class WaitingForCapacity:
    """The job is ready to start but no capacity is free."""

    now: float


@dataclass(frozen=True)
class Started:
    """A trainer process is starting for the job (a new attempt)."""

    now: float
    config_hash: str | None = None
    resume_step: int | None = None
    """The checkpoint step the run resumes from, or None for a fresh start."""
    cause: str | None = None
    """Why the job restarts (for JOB_RESTARTED), when it is not the first run."""


@dataclass(frozen=True)
class TrainerReported:
    """The trainer printed a protocol message (other than a log line)."""

    message: Stage | TrainerProgress | Checkpoint | Done | Error
    now: float


@dataclass(frozen=True)
class TrainerExited:
    """The trainer process ended (``returncode``), or never ran (None)."""

    returncode: int | None
    now: float


@dataclass(frozen=True)
class CancelRequested:
    """The user asked to cancel the job."""

    now: float


Input = Created | WaitingForCapacity | Started | TrainerReported | TrainerExited | CancelRequested


@dataclass(frozen=True)
class Transition:
    """What an input did: the new job and the events to add, in order."""

    job: Job
    events: tuple[Event, ...] = ()
    changed: bool = True
    """False when the input changed nothing: there is nothing to persist."""


def apply(job: Job, event: Input) -> Transition:
    """Apply one input to a job.

    Raises:
        InvalidTransition: the input is not allowed in the job's status, for
            example cancelling a job that has finished.
    """
    if job.status.is_final:
        if isinstance(event, CancelRequested):
            raise InvalidTransition(
                f"cannot cancel job {job.id}: it is {job.status.value}"
            )
        return _unchanged(job)
    match event:
        case Created(now=now):
            return _emit(job, {"message": Message.STARTING.value}, now,
                         (EventType.JOB_PENDING, "Fine tune request created", None))
        case WaitingForCapacity(now=now):
            if job.status is not JobStatus.QUEUED:
                return _unchanged(job)
            return _emit(job, {"message": Message.WAITING_FOR_CAPACITY.value}, now)
        case Started():
            return _started(job, event)
        case TrainerReported(message=message, now=now):
            return _reported(job, message, now)
        case TrainerExited(returncode=code, now=now):
            return _exited(job, code, now)
        case CancelRequested(now=now):
            if job.status is JobStatus.CANCELLING:
                return _unchanged(job)
            return _emit(job, {"status": JobStatus.CANCELLING, "message": None}, now,
                         (EventType.CANCEL_REQUESTED, "Cancel requested by user", None))
    raise TypeError(f"not a lifecycle input: {event!r}")


def append_log(job: Job, text: str, *, now: float) -> tuple[Job, LogLine]:
    """Add a line to the current attempt's training log."""
    seq = job.seq + 1
    line = LogLine(n=seq, at=now, text=text, attempt=max(job.attempt, 1))
    updates: dict[str, object] = {"seq": seq, "log_lines": job.log_lines + 1}
    if text.strip():
        updates["last_log_line"] = text
    return job.model_copy(update=updates), line


def _started(job: Job, event: Started) -> Transition:
    if job.status is JobStatus.CANCELLING:
        return _unchanged(job)
    now = event.now
    attempt = job.attempt + 1
    updates: dict[str, object] = {
        "status": JobStatus.RUNNING,
        "message": None,
        "attempt": attempt,
        "run_started_at": now,
        "first_step_at": None,
        "first_step": event.resume_step or 0,
        "log_lines": 0,
        "last_log_line": None,
        "trainer_error": None,
        "started_at": job.started_at or int(now),
    }
    if event.resume_step is not None:
        updates["progress"] = job.progress.model_copy(update={"step": event.resume_step})
    events: list[tuple[EventType, str, str | None]] = []
    if attempt > 1:
        resumed = (f" from the checkpoint at step {event.resume_step}"
                   if event.resume_step is not None else " from the start")
        events.append((EventType.JOB_RESTARTED,
                       f"Job restarted{resumed}: {event.cause or 'the previous run stopped'}",
                       None))
    events.append((EventType.JOB_START, f"Job started at {_clock(now)}", event.config_hash))
    return _emit(job, updates, now, *events)


def _reported(job: Job, message: Stage | TrainerProgress | Checkpoint | Done | Error,
              now: float) -> Transition:
    model = job.spec.model
    match message:
        case Stage(stage="model_loaded", hash=h):
            return _emit(job, {}, now, (EventType.MODEL_DOWNLOAD_COMPLETE,
                                        f"Model data downloaded for {model} at {_clock(now)}", h))
        case Stage(stage="data_loaded", hash=h):
            return _emit(job, {}, now, (EventType.TRAINING_DATA_DOWNLOAD_COMPLETE,
                                        f"Training data downloaded for {model} at {_clock(now)}", h))
        case Stage(stage="training_start", hash=h):
            return _emit(job, {}, now, (EventType.TRAINING_START,
                                        f"Training started for model {model}", h))
        case TrainerProgress():
            return _progress(job, message, now)
        case Checkpoint(step=step, path=path, hash=h):
            saved = SavedCheckpoint(step=step, path=path, created_at=int(now), hash=h)
            return _emit(job, {"checkpoint": saved}, now,
                         (EventType.CHECKPOINT_SAVE, f"Checkpoint saved at step {step}", h),
                         step=step)
        case Done(model_path=path, hash=h):
            return _emit(job, {"fine_tuned_model": path, "final_hash": h}, now,
                         (EventType.TRAINING_COMPLETE, "Training completed", h))
        case Error(kind=kind, message=text):
            return _emit(job, {"trainer_error": (kind, text)}, now)
    raise TypeError(f"not a trainer message: {message!r}")


def _progress(job: Job, message: TrainerProgress, now: float) -> Transition:
    if message.step <= job.progress.step and job.first_step_at is not None:
        return _unchanged(job)
    progress = Progress(
        step=min(message.step, message.max_steps),
        max_steps=job.progress.max_steps,
        epoch=message.epoch if message.epoch is not None else job.progress.epoch,
        loss=message.loss if message.loss is not None else job.progress.loss,
    )
    updates: dict[str, object] = {"progress": progress}
    if job.first_step_at is None:
        updates["first_step_at"] = now
        updates["first_step"] = message.step
    return _emit(job, updates, now)


def _exited(job: Job, returncode: int | None, now: float) -> Transition:
    final: dict[str, object] = {"finished_at": int(now), "message": None}
    if job.status is JobStatus.CANCELLING:
        return _emit(job, {**final, "status": JobStatus.CANCELLED}, now,
                     (EventType.JOB_STOPPED, "Job stopped due to cancel request", None))
    error = job.trainer_error
    if returncode == 0 and job.fine_tuned_model and error is None:
        done = job.progress.model_copy(update={"step": job.progress.max_steps})
        return _emit(job, {**final, "status": JobStatus.SUCCEEDED, "progress": done}, now,
                     (EventType.JOB_COMPLETE, f"Job finished at {_clock(now)}", job.final_hash))
    if error is not None and error[0] == "user":
        text = Message.training_failed(error[1])
        return _emit(
            job,
            {**final, "status": JobStatus.FAILED, "message": text,
             "error": JobError(code="training_failed", message=text)},
            now,
            (EventType.JOB_USER_ERROR, text, None),
            level=EventLevel.ERROR,
        )
    reason = error[1] if error else _exit_reason(returncode)
    return _emit(
        job,
        {**final, "status": JobStatus.FAILED, "message": Message.PLATFORM_ERROR.value,
         "error": JobError(code="platform_error", message=Message.PLATFORM_ERROR.value)},
        now,
        (EventType.JOB_ERROR, f"{Message.PLATFORM_ERROR.value} ({reason})", None),
        level=EventLevel.ERROR,
    )


def _exit_reason(returncode: int | None) -> str:
    if returncode is None:
        return "the trainer could not start"
    if returncode < 0:
        return f"the trainer was killed by signal {-returncode}"
    return f"the trainer exited with code {returncode}"


def _emit(
    job: Job,
    updates: dict[str, object],
    now: float,
    *events: tuple[EventType, str, str | None],
    level: EventLevel = EventLevel.INFO,
    step: int | None = None,
) -> Transition:
    seq = job.seq
    made: list[Event] = []
    for kind, text, digest in events:
        seq += 1
        made.append(Event(seq=seq, created_at=int(now), type=kind, message=text,
                          level=level, hash=digest, step=step))
    return Transition(job.model_copy(update={**updates, "seq": seq + 1, "state_seq": seq + 1}), tuple(made))


def _unchanged(job: Job) -> Transition:
    return Transition(job, changed=False)


def _clock(now: float) -> str:
    """The seeds' way of writing a time: ``Tue Jan 23 07:20:10 UTC 2024``."""
    return time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(now))

