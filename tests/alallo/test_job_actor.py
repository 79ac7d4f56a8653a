"""One `JobActor` under a real supervisor, driven by a fake `JobContext` (LAYOUT.md §5).

The trainer is the real simulated one, a child process; all the actor asks of the runtime
is answered in memory here and every commit is recorded, so each test asserts what the
actor wrote (statuses in order, events, log lines, ledger entries), waiting on the commits
themselves, never on a fixed sleep.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from actors import Actor, Restart, Supervisor, open_supervisor
from alallo import EventType, JobSpec, JobStatus, Message
from alallo._trainer_registry import TrainerRegistry
from alallo.capacity import (
    Acquire,
    Catalogue,
    Grant,
    NodeSpec,
    Placement,
    PlanOptions,
    Pool,
    Release,
    SchedulerMessage,
    plan_options,
)
from alallo.cluster import CheckpointStorage
from alallo.executors import Executor, Launch, LineSink, LocalExecutor, RunEnd, TrainerRun
from alallo.jobs import (
    Event,
    Job,
    LedgerEntry,
    LogLine,
    Progress,
    estimate_price,
    estimate_time,
    lifecycle,
)
from alallo.jobs._billing import step_price
from alallo.runtime._actor_failure import fail_job
from alallo.runtime._job_actor import JobActor
from alallo.runtime._job_actors import JobActors
from alallo.runtime._job_messages import CancelJob, RescheduleJob
from alallo.runtime._starter import JOB_ACTOR_BACKOFF, JOB_ACTOR_INTENSITY
from alallo.settings import Settings
from alallo.store import LeaseLost, StoreUnavailable
from alallo.trainers import Checkpoint, parse_line
from alallo.trainers.simulated import fake_loss

pytestmark = pytest.mark.unit

TIMEOUT_S = 30.0
"""The longest any wait here may take (a slow, shared machine); a hang fails the test."""
BALANCE = (1000.0, 0.0)
"""The account's ``(balance, billing_limit)``: always enough."""
POOL = Pool([NodeSpec(name="n1", device="cpu", count=1)])
Q, RUNNING, DONE = JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.SUCCEEDED


@dataclass(frozen=True)
class Commit:
    """One write of the actor: the job as committed, with what came with it."""

    job: Job
    events: tuple[Event, ...]
    lines: tuple[LogLine, ...]
    entries: tuple[LedgerEntry, ...]


class FakeWriter:
    """`JobCommits` recording each write in its context, or raising ``context.fault(job)``
    when that says so (the write is then counted in ``context.refused``, not recorded)."""

    def __init__(self, context: FakeContext, published_state_seq: int) -> None:
        self._context = context
        self.published_state_seq = published_state_seq

    async def write(self, job: Job, events: tuple[Event, ...] = (),
                    lines: tuple[LogLine, ...] = (),
                    entries: tuple[LedgerEntry, ...] = ()) -> tuple[float, float]:
        await trio.lowlevel.checkpoint()
        context = self._context
        fault = context.fault(job) if context.fault else None
        if fault is not None:
            context.refused += 1
            raise fault
        self.published_state_seq = max(self.published_state_seq, job.state_seq)
        context.record(Commit(job, events, lines, entries))
        return BALANCE


class FakeContext:
    """A `JobContext` in memory, for one job.

    ``jobs`` is the store (``load`` reads it, each commit replaces the job); ``commits`` every
    write, in order; ``fault`` (if set) decides whether a write raises instead. Releases of
    the lease, operator notices, capacity asked and given back, and jobs given up are
    recorded; ``training_file`` is a small real JSONL file. `wait_for` wakes at each commit.
    """

    def __init__(self, settings: Settings, job: Job, data: Path) -> None:
        self.settings = settings
        self.catalogue = Catalogue()
        self.trainers = TrainerRegistry([])
        self.trainer_user = None
        self.checkpoint_storage = CheckpointStorage(None)
        self.executor: Executor = LocalExecutor(grace_s=settings.cancel_grace_s)
        self.scheduler: Any = None
        self.jobs = {job.id: job}
        self.job_id = job.id
        self.created = job
        self.data = data
        self.commits: list[Commit] = []
        self.fault: Callable[[Job], BaseException | None] | None = None
        self.refused = 0
        self.cancel_requests: set[str] = set()
        self.released: list[str] = []
        self.notified: list[tuple[str, str]] = []
        self.capacity: list[tuple[str, str]] = []
        self.given_up: list[str] = []
        self._changed = trio.Event()

    async def load(self, job_id: str) -> Job | None:
        """The job as last committed."""
        return self.jobs.get(job_id)

    def writer(self, published_state_seq: int = 0) -> FakeWriter:
        """A writer recording here."""
        return FakeWriter(self, published_state_seq)

    async def balance(self, account_id: str) -> tuple[float, float]:
        """Always `BALANCE`."""
        return BALANCE

    def take_cancel_request(self, job_id: str) -> bool:
        """Whether a cancel was left in ``cancel_requests``, consuming it."""
        asked = job_id in self.cancel_requests
        self.cancel_requests.discard(job_id)
        return asked

    def release(self, job_id: str) -> None:
        """Recorded in ``released``."""
        self.released.append(job_id)

    async def replan(self, job: Job) -> PlanOptions:
        """The job's own plan again."""
        return PlanOptions((job.plan,), "ok")

    async def may_run_commands(self, account_id: str) -> bool:
        """Always allowed (the simulated trainer is built in anyway)."""
        return True

    async def training_file(self, file_id: str) -> tuple[str, Any]:
        """The JSONL file in the test's tmp_path, as text rows."""
        return str(self.data), "text"

    def notify_operator(self, job_id: str, reason: str) -> None:
        """Recorded in ``notified``."""
        self.notified.append((job_id, reason))

    async def save_results(self, job: Job) -> str | None:
        """A results file id, as if the metrics CSV were stored."""
        return f"file-{job.id}-metrics"

    def record(self, commit: Commit) -> None:
        """Keep a commit, make it the stored job, wake `wait_for`."""
        self.commits.append(commit)
        self.jobs[commit.job.id] = commit.job
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[Job], bool]) -> Job:
        """Wait until the stored job satisfies ``predicate`` (at most `TIMEOUT_S`)."""
        with trio.fail_after(TIMEOUT_S):
            while not predicate(self.job):
                await self._changed.wait()
        return self.job

    async def wait_final(self, supervisor: Supervisor) -> Job:
        """Wait until the job is final and its actor gone for good."""
        job = await self.wait_for(lambda j: j.status.is_final)
        await stopped_for_good(supervisor, self.job_id)
        return job

    @property
    def job(self) -> Job:
        return self.jobs[self.job_id]

    def statuses(self) -> list[JobStatus]:
        """The statuses the job went through, the created one first, repeats folded."""
        seen = [self.created.status]
        for commit in self.commits:
            if commit.job.status is not seen[-1]:
                seen.append(commit.job.status)
        return seen

    def events(self) -> list[Event]:
        return [e for c in self.commits for e in c.events]

    def types(self) -> list[EventType]:
        return [e.type for e in self.events()]

    def lines(self, attempt: int | None = None) -> list[str]:
        return [line.text for c in self.commits for line in c.lines if isinstance(line, LogLine)
                if attempt is None or line.attempt == attempt]

    def charged_steps(self) -> list[int]:
        """Every step charged, once per time it was charged, in order."""
        return [step for c in self.commits for e in c.entries if e.kind == "charge"
                for step in range(e.first_step, e.last_step + 1)]


class LosesItsNodeOnce:
    """Runs trainers here, but the first run's node is lost right after its first checkpoint:
    the run ends as a Ray run ends when its raylet dies (`RunEnd.node_lost`)."""

    name = "local"
    fenced = False

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.lost = False

    def trainer(self, launch: Launch) -> TrainerRun:
        run = self.inner.trainer(launch)
        if self.lost:
            return run
        self.lost = True
        return _LostAfterCheckpoint(run, launch.node)


class _LostAfterCheckpoint:
    def __init__(self, inner: TrainerRun, node: str) -> None:
        self.inner = inner
        self.node = node
        self.end: RunEnd | None = None

    async def run(self, on_line: LineSink) -> RunEnd:
        async with trio.open_nursery() as nursery:
            async def forward(text: str) -> None:
                await on_line(text)
                if isinstance(parse_line(text), Checkpoint):
                    nursery.cancel_scope.cancel()  # the node goes away: the trainer with it

            nursery.start_soon(self.inner.run, forward)
        self.end = RunEnd(None, node_lost=f"node {self.node} was lost")
        return self.end


class Snapshots:
    """The supervisor's checkpoint store over the fake's committed jobs, as
    `alallo.store.JobCheckpoints` is over the store: an actor's next incarnation
    starts from its job's last commit. ``loads`` counts the jobs handed out."""

    def __init__(self, context: FakeContext) -> None:
        self._context = context
        self.loads = 0

    async def save(self, name: str, snapshot: object) -> None:
        raise AssertionError("a job actor's snapshot is its commits; nothing saves one")

    async def load(self, name: str) -> object | None:
        job = await self._context.load(name)
        self.loads += job is not None
        return job


class FakeScheduler(Actor[SchedulerMessage]):
    """Grants each `Acquire` at once (the job's first plan, on node ``n1``); records it and
    each `Release` in ``context.capacity``."""

    def __init__(self, context: FakeContext) -> None:
        super().__init__()
        self._context = context

    async def handle(self, message: SchedulerMessage) -> Any:
        match message:
            case Acquire(job_id=job_id, options=options, reply=reply):
                self._context.capacity.append(("acquire", job_id))
                plan = options[0]
                reply.send_nowait(Grant(Placement("n1", plan.device_type, plan.devices, False),
                                        plan))
            case Release(job_id=job_id):
                self._context.capacity.append(("release", job_id))
        return None


def new_job(steps: int, delay: float) -> Job:
    """A created (queued) job of the simulated trainer, as `Runtime.create_job` makes one."""
    spec = JobSpec.model_validate({
        "model": "alallo/tiny-gpt2", "training_file": "file-1",
        "hyperparameters": {"max_steps": steps},
        "trainer": {"type": "simulated", "step_delay_s": delay}})
    options = plan_options(Catalogue().resolve(spec.model), spec, POOL, max_steps=steps,
                           tokens_per_example=50)
    plan = options.pick(spec.goal).model_copy(update={"step_time_s": 0.36})  # 1e-5 USD a step
    now = time.time()
    job = Job(id="ft-" + uuid.uuid4().hex[:24], account_id="acct", spec=spec, max_steps=steps,
              progress=Progress(max_steps=steps), plan=plan, options=(plan,),
              verdict=options.verdict, estimate=estimate_time(plan),
              price_estimate=estimate_price(plan), created_at=int(now))
    return lifecycle.apply(job, lifecycle.Created(now=now)).job


def fake_context(tmp_path: Path, steps: int, delay: float, **settings: Any) -> FakeContext:
    """A fresh job and its fake context; 200 rows of data, so no run here ends an epoch."""
    data = tmp_path / "train.jsonl"
    data.write_text("".join(f'{{"text": "Example number {n}."}}\n' for n in range(200)))
    settings = {"warm_trainers": False, "cancel_grace_s": 2.0, **settings}
    return FakeContext(Settings(data_dir=tmp_path / "data", **settings), new_job(steps, delay),
                       data)


@asynccontextmanager
async def supervised(context: FakeContext) -> AsyncIterator[tuple[Supervisor, Snapshots]]:
    """The job's actor started as the runtime starts it, beside the fake scheduler; a job
    given up is failed as the runtime fails it (`fail_job`)."""
    snapshots = Snapshots(context)

    async def give_up(name: str, crash: BaseException | None) -> None:
        context.given_up.append(name)
        await fail_job(context, name, f"its actor was given up: {crash!r}")

    async with open_supervisor(name="jobs", checkpoints=snapshots) as supervisor:
        context.scheduler = await supervisor.start_child(FakeScheduler, context,
                                                         name="scheduler")
        await supervisor.start_child(
            JobActor, context, context.job_id, None, name=context.job_id,
            restart=Restart.TRANSIENT, intensity=JOB_ACTOR_INTENSITY,
            backoff=JOB_ACTOR_BACKOFF, on_give_up=give_up)
        yield supervisor, snapshots


async def stopped_for_good(supervisor: Supervisor, name: str) -> None:
    """Wait until the actor has stopped and its supervisor has seen it: not to restart it,
    it forgets the child (`Restart.TRANSIENT` after a normal stop)."""
    with trio.fail_after(TIMEOUT_S):
        while (ref := supervisor.lookup(name)) is not None:
            await ref.wait_stopped()
        await trio.testing.wait_all_tasks_blocked()  # the supervisor has handled the exit
    assert name not in supervisor, f"{name} stopped and is to be restarted"


def trainer_pids(job_id: str) -> list[int]:
    """Live (not zombie) processes whose command line names the job: its trainers."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if job_id.encode() in cmdline and state != "Z":
            found.append(int(proc.name))
    return found


async def test_a_job_runs_from_queued_to_succeeded(tmp_path: Path) -> None:
    ctx = fake_context(tmp_path, steps=20, delay=0.0)
    async with supervised(ctx) as (supervisor, _):
        done = await ctx.wait_final(supervisor)
    assert ctx.statuses() == [Q, RUNNING, DONE]
    assert ctx.types() == [
        EventType.JOB_START, EventType.MODEL_DOWNLOAD_COMPLETE,
        EventType.TRAINING_DATA_DOWNLOAD_COMPLETE, EventType.TRAINING_START,
        EventType.CHECKPOINT_SAVE, EventType.CHECKPOINT_SAVE, EventType.TRAINING_COMPLETE,
        EventType.JOB_COMPLETE]
    assert [e.step for e in ctx.events() if e.type is EventType.CHECKPOINT_SAVE] == [10, 20]
    lines = ctx.lines()
    assert [t for t in lines if t.startswith("Step ")] == [
        f"Step 10/20: loss {fake_loss(10):.4f}", f"Step 20/20: loss {fake_loss(20):.4f}"]
    assert lines[-1] == "Training complete"
    assert done.progress.step == 20 and done.checkpoint and done.checkpoint.step == 20
    assert Path(done.fine_tuned_model or "").is_dir() and done.attempt == 1
    assert [(e.kind, e.first_step, e.last_step) for c in ctx.commits for e in c.entries] == [
        ("charge", 1, 10), ("charge", 11, 20)]
    assert ctx.charged_steps() == list(range(1, 21))
    assert done.charged == pytest.approx(20 * step_price(done)) and done.refunded == 0
    assert ctx.released == [done.id] and not ctx.notified
    assert ctx.capacity == [("acquire", done.id), ("release", done.id)]


async def test_cancel_while_running_stops_the_trainer(tmp_path: Path) -> None:
    ctx = fake_context(tmp_path, steps=10_000, delay=0.05)
    async with supervised(ctx) as (supervisor, _):
        await ctx.wait_for(lambda j: j.progress.step >= 1)
        assert trainer_pids(ctx.job_id)
        ref = supervisor.lookup(ctx.job_id)
        assert ref is not None
        answer = await ref.ask(CancelJob())
        assert isinstance(answer, Job) and answer.status is JobStatus.CANCELLING
        done = await ctx.wait_final(supervisor)
    assert ctx.statuses() == [Q, RUNNING, JobStatus.CANCELLING, JobStatus.CANCELLED]
    assert ctx.types()[-2:] == [EventType.CANCEL_REQUESTED, EventType.JOB_STOPPED]
    assert trainer_pids(ctx.job_id) == []
    assert ctx.charged_steps() == list(range(1, done.progress.step + 1))  # not a free cancel
    assert done.charged == pytest.approx(done.progress.step * step_price(done))
    assert ctx.released == [done.id]
    assert ctx.capacity == [("acquire", done.id), ("release", done.id)]


async def test_a_draining_node_moves_the_job_on_from_its_checkpoint(tmp_path: Path) -> None:
    ctx = fake_context(tmp_path, steps=40, delay=0.05)
    async with supervised(ctx) as (supervisor, _):
        await ctx.wait_for(lambda j: j.checkpoint is not None)
        ref = supervisor.lookup(ctx.job_id)
        assert ref is not None
        await ref.tell(RescheduleJob("node n1 is draining"))
        done = await ctx.wait_final(supervisor)
    assert ctx.statuses() == [Q, RUNNING, JobStatus.RE_SCHEDULING, RUNNING, DONE]
    events = ctx.events()
    assert [e.message for e in events if e.type is EventType.JOB_RESCHEDULED] == [
        "Job re-scheduled: node n1 is draining"]
    restarted = [e.message for e in events if e.type is EventType.JOB_RESTARTED]
    assert len(restarted) == 1
    match = re.fullmatch(r"Job restarted from the checkpoint at step (\d+): "
                         r"re-scheduled: node n1 is draining", restarted[0])
    assert match is not None
    assert 10 <= int(match[1]) < 40 and "Training complete" not in ctx.lines(attempt=1)
    assert f"Resuming from checkpoint at step {match[1]}" in ctx.lines(attempt=2)
    assert done.attempt == 2 and done.progress.step == 40
    assert ctx.charged_steps() == list(range(1, 41))
    assert ctx.capacity == [("acquire", done.id), ("release", done.id)] * 2


async def test_a_lost_node_moves_the_job_on_from_its_checkpoint_charging_each_step_once(
        tmp_path: Path) -> None:
    ctx = fake_context(tmp_path, steps=40, delay=0.05)
    ctx.executor = LosesItsNodeOnce(ctx.executor)
    async with supervised(ctx) as (supervisor, _):
        done = await ctx.wait_final(supervisor)
    assert ctx.statuses() == [Q, RUNNING, JobStatus.RE_SCHEDULING, RUNNING, DONE]
    events = ctx.events()
    assert [e.message for e in events if e.type is EventType.JOB_RESCHEDULED] == [
        "Job re-scheduled: node n1 was lost"]
    assert [e.message for e in events if e.type is EventType.JOB_RESTARTED] == [
        "Job restarted from the checkpoint at step 10: re-scheduled: node n1 was lost"]
    assert "Resuming from checkpoint at step 10" in ctx.lines(attempt=2)
    assert done.attempt == 2 and done.progress.step == 40
    assert done.restarts == 0, "a lost node is not a failure of the job's run"
    assert ctx.charged_steps() == list(range(1, 41))
    assert ctx.capacity == [("acquire", done.id), ("release", done.id)] * 2
    assert not ctx.notified


async def test_a_crashed_actor_restarts_from_its_last_commit(tmp_path: Path) -> None:
    ctx = fake_context(tmp_path, steps=30, delay=0.05)
    crashes = [StoreUnavailable("the database went away")]
    async with supervised(ctx) as (supervisor, snapshots):
        await ctx.wait_for(lambda j: j.checkpoint is not None)
        ctx.fault = lambda job: crashes.pop() if crashes else None  # the next write, once
        done = await ctx.wait_final(supervisor)
    statistics = supervisor.statistics()
    assert ctx.refused == 1 and not crashes
    assert (statistics.crashed, statistics.restarted, statistics.given_up) == (1, 1, 0)
    assert snapshots.loads == 2  # each incarnation started from the job as committed
    assert ctx.statuses() == [Q, RUNNING, DONE]
    restarted = [e.message for e in ctx.events() if e.type is EventType.JOB_RESTARTED]
    assert len(restarted) == 1
    match = re.fullmatch(r"Job restarted from the checkpoint at step (\d+): "
                         r"its actor restarted after an error", restarted[0])
    assert match is not None and int(match[1]) >= 10
    assert f"Resuming from checkpoint at step {match[1]}" in ctx.lines(attempt=2)
    seqs = [e.seq for e in ctx.events()]
    assert seqs == sorted(set(seqs))  # nothing lost or numbered twice across the crash
    assert done.attempt == 2 and done.progress.step == 30
    assert ctx.charged_steps() == list(range(1, 31))
    assert done.charged == pytest.approx(30 * step_price(done))
    assert ctx.released == [done.id] and trainer_pids(done.id) == []


async def test_lease_lost_stops_the_actor_without_another_write(tmp_path: Path) -> None:
    ctx = fake_context(tmp_path, steps=10_000, delay=0.05)
    async with supervised(ctx) as (supervisor, _):
        await ctx.wait_for(lambda j: j.progress.step >= 1)
        ref = supervisor.lookup(ctx.job_id)
        assert ref is not None and trainer_pids(ctx.job_id)
        written = len(ctx.commits)
        ctx.fault = lambda job: LeaseLost(job.id, 1)  # another process took the job
        await stopped_for_good(supervisor, ctx.job_id)
    statistics = supervisor.statistics()
    assert len(ctx.commits) == written and ctx.refused == 1
    assert (statistics.crashed, statistics.restarted) == (0, 0)
    assert ctx.job.status is RUNNING  # left as it was, for the new owner
    assert trainer_pids(ctx.job_id) == []
    assert ctx.released == [ctx.job_id] and not ctx.notified
    assert ctx.capacity == [("acquire", ctx.job_id), ("release", ctx.job_id)]


async def test_an_unwritable_job_directory_fails_the_job_without_a_restart_storm(
        tmp_path: Path) -> None:
    ctx = fake_context(tmp_path, steps=20, delay=0.0, max_restarts=2)
    ctx.settings.jobs_dir.mkdir(parents=True)
    (ctx.settings.jobs_dir / ctx.job_id).write_text("a file where the job's directory goes")
    async with supervised(ctx) as (supervisor, _):
        done = await ctx.wait_final(supervisor)
    statistics = supervisor.statistics()
    assert (statistics.crashed, statistics.restarted, ctx.given_up) == (0, 0, [])
    assert ctx.statuses() == [Q, JobStatus.FAILED]
    assert done.message == Message.PLATFORM_ERROR.value == (
        "Failed. We've been notified and are looking into it.")
    assert done.restarts == 2 and done.attempt == 0 and done.charged == done.refunded == 0
    assert ctx.capacity == [("acquire", done.id), ("release", done.id)] * 3
    [error] = ctx.events()
    assert error.type is EventType.JOB_ERROR
    assert "cannot prepare the run in the job's directory" in error.message
    assert ctx.notified == [(done.id, error.message)] and ctx.released == [done.id]


class RecalledFiles:
    """`FileRecall` noting each file recalled."""

    def __init__(self) -> None:
        self.recalled: list[str] = []

    async def recall(self, account_id: str, file_id: str) -> None:
        self.recalled.append(file_id)


async def test_job_actors_start_a_job_under_the_scheduler_and_find_it_while_it_runs(
        tmp_path: Path) -> None:
    ctx = fake_context(tmp_path, steps=200, delay=0.05)
    files, given_up = RecalledFiles(), []

    async def give_up(name: str, crash: BaseException | None) -> None:
        given_up.append(name)

    actors = JobActors(ctx, files, Snapshots(ctx), POOL)
    assert actors.lookup(ctx.job_id) is None and actors.statistics() is None
    async with actors.open():
        ctx.scheduler = actors.scheduler  # the real scheduler, over the pool's one node
        assert ctx.job_id not in actors
        await actors.start(ctx.created, None, on_give_up=give_up)
        assert files.recalled == ["file-1"] and ctx.job_id in actors
        await ctx.wait_for(lambda j: j.progress.step >= 1)
        ref = actors.lookup(ctx.job_id)
        assert ref is not None
        await ref.ask(CancelJob(), timeout=TIMEOUT_S)
        done = await ctx.wait_for(lambda j: j.status.is_final)
        statistics = actors.statistics()
        assert statistics is not None and statistics.started == 2  # the scheduler and the job
    assert done.status is JobStatus.CANCELLED and given_up == []
    assert trainer_pids(ctx.job_id) == []
