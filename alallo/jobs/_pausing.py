"""Pause and resume in the job state machine (:mod:`alallo.jobs._lifecycle`), pure.

A user pauses a job (``POST /v1/fine_tuning/jobs/{id}/pause``) to give its capacity back
and pay nothing meanwhile, and resumes it later (``.../resume``) from where it stopped:

- a job that waits (``queued``: no trainer runs) is ``paused`` at once;
- a job that runs keeps ``running`` with the message ``Pausing: saving a checkpoint``
  (``pause_requested``) while its trainer saves a checkpoint at its current step and exits
  (``docs/trainer-protocol.md``, "Pausing"); when it has exited the job is ``paused``, its
  steps charged through that checkpoint (charged as any checkpoint is, once);
- a pause loses to whatever ends the run first: a cancel (the job ends ``cancelled``), a
  finish (``succeeded``), a user error or a limit (``failed``). A crash, a lost node or a
  server restart while pausing ends ``paused`` at the latest checkpoint.
- resume queues the job again (``queued``, ``Starting``); its next run starts from the
  checkpoint it was paused at (``JOB_RESTARTED``), and steps redone are never charged twice.

Time spent paused is kept (``paused_s``) so that it never counts as queue wait or as
lateness (``cancel_free``, docs/cancelling.md); the budget and time limit count running time
only (``ran_s``), so a pause spends neither.
"""

from __future__ import annotations

from .._errors import InvalidTransition
from .._status import EventType, JobStatus, Message
from ._draft import Draft
from ._job import Job

__all__ = ["RESUMED_BY_USER", "ends_paused", "pause", "paused", "paused_total", "resume"]

RESUMED_BY_USER = "resumed by user"
"""The cause of the run a resume starts (its ``JOB_RESTARTED`` event says it)."""


def pause(draft: Draft) -> bool:
    """Apply a user's pause; False when it changes nothing (already paused or pausing).

    Raises:
        InvalidTransition: the job is being cancelled (409).
    """
    job = draft.job
    if job.status is JobStatus.CANCELLING:
        raise InvalidTransition(f"cannot pause {job.id}: it is being cancelled")
    if job.status is JobStatus.PAUSED or job.pause_requested:
        return False
    draft.event(EventType.PAUSE_REQUESTED, "Pause requested by user")
    if job.status is JobStatus.QUEUED:
        paused(draft)  # no trainer runs: nothing to save
    else:  # running (or between two runs): the trainer saves a checkpoint, then stops
        draft.set(pause_requested=True, message=Message.PAUSING.value)
    return True


def ends_paused(job: Job, returncode: int | None) -> bool:
    """Whether a run that ended (``returncode``) leaves the job paused: a pause was asked,
    and the run neither finished well nor failed for the user's reasons."""
    if not job.pause_requested or job.stop_reason is not None:
        return False
    succeeded = returncode == 0 and job.fine_tuned_model is not None and job.trainer_error is None
    users = job.trainer_error is not None and job.trainer_error[0] == "user"
    return not (succeeded or users)


def paused(draft: Draft) -> None:
    """The job stops as ``paused`` at its latest checkpoint (or at the start without one)."""
    job, now = draft.job, draft.now
    step = job.checkpoint.step if job.checkpoint else 0
    draft.set(status=JobStatus.PAUSED, message=Message.paused(step), pause_requested=False,
              paused_at=now, restart_cause=None, trainer_error=None, queue_position=None,
              progress=job.progress.model_copy(update={"step": step}))
    draft.event(EventType.JOB_PAUSED, f"Job paused at step {step}: it holds no capacity and "
                "costs nothing until it is resumed", step=step)


def resume(draft: Draft) -> None:
    """Queue a paused job again.

    Raises:
        InvalidTransition: the job is not paused (409): it is pausing still, or live.
    """
    job, now = draft.job, draft.now
    if job.status is not JobStatus.PAUSED:
        doing = "it is still pausing" if job.pause_requested else f"it is {job.status.value}"
        raise InvalidTransition(f"cannot resume {job.id}: it is not paused ({doing})")
    step = job.checkpoint.step if job.checkpoint else 0
    draft.set(status=JobStatus.QUEUED, message=Message.STARTING.value, paused_at=None,
              paused_s=paused_total(job, now), restart_cause=RESUMED_BY_USER)
    draft.event(EventType.JOB_RESUMED, "Job resumed by user: it continues from the "
                f"checkpoint at step {step}" if step else
                "Job resumed by user: it starts from the beginning", step=step or None)


def paused_total(job: Job, now: float) -> float:
    """Seconds the job has spent paused, the current pause included."""
    current = now - job.paused_at if job.paused_at is not None else 0.0
    return job.paused_s + max(0.0, current)
