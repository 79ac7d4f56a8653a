"""The job actor: the one writer of one job (DESIGN.md, rule 3).

It owns the job's trainer process. Everything that happens to the job comes
in through its mailbox (the trainer's lines, its exit, a cancel from a user),
goes through the pure state machine, is persisted, and only then published.
Cancel travels on the control lane, so it overtakes a backlog of progress.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import structlog
import trio

from actors import Actor

from . import _lifecycle as lifecycle
from ._bus import Item
from ._job import Event, Job, LogLine
from ._spec import CommandTrainer, SimulatedTrainer
from ._status import JobStatus
from ._trainer_process import TrainerProcess
from .trainers import Error, Log, TrainerConfig, parse_line

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["CancelJob", "JobActor", "JobMessage"]

log = structlog.get_logger("alallo.job")


@dataclass(frozen=True)
class CancelJob:
    """Stop the job for the user; the reply is the job after the request."""


@dataclass(frozen=True)
class _RunStarting:
    config_hash: str
    resume_step: int | None
    cause: str | None


@dataclass(frozen=True)
class _Waiting:
    pass


@dataclass(frozen=True)
class _TrainerLine:
    text: str


@dataclass(frozen=True)
class _TrainerEnded:
    returncode: int | None


JobMessage = CancelJob | _Waiting | _RunStarting | _TrainerLine | _TrainerEnded


class JobActor(Actor[JobMessage]):
    """Runs one job from its current state to a final one.

    On start it loads the job from the store and picks up where it stands:
    a queued job waits for a slot of the local node and starts its trainer;
    a job that was running when the server stopped starts again from its
    latest checkpoint (event JOB_RESTARTED); a cancelling job ends cancelled.
    """

    control_messages: ClassVar[tuple[type, ...]] = (CancelJob,)

    def __init__(self, runtime: Runtime, job_id: str) -> None:
        super().__init__()
        self._rt = runtime
        self._job_id = job_id
        self._job: Job | None = None
        self._run_scope: trio.CancelScope | None = None
        self._published_state_seq = 0

    @property
    def job(self) -> Job:
        """The job as this actor last persisted it."""
        if self._job is None:
            raise RuntimeError("the job actor has not started")
        return self._job

    async def on_start(self) -> None:
        job = await self._rt.store.get_job(self._job_id)
        if job is None:
            raise LookupError(f"job {self._job_id} is not in the store")
        self._job = job
        if job.status.is_final:
            self.stop()
        elif job.status is JobStatus.CANCELLING:
            await self._apply(lifecycle.TrainerExited(returncode=None, now=time.time()))
            self.stop()
        else:
            cause = "the server restarted" if job.status is not JobStatus.QUEUED else None
            self.nursery.start_soon(self._run, cause)

    async def handle(self, message: JobMessage) -> Any:
        now = time.time()
        match message:
            case CancelJob():
                await self._apply(lifecycle.CancelRequested(now=now))
                if self._run_scope is not None:
                    self._run_scope.cancel()
                return self.job
            case _Waiting():
                await self._apply(lifecycle.WaitingForCapacity(now=now))
            case _RunStarting(config_hash=digest, resume_step=step, cause=cause):
                await self._apply(lifecycle.Started(now=now, config_hash=digest,
                                                    resume_step=step, cause=cause))
            case _TrainerLine(text=text):
                await self._on_line(text, now)
            case _TrainerEnded(returncode=code):
                await self._apply(lifecycle.TrainerExited(returncode=code, now=now))
                if self.job.status.is_final:
                    self.stop()
        return None

    async def _on_line(self, text: str, now: float) -> None:
        message = parse_line(text)
        if isinstance(message, Log):
            if not message.text.strip():
                return
            job, line = lifecycle.append_log(self.job, message.text, now=now)
            await self._persist(job, (), (line,))
        else:
            await self._apply(lifecycle.TrainerReported(message=message, now=now))

    async def _apply(self, event: lifecycle.Input) -> None:
        transition = lifecycle.apply(self.job, event)
        if transition.changed:
            await self._persist(transition.job, transition.events, ())

    async def _persist(self, job: Job, events: tuple[Event, ...] | tuple[()],
                       lines: tuple[LogLine, ...] | tuple[()]) -> None:
        await self._rt.store.save_job(job, events, lines)
        self._job = job
        items = [Item(job.id, "event", e.seq, e.public(job.id)) for e in events]
        items += [Item(job.id, "log", line.n, line.public()) for line in lines]
        if job.state_seq > self._published_state_seq:
            items.append(Item(job.id, "job", job.state_seq, job.public(now=time.time())))
            self._published_state_seq = job.state_seq
        items.sort(key=lambda item: item.seq)
        self._rt.bus.publish(job.account_id, items)
        if events:
            for e in events:
                log.info("job.event", job_id=job.id, type=e.type.value, seq=e.seq)

    async def _run(self, cause: str | None) -> None:
        """Wait for a slot, run the trainer, report its end (a helper task)."""
        process: TrainerProcess | None = None
        with trio.CancelScope() as scope:
            self._run_scope = scope
            if self._rt.capacity.value == 0:
                await self.ref.tell(_Waiting())
            async with self._rt.capacity:
                job = self.job
                workdir = self._rt.settings.jobs_dir.resolve() / job.id
                attempt_dir = workdir / f"attempt-{job.attempt + 1}"
                attempt_dir.mkdir(parents=True, exist_ok=True)
                config = self._config(job, workdir)
                payload = config.model_dump_json(indent=2)
                config_path = attempt_dir / "config.json"
                config_path.write_text(payload)
                digest = hashlib.sha256(payload.encode()).hexdigest()[:16]
                resume = job.checkpoint.step if job.checkpoint else None
                await self.ref.tell(_RunStarting(digest, resume, cause))
                process = TrainerProcess(
                    self._command(config_path), cwd=attempt_dir,
                    output_log=attempt_dir / "trainer-output.log",
                    grace_s=self._rt.settings.cancel_grace_s,
                )
                try:
                    await process.run(self._line)
                except OSError as exc:  # the command is missing or not executable
                    await self.ref.tell(_TrainerLine(Error(
                        kind="user", message=f"cannot start the trainer: {exc}",
                    ).model_dump_json()))
        self._run_scope = None
        await self.ref.tell(_TrainerEnded(process.returncode if process else None))

    async def _line(self, text: str) -> None:
        await self.ref.tell(_TrainerLine(text))

    def _config(self, job: Job, workdir: Path) -> TrainerConfig:
        settings = self._rt.settings
        spec = job.spec
        hp = job.resolved_hyperparameters()
        file = self._rt.file_path(job.spec.training_file)
        trainer = spec.trainer
        model = self._rt.catalogue.resolve(spec.model)
        model_dir = model.local_path or settings.models_dir.resolve() / spec.model.replace("/", "--")
        return TrainerConfig(
            job_id=job.id,
            model=str(model_dir),
            model_name=spec.model,
            training_file=str(file),
            data_format=self._rt.file_format(job.spec.training_file),
            output_dir=str(workdir / "model"),
            checkpoint_dir=str(workdir / "checkpoints"),
            resume_from=job.checkpoint.path if job.checkpoint else None,
            adapter=spec.adapter,
            precision=spec.precision,
            max_steps=job.max_steps,
            n_epochs=hp["n_epochs"],
            batch_size=hp["batch_size"],
            learning_rate=hp["learning_rate"],
            lora_rank=hp["lora_rank"] or 8,
            seed=spec.seed or 0,
            step_delay_s=trainer.step_delay_s if isinstance(trainer, SimulatedTrainer) else 0.0,
            fail_at_step=trainer.fail_at_step if isinstance(trainer, SimulatedTrainer) else None,
        )

    def _command(self, config_path: Path) -> list[str]:
        trainer = self.job.spec.trainer
        python = self._rt.settings.python
        if isinstance(trainer, CommandTrainer):
            return [*trainer.command, str(config_path)]
        module = "simulated" if isinstance(trainer, SimulatedTrainer) else "trl"
        return [python, "-m", f"alallo.trainers.{module}", str(config_path)]
