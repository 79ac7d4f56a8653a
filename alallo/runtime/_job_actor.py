"""The job actor: the one writer of one job (DESIGN.md, rule 3).

It owns the job's trainer process. Everything that happens to the job comes
in through its mailbox (the trainer's lines, its exit, a cancel from a user,
a limit reached), goes through the pure state machine, is persisted, and
only then published. Cancel, pause and resume travel on the control lane, so
they overtake a backlog of progress lines (pausing: :mod:`alallo.runtime._run_pause`).

Across processes the actor writes with its node's lease epoch (a fencing
token, :mod:`alallo.cluster._cluster`): when the store refuses a write
(:class:`~alallo.store.LeaseLost`), another process has adopted the job, so
the actor stops its trainer and stops without touching the job again.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import structlog
import trio

from actors import Actor, ActorError

from .._errors import InvalidRequest
from .._status import EventType, JobStatus
from ..capacity import Acquire, Grant, Release
from ..executors import TrainerRun
from ..jobs import Event, Job, LogLine, MetricsPoint, billing_limit_detail, lifecycle
from ..jobs._pausing import RESUMED_BY_USER
from ..store import LeaseLost
from ..trainers import Checkpoint, Error, Log, Metrics, parse_line
from ._job_context import JobContext
from ._job_messages import (
    CancelJob,
    JobMessage,
    PauseJob,
    RescheduleJob,
    ResumeJob,
    _CannotAfford,
    _LimitReached,
    _NotAvailable,
    _PauseOverdue,
    _RunStarting,
    _TrainerEnded,
    _TrainerLine,
    _Waiting,
)
from ._launch import launch, prune_checkpoints, users_own_command
from ._operator import ACTOR_RESTARTED, SERVER_RESTARTED, count_restart
from ._run_pause import ask_to_pause, overdue_after
from ._run_guards import cannot_afford, watch_limits
from ._run_prep import prepare_run
from ._views import placement_view

if TYPE_CHECKING:
    from ..jobs import LedgerEntry

__all__ = ["JobActor"]

log = structlog.get_logger("alallo.job")


class JobActor(Actor[JobMessage]):
    """Runs one job from its current state to a final one.

    On start it loads the job from the store and picks up where it stands:
    a queued job waits for a slot of the local node and starts its trainer;
    a job that was running when the server stopped starts again from its
    latest checkpoint (event JOB_RESTARTED); a cancelling job ends cancelled; a paused
    job waits for its resume (one caught pausing is paused: its trainer is gone).
    """

    control_messages: ClassVar[tuple[type, ...]] = (CancelJob, PauseJob, ResumeJob,
                                                    RescheduleJob)

    def __init__(self, context: JobContext, job_id: str, cause: str | None = None) -> None:
        super().__init__()
        self._ctx = context
        self._job_id = job_id
        self._cause = cause
        """Why a running job starts again here (None: the server restarted)."""
        self._fenced = False
        self._job: Job | None = None
        self._run_scope: trio.CancelScope | None = None
        self._writer = context.writer()
        self._running = False
        """A run task exists (waiting for capacity, starting, or running the trainer)."""
        self._run_dir: Path | None = None
        """The directory of the run whose trainer starts or runs (its pause file goes there)."""
        self._restart_when_ended = False
        """A resume came while the run a pause stopped was ending: start the next one then."""

    @property
    def job(self) -> Job:
        """The job as this actor last persisted it."""
        if self._job is None:
            raise RuntimeError("the job actor has not started")
        return self._job

    def snapshot(self) -> Job | None:
        """The job as last committed (the supervisor's checkpoint of this actor)."""
        return self._job

    def restore(self, snapshot: object) -> None:
        """Start from a checkpoint: the job's last committed state."""
        if isinstance(snapshot, Job):
            self._job = snapshot

    async def on_start(self) -> None:
        try:
            await self._start()
        except LeaseLost as exc:
            self._lose_lease(exc)

    async def _start(self) -> None:
        job = self._job or await self._ctx.load(self._job_id)
        if job is None:
            raise LookupError(f"job {self._job_id} is not in the store")
        self._job = job
        self._writer.published_state_seq = job.state_seq
        if job.status.is_final:
            self.stop()
        elif job.status is JobStatus.CANCELLING:
            await self._apply(lifecycle.TrainerExited(returncode=None, now=time.time()))
        else:
            running = job.status is not JobStatus.QUEUED or job.restart_cause is not None
            again = (ACTOR_RESTARTED if self.incarnation > 1
                     else self._cause or SERVER_RESTARTED)
            cause = job.restart_cause or (again if running else None)
            if self._ctx.take_cancel_request(job.id):
                await self._apply(lifecycle.CancelRequested(now=time.time()))
                if self._job is None or self.job.status.is_final or self._fenced:
                    return
            if self.job.pause_requested:  # it was pausing: its trainer is gone, paused
                await self._apply(lifecycle.TrainerExited(returncode=None, now=time.time()))
            if self.job.status is not JobStatus.PAUSED:  # a paused job waits for its resume
                self._start_run(cause)

    def _lose_lease(self, exc: LeaseLost) -> None:
        """Another process took the job: stop the trainer, then this actor, writing nothing."""
        log.warning("job.lease_lost", job_id=self._job_id, epoch=exc.epoch)
        self._fenced = True
        self._ctx.release(self._job_id)
        if self._run_scope is not None:
            self._run_scope.cancel()
        self.stop()

    def _start_run(self, cause: str | None) -> None:
        self._running = True
        self.nursery.start_soon(self._run, cause)

    async def handle(self, message: JobMessage) -> Any:
        if self._fenced:
            return None
        try:
            return await self._handle(message)
        except LeaseLost as exc:
            self._lose_lease(exc)
            return None

    async def _handle(self, message: JobMessage) -> Any:
        now = time.time()
        match message:
            case CancelJob():
                await self._apply(lifecycle.CancelRequested(now=now))
                return self.job
            case PauseJob():
                await self._apply(lifecycle.PauseRequested(now=now))
                return self.job
            case ResumeJob():
                ending = self._running  # the run a pause stopped has not ended yet
                await self._apply(lifecycle.ResumeRequested(now=now))
                self._restart_when_ended = ending
                return self.job
            case _PauseOverdue(run=run):
                if run is not None and run is self._run_scope:
                    run.cancel()
            case RescheduleJob(reason=reason):
                await self._apply(lifecycle.Rescheduled(now=now, reason=reason))
            case _Waiting(position=position):
                await self._apply(lifecycle.WaitingForCapacity(now=now, position=position))
            case _NotAvailable(lower_precision_fits=lower, detail=detail):
                await self._apply(lifecycle.NotAvailable(now=now, lower_precision_fits=lower,
                                                         detail=detail))
            case _CannotAfford(detail=detail):
                await self._apply(lifecycle.AutoCancel(now=now, reason="balance", detail=detail))
            case _RunStarting(config_hash=digest, resume_step=step, cause=cause, grant=grant):
                await self._apply(lifecycle.Started(
                    now=now, config_hash=digest, resume_step=step, cause=cause,
                    plan=grant.plan, placement=placement_view(grant.placement)))
            case _TrainerLine(text=text):
                await self._on_line(text, now)
            case _TrainerEnded(returncode=code, node_lost=lost):
                # The run counts as running until its end is handled here: lines it
                # printed before it ended are still queued, and handling them must
                # not start the next run (whose start this stale end would then fail).
                if lost is not None:  # not the trainer's doing: the job moves, resumed
                    await self._apply(lifecycle.Rescheduled(now=now, reason=lost))
                self._running = False
                if self._restart_when_ended:  # the end of the run a pause stopped
                    self._restart_when_ended = False
                    if self.job.status is JobStatus.QUEUED:
                        self._start_run(self.job.restart_cause)
                    return None
                job = self.job
                made = (await self._ctx.save_results(job) if code == 0 and job.fine_tuned_model
                        and job.status is JobStatus.RUNNING and job.trainer_error is None
                        else None)  # the metrics CSV of a job about to succeed
                await self._apply(lifecycle.TrainerExited(
                    returncode=code, now=time.time(),
                    max_restarts=self._ctx.settings.max_restarts, result_file=made))
            case _LimitReached(limit=limit):
                await self._apply(lifecycle.LimitReached(now=now, limit=limit))
        return None

    async def _on_line(self, text: str, now: float) -> None:
        message = parse_line(text)
        if isinstance(message, Log):
            if message.text.strip():
                job, line = lifecycle.append_log(self.job, message.text, now=now)
                await self._persist(job, (), (line,), ())
        elif isinstance(message, Metrics):  # a point of the series; an evaluation's event
            job, point = lifecycle.append_metrics(self.job, message, now=now)
            told = lifecycle.apply(job, lifecycle.TrainerReported(message=message, now=now))
            await self._persist(told.job, told.events, (point,), ())
        elif isinstance(message, Checkpoint) and self._ctx.checkpoint_storage.shared:
            # Recorded only once any process can fetch it (storage_url).
            try:
                await self._ctx.checkpoint_storage.upload(self.job.id, Path(message.path))
            except OSError as exc:
                log.warning("job.checkpoint_not_shared", job_id=self.job.id,
                            step=message.step, error=str(exc))
                reason = exc.strerror or str(exc)
                job, line = lifecycle.append_log(
                    self.job, lifecycle.checkpoint_not_shared(message.step, reason), now=now)
                told = lifecycle.apply(job, lifecycle.CheckpointNotShared(now, message.step,
                                                                          reason))
                await self._persist(told.job, told.events, (line,), ())  # one commit
                return
            await self._apply(lifecycle.TrainerReported(message=message, now=now))
        else:
            await self._apply(lifecycle.TrainerReported(message=message, now=now))
            # Ours to delete on a fenced executor, and earlier runs' (the newest 3 stay); with
            # early stopping the best may be any of them: none goes before the job ends.
            if (isinstance(message, Checkpoint) and self.job.spec.early_stopping is None
                    and (self._ctx.executor.fenced or self.job.attempt > 1)):
                job_dir = self._ctx.settings.jobs_dir / self._job_id
                await trio.to_thread.run_sync(prune_checkpoints, job_dir, message.path)

    async def _apply(self, event: lifecycle.Input) -> None:
        before = self.job
        transition = lifecycle.apply(before, event)
        if not transition.changed:
            return
        balance, billing_limit = await self._persist(
            transition.job, transition.events, (), transition.ledger)
        if isinstance(event, lifecycle.Started) and event.cause != RESUMED_BY_USER and any(
                e.type is EventType.JOB_RESTARTED for e in transition.events):
            count_restart(event.cause)
        charged = any(entry.kind == "charge" for entry in transition.ledger)
        await self._react(before, transition.job, transition.events,
                          balance + billing_limit if charged else None)

    async def _react(self, before: Job, job: Job, events: tuple[Event, ...],
                     headroom: float | None) -> None:
        """Do what the new state asks for: stop the trainer, restart it, tell the operator."""
        if job.status.is_final:
            if self._run_scope is not None:
                self._run_scope.cancel()
            for event in events:
                if event.type is EventType.JOB_ERROR:
                    self._ctx.notify_operator(job.id, event.message)
            self._ctx.release(job.id)
            self.stop()
            return
        stopping = job.status is JobStatus.CANCELLING or job.stop_reason is not None
        if stopping and self._running:
            if self._run_scope is not None:
                self._run_scope.cancel()
        elif stopping:
            # Nothing runs (queued, or between runs): the job ends now.
            await self._apply(lifecycle.TrainerExited(returncode=None, now=time.time()))
        elif job.status is JobStatus.PAUSED or job.pause_requested:
            if not (before.status is JobStatus.PAUSED or before.pause_requested):
                await self._pause_run(job)
        elif job.restart_cause is not None:
            if not self._running:
                self._start_run(job.restart_cause)
            elif job.status is JobStatus.RE_SCHEDULING and self._run_scope is not None:
                self._run_scope.cancel()  # stop this run; the next one starts when it has ended
        elif headroom is not None and headroom <= 0 and job.status is JobStatus.RUNNING:
            await self._apply(lifecycle.AutoCancel(
                now=time.time(), reason="billing_limit",
                detail=billing_limit_detail(headroom)))

    async def _pause_run(self, job: Job) -> None:
        """Stop the run for a pause: a trainer that runs is asked to save a checkpoint first
        (its pause file) and stopped after ``Settings.pause_grace_s`` if it has not; any other
        run (waiting for capacity, starting) stops now."""
        if not self._running:
            if job.pause_requested:  # between two runs: nothing to save
                await self._apply(lifecycle.TrainerExited(returncode=None, now=time.time()))
        elif (job.status is JobStatus.PAUSED or self._run_dir is None
              or not await ask_to_pause(self._run_dir)):
            if self._run_scope is not None:
                self._run_scope.cancel()
        else:
            self.nursery.start_soon(overdue_after, self.ref, self._run_scope,
                                    self._ctx.settings.pause_grace_s)

    async def _persist(self, job: Job, events: tuple[Event, ...],
                       lines: tuple[LogLine | MetricsPoint, ...],
                       entries: tuple[LedgerEntry, ...]) -> tuple[float, float]:
        balance = await self._writer.write(job, events, lines, entries)
        self._job = job
        return balance

    async def _run(self, cause: str | None) -> None:
        """Wait for a placement, run the trainer, report its end (a helper task)."""
        job = self.job
        if job.verdict != "ok":
            try:  # why, in words (the plans again: the job keeps only its verdict)
                detail = (await self._ctx.replan(job)).detail
            except InvalidRequest:  # its training file is gone: the bare message
                detail = None
            await self.ref.tell(_NotAvailable(job.verdict == "choose_lower_precision", detail))
            return await self._end_run(None)
        scheduler = self._ctx.scheduler
        if scheduler is None:
            raise RuntimeError("the runtime has no scheduler")
        options = job.options or (job.plan,)
        if job.memory_factor > 1.0:
            replanned = await self._ctx.replan(job)
            if not replanned.options:
                await self.ref.tell(_NotAvailable(False, replanned.detail))
                return await self._end_run(None)
            options = replanned.options
        process: TrainerRun | None = None
        send, receive = trio.open_memory_channel[Grant](1)
        with trio.CancelScope() as self._run_scope:
            try:
                await scheduler.tell(Acquire(job.id, options, job.spec.goal,
                                             send, self._on_queue_position))
                grant = await receive.receive()
                job = self.job
                if (job.status in (JobStatus.CANCELLING, JobStatus.PAUSED)
                        or job.stop_reason is not None or job.pause_requested):
                    return await self._end_run(None)  # stopped while it waited
                if job.attempt == 0 and (detail := await cannot_afford(self._ctx, job)):
                    await self.ref.tell(_CannotAfford(detail))
                    return await self._end_run(None)
                process = await self._launch(job, grant, cause)
            finally:
                lost = bool(process and process.end and process.end.node_lost)
                with trio.CancelScope(shield=True):
                    await scheduler.tell(Release(job.id, node_lost=lost))
        await self._end_run(process)

    def _on_queue_position(self, position: int) -> None:
        # Called from the scheduler's turn: never wait on our own mailbox there.
        with contextlib.suppress(ActorError):
            self.ref.try_tell(_Waiting(position))

    async def _launch(self, job: Job, grant: Grant,
                      cause: str | None) -> TrainerRun | None:
        """Start the trainer on the granted placement and run it to its end (None: it
        could not start; the reason goes to the job as an error line)."""
        rt = self._ctx
        prepared = await prepare_run(rt, job, grant)
        if isinstance(prepared, Error):
            await self._line(prepared.model_dump_json())
            return None
        command, attempt_dir = prepared.command, prepared.run_dir
        digest, resume = prepared.config_hash, prepared.resume_step
        self._run_dir = attempt_dir
        await self.ref.tell(_RunStarting(digest, resume, cause, grant))
        process = rt.executor.trainer(launch(job, grant.placement, command, attempt_dir,
                                             rt.trainer_user, rt.settings.hf_token))
        async with trio.open_nursery() as run:
            run.start_soon(watch_limits, self.ref, rt.settings, job)
            try:
                await process.run(self._line)
            except OSError as exc:  # the command is missing or not executable
                kind: Literal["user", "platform"] = (
                    "user" if users_own_command(job) else "platform")
                await self._line(Error(kind=kind, message=(
                    f"cannot start the trainer: {exc}")).model_dump_json())
            run.cancel_scope.cancel()
        return process

    async def _end_run(self, process: TrainerRun | None) -> None:
        self._run_scope = self._run_dir = None
        await self.ref.tell(_TrainerEnded.of(process.end if process else None))

    async def _line(self, text: str) -> None:
        await self.ref.tell(_TrainerLine(text))
