"""`JobContext`: all a job's actor may ask of the runtime, and nothing more (LAYOUT.md §4.1).

A :class:`~alallo.runtime._job_actor.JobActor` holds one instead of the whole
:class:`~alallo.Runtime`: what it reads (settings, the catalogue, the trainers it may
run), the store reads it makes (its job, the account's money), the writer of its changes,
the cluster's lease and cancel requests, re-planning, its training file, the shared
checkpoint location, and the operator's notices. :class:`RuntimeJobContext` builds it
from the runtime's parts; a test drives one actor with a fake
(``tests/alallo/test_job_actor.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from actors import ActorRef

from .._trainer_registry import TrainerRegistry
from ..capacity import Catalogue, PlanOptions, SchedulerMessage
from ..cluster import CheckpointStorage, Cluster
from ..executors import Executor, TrainerUser
from ..jobs import Job
from ..serving import ModelFiles
from ..settings import Settings
from ..store import Store
from ._bus import EventBus
from ._job_cache import LiveJobs
from ._job_writer import JobWriter
from ._results import save_results
from ._training_files import TrainingFiles

if TYPE_CHECKING:
    from ..jobs import Event, LedgerEntry, LogLine, MetricsPoint

__all__ = ["JobCommits", "JobContext", "RuntimeJobContext"]


class JobCommits(Protocol):
    """Where a job's changes are committed, then published: a
    :class:`~alallo.runtime._job_writer.JobWriter` in a runtime, a recorder in a test."""

    published_state_seq: int
    """The job state already published (its ``state_seq``)."""

    async def write(self, job: Job, events: tuple[Event, ...] = (),
                    lines: tuple[LogLine | MetricsPoint, ...] = (),
                    entries: tuple[LedgerEntry, ...] = ()) -> tuple[float, float]:
        """Commit under the job's lease, then publish; the account's ``(balance,
        billing_limit)`` after.

        Raises:
            LeaseLost: this process does not hold the job's lease (nothing written).
            StoreUnavailable: the store failed (nothing published).
        """


class JobContext(Protocol):
    """What a job's actor may ask of the runtime (each member names the runtime part behind it).

    The attributes are read only; the store reads may raise
    :class:`~alallo.store.StoreUnavailable`.
    """

    @property
    def settings(self) -> Settings:
        """The server's settings (restart limits, directories, the trainer's launch)."""

    @property
    def catalogue(self) -> Catalogue:
        """The models, to resolve the job's (:mod:`alallo._catalogue`)."""

    @property
    def trainers(self) -> TrainerRegistry:
        """The registered trainers a job may name (:mod:`alallo._trainer_registry`)."""

    @property
    def trainer_user(self) -> TrainerUser | None:
        """The user trainers run as (None: the server's own)."""

    async def judge_files(self, account_id: str, name: str) -> ModelFiles:
        """The files of the model ``name`` as the account sees it (a ``score_model``
        grader's judge; :class:`~alallo.runtime._served_models.ServedModels`).

        Raises:
            NotFound, InvalidRequest, Unavailable: no such model for the account, or it has
                no weights here.
        """

    @property
    def executor(self) -> Executor:
        """Where its trainer runs: this machine or a Ray cluster (:mod:`alallo.executors`)."""

    @property
    def checkpoint_storage(self) -> CheckpointStorage:
        """The shared checkpoint location, if any (:mod:`alallo.cluster._checkpoint_storage`)."""

    @property
    def scheduler(self) -> ActorRef[SchedulerMessage] | None:
        """The scheduler actor that grants placements (None before the runtime starts it)."""

    async def load(self, job_id: str) -> Job | None:
        """The job as stored (None: no such job)."""

    def writer(self, published_state_seq: int = 0) -> JobCommits:
        """A writer of the job's changes: committed under its lease, then published."""

    async def balance(self, account_id: str) -> tuple[float, float]:
        """The account's ``(balance, billing_limit)``, in USD."""

    def take_cancel_request(self, job_id: str) -> bool:
        """Whether a cancel was asked through the store (another process), consuming it."""

    def release(self, job_id: str) -> None:
        """Let go of the job's lease: it has ended here."""

    async def replan(self, job: Job) -> PlanOptions:
        """The job's plans again, with its measured memory."""

    async def may_run_commands(self, account_id: str) -> bool:
        """Whether the account may still run a command of its own."""

    async def training_file(self, file_id: str) -> tuple[str, Any]:
        """The training file's path on this machine and its format.

        Raises:
            OSError: its bytes are not here and cannot be fetched.
        """

    def notify_operator(self, job_id: str, reason: str) -> None:
        """Tell the operator of a platform failure (in the background)."""

    async def save_results(self, job: Job) -> str | None:
        """Store the job's metrics CSV as a file of its account; its id, or None when it
        could not be stored (:func:`alallo.runtime._results.save_results`)."""


@dataclass(frozen=True)
class RuntimeJobContext:
    """The :class:`JobContext` of a runtime, made of its parts (no reference to the runtime).

    ``scheduler_of`` is read at each call: the runtime starts its scheduler after building this.
    """

    settings: Settings
    catalogue: Catalogue
    trainers: TrainerRegistry
    trainer_user: TrainerUser | None
    executor: Executor
    checkpoint_storage: CheckpointStorage
    store: Store
    cluster: Cluster
    live_jobs: LiveJobs
    files: TrainingFiles
    scheduler_of: Callable[[], ActorRef[SchedulerMessage] | None]
    bus: EventBus
    replan_of: Callable[[Job], Awaitable[PlanOptions]]
    may_run_commands_of: Callable[[str], Awaitable[bool]]
    notify: Callable[[str, str], None]
    served_of: Callable[[str, str], Awaitable[ModelFiles]]

    async def judge_files(self, account_id: str, name: str) -> ModelFiles:
        """The files of a model the account may use (a ``score_model`` grader's judge)."""
        return await self.served_of(account_id, name)

    @property
    def scheduler(self) -> ActorRef[SchedulerMessage] | None:
        """The runtime's scheduler actor, once started."""
        return self.scheduler_of()

    async def load(self, job_id: str) -> Job | None:
        """The job as stored (None: no such job)."""
        return await self.store.get_job(job_id)

    def writer(self, published_state_seq: int = 0) -> JobWriter:
        """A writer over the store, the cluster's leases, the live jobs and the bus."""
        return JobWriter(self.store, self.cluster, self.live_jobs, self.bus,
                         published_state_seq)

    async def balance(self, account_id: str) -> tuple[float, float]:
        """The account's ``(balance, billing_limit)``, in USD."""
        return await self.store.balance(account_id)

    def take_cancel_request(self, job_id: str) -> bool:
        """Whether a cancel was asked through the store, consuming it."""
        return self.cluster.take_cancel_request(job_id)

    def release(self, job_id: str) -> None:
        """Let go of the job's lease."""
        self.cluster.drop(job_id)

    async def replan(self, job: Job) -> PlanOptions:
        """The job's plans again (:meth:`alallo.runtime._planning.Planning.replan`)."""
        return await self.replan_of(job)

    async def may_run_commands(self, account_id: str) -> bool:
        """Whether the account may still run a command of its own."""
        return await self.may_run_commands_of(account_id)

    async def training_file(self, file_id: str) -> tuple[str, Any]:
        """The training file's local path (fetched if need be) and its format.

        Raises:
            OSError: its bytes are not here and cannot be fetched.
        """
        return await self.files.local_path(file_id), self.files.format(file_id)

    def notify_operator(self, job_id: str, reason: str) -> None:
        """Tell the operator of a platform failure (in the background)."""
        self.notify(job_id, reason)

    async def save_results(self, job: Job) -> str | None:
        """Store the job's metrics CSV as a file of its account; its id, or None."""
        return await save_results(self.store, self.files, job)
