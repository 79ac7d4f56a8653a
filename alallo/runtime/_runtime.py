"""The runtime: alallo as a library, for the gateway and for embedding apps.

::

    async with Runtime(Settings(data_dir=path)) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "train.jsonl", data)
        job = await rt.create_job(account, {"model": "alallo/tiny-gpt2",
                                            "training_file": file.id})
        async for item in rt.stream(account, job.id):
            print(item.kind, item.seq, item.data)

Every method takes the caller's account id and sees only that account's
files and jobs: another account's answer :class:`NotFound`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack
from functools import partial
from types import TracebackType
from typing import Any

import structlog
import trio

from actors import ActorRef, SupervisorStatistics

from .. import api
from .._trainer_registry import TrainerInfo, TrainerRegistry
from ..capacity import Catalogue, CatalogueModel, SchedulerMessage
from ..cluster import CheckpointStorage, Cluster, FileStorage, check_writable
from ..jobs import Event, Job, JobSpec, LogLine
from ..settings import Settings
from ..store import FileRow, JobCheckpoints, Store, StoreUnavailable
from ._accounts import LOCAL_ACCOUNT, Accounts
from ._actor_failure import fail_job
from ._bus import EventBus, Item
from ._devices import open_executor, open_pool, open_services
from ._fine_tuned import FineTunedModels
from ._job_actors import JobActors
from ._job_cache import LiveJobs
from ._job_context import RuntimeJobContext
from ._job_messages import JobMessage
from ._jobs import Jobs
from ._operator import notify_platform_failure
from ._planning import Planning
from ._ray_nodes import follow_ray_nodes, reach_ray
from ._relocation import Relocation
from ._served_models import ServedModels
from ._serving import device_holder, open_completions
from ._starter import Starter
from ._streams import Streams
from ._trainer_access import open_to_trainer_user, resolve_trainer_user
from ._training_files import TrainingFiles

__all__ = ["LOCAL_ACCOUNT", "Runtime"]

log = structlog.get_logger("alallo.runtime")


class Runtime:
    """alallo's engine: store, event bus, and the supervisor of job actors.

    Args:
        settings: where data lives and how jobs run (:class:`Settings`).

    Raises:
        SettingError: a setting that cannot work here: the trainer user does not
            exist, a node declares GPUs NVML does not find (at construction); the
            storage URL cannot be written, the trainer user cannot run a trainer
            (on entering).

    Use as ``async with Runtime(settings) as rt``; leaving the block stops
    every job actor and its trainer (jobs that were running continue from
    their checkpoints when a runtime opens on the same data again, or at
    once in another process on the same database: :mod:`alallo.cluster._cluster`).
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.store = Store(self.settings.resolved_database_url)
        self.accounts = Accounts(self.settings, self.store)
        """API keys, accounts and what they may do (:mod:`alallo.runtime._accounts`)."""
        self.live_jobs = LiveJobs()
        """The jobs this process owns, as last read, until the bus says they changed."""
        self.bus = EventBus()
        """The event bus of this process (:mod:`alallo.runtime._bus`)."""
        # The remembered jobs are valid only while the bus reports their changes.
        self.bus.watch(self.live_jobs.forget)
        self.catalogue = Catalogue()
        self.pool = open_pool(self.settings)  # this machine's GPUs, found by NVML
        self.trainers = TrainerRegistry(self.settings.trainers)
        """The trainers a job may name (:mod:`alallo._trainer_registry`)."""
        self.trainer_user = resolve_trainer_user(self.settings)
        """The user trainers run as, when this server runs as root (None: its own)."""
        self.checkpoint_storage = CheckpointStorage(self.settings.shared_storage_url)
        self.file_storage = FileStorage(self.settings.shared_storage_url,
                                        self.settings.files_dir)
        self.cluster = Cluster(self.store, heartbeat_interval_s=self.settings.heartbeat_interval_s,
                               lease_ttl_s=self.settings.lease_ttl_s,
                               address=f"{self.settings.host}:{self.settings.port}")
        self._registered = False
        self.api_key: str = ""
        self.api_key_created = False
        self._stack = AsyncExitStack()
        self._background: trio.Nursery | None = None
        self.files = TrainingFiles(self.settings, self.store, self.file_storage)
        """Training files (:mod:`alallo.runtime._training_files`)."""
        self.models = FineTunedModels(self.store, self.settings, self.get_job)  # trained models
        self.planning = Planning(self.settings, self.store, self.catalogue, self.pool,
                                 self.files, lambda: self.scheduler,
                                 find_model=self.models.usable, get_job=self.get_job)
        """Plans, estimates, models and capacity (:mod:`alallo.runtime._planning`)."""
        self.streams = Streams(self.store, self.bus, self.get_job)
        """What followers of a job or an account read (:mod:`alallo.runtime._streams`)."""
        executor = open_executor(self.settings, self.trainer_user)
        served = ServedModels(self.settings, self.planning, self.models).files  # names to files
        self.completions = open_completions(self.settings, self.store, served, device_holder(
            self.settings, self.pool, lambda: self.scheduler), open_services(self.settings, executor))
        self._checkpoints = JobCheckpoints(self.store, self.cluster.epoch_of)
        self.job_context = RuntimeJobContext(
            settings=self.settings, catalogue=self.catalogue, trainers=self.trainers,
            trainer_user=self.trainer_user, checkpoint_storage=self.checkpoint_storage,
            executor=executor, store=self.store, cluster=self.cluster, live_jobs=self.live_jobs, files=self.files,
            scheduler_of=lambda: self.scheduler, bus=self.bus, replan_of=self.planning.replan,
            may_run_commands_of=self.accounts.may_run_commands, served_of=served,
            notify=lambda job_id, reason: self.notify_operator(job_id, reason))
        """All a job's actor may ask of this runtime (:mod:`alallo.runtime._job_context`)."""
        self.actors = JobActors(self.job_context, self.files, self._checkpoints, self.pool)
        """The supervisor of job actors and the scheduler (:mod:`alallo.runtime._job_actors`)."""
        self.starter = Starter(lambda job, cause: self._start_actor(job, cause),
                               exists=self.actors.__contains__,
                               fail=partial(fail_job, self.job_context))
        """The one way job actors start, at most once per job (:mod:`alallo.runtime._starter`)."""
        self.relocation = Relocation(
            store=self.store, cluster=self.cluster, bus=self.bus, starter=self.starter,
            files=self.files, checkpoints=self._checkpoints,
            actor=self._actor_of, pool=self.pool, scheduler=lambda: self.scheduler)
        """Jobs recovered, adopted, and cancelled from elsewhere (:mod:`alallo.runtime._relocation`)."""
        self.jobs = Jobs(store=self.store, cluster=self.cluster, live_jobs=self.live_jobs,
                         starter=self.starter, bus=self.bus, actor=self._actor_of,
                         planning=self.planning, checkpoints=self._checkpoints)
        """Reading, listing and cancelling jobs (:mod:`alallo.runtime._jobs`)."""

    async def __aenter__(self) -> Runtime:
        try:
            await self._open()
        except BaseException as exc:
            # Close what was opened (nurseries, the supervisor), in this task and in order,
            # before the error leaves: a nursery left open by a failed __aenter__ turns any
            # error into a TrioInternalError (issue 14). The nurseries wrap it in groups on
            # the way out; the caller gets the error itself.
            try:
                await self.__aexit__(type(exc), exc, exc.__traceback__)
            except BaseException as closing:
                leaf = closing
                while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
                    leaf = leaf.exceptions[0]
                if leaf is not exc:
                    raise
            raise
        return self

    async def _open(self) -> None:
        settings = self.settings
        for folder in (settings.data_dir, settings.files_dir, settings.jobs_dir,
                       settings.models_dir):
            folder.mkdir(parents=True, exist_ok=True)
        await trio.to_thread.run_sync(check_writable, settings.shared_storage_url,
                                      "storage_url" if settings.storage_url else "checkpoint_url")
        await self._stack.enter_async_context(reach_ray(self.job_context.executor))  # or 1 line
        await trio.to_thread.run_sync(self.store.open)
        self.api_key, self.api_key_created = await self.accounts.ensure_local()
        await open_to_trainer_user(settings, self.trainer_user)  # or refuse: one line
        await self.cluster.register()
        self._registered = True
        self.store.announce_as = self.cluster.node_id
        self._background = await self._stack.enter_async_context(trio.open_nursery())
        await self._stack.enter_async_context(self.completions.open())
        await self._stack.enter_async_context(self.actors.open())
        await self._stack.enter_async_context(follow_ray_nodes(  # a Ray cluster's nodes
            self.job_context.executor, settings, lambda: self.scheduler))
        await self._stack.enter_async_context(self.starter.open())  # at exit: stop starting first
        # Recovery: the live jobs are read in bulk and their actors start in the
        # background; the runtime serves at once.
        await self.relocation.recover()
        await self._stack.enter_async_context(self.relocation.services())
        await self._stack.enter_async_context(self.files.expiry.running())  # expires_after

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            await self._stack.__aexit__(exc_type, exc, tb)
        finally:
            if self._registered:
                with trio.CancelScope(shield=True), contextlib.suppress(StoreUnavailable):
                    await self.cluster.leave()  # the others adopt our jobs at once
            self.store.close()

    @property
    def recovering(self) -> bool:
        """True while actors of recovered (or adopted) jobs are still being started.

        The runtime serves meanwhile: reads answer from the store, a cancel
        waits for the job's actor, and a job created meanwhile starts after
        the recovered ones.
        """
        return self.starter.recovering

    def _actor_of(self, job_id: str) -> ActorRef[JobMessage] | None:
        """The running actor of a job, or None."""
        return self.actors.lookup(job_id)

    def actor_statistics(self) -> SupervisorStatistics | None:
        """Counters of the supervisor of job actors (starts, restarts, crashes); None when closed."""
        return self.actors.statistics()

    def notify_operator(self, job_id: str, reason: str) -> None:
        """Report a platform failure to the operator, in the background (log, metric, webhook)."""
        if self._background is not None:
            self._background.start_soon(partial(
                notify_platform_failure, job_id, reason,
                webhook_url=self.settings.operator_webhook_url))

    # -- accounts (alallo.runtime._accounts) ------------------------------------------

    async def authenticate(self, api_key: str | None) -> str:
        """The account id of an API key (:meth:`Accounts.authenticate`).

        Raises:
            Unauthorized: no key, or one that belongs to no account.
        """
        return await self.accounts.authenticate(api_key)

    async def revoke_api_key(self, key_hash: str) -> bool:
        """Revoke a key by its hash; it answers 401 at once (:meth:`Accounts.revoke_api_key`).

        Returns False if it was revoked already (or is unknown).
        """
        return await self.accounts.revoke_api_key(key_hash)

    def list_trainers(self) -> list[TrainerInfo]:
        """The trainers a job may name here (``GET /v1/trainers``), built-in ones first."""
        return self.trainers.listed()

    # -- files (alallo.runtime._training_files) ---------------------------------------

    async def upload_file(self, account_id: str, filename: str, data: bytes,
                          *, purpose: str = "fine-tune") -> FileRow:
        """Check and store a JSONL training file (:meth:`TrainingFiles.upload`).

        Raises:
            InvalidRequest: a purpose other than ``fine-tune``, or a file too large.
            InvalidFile: a bad line (the message names it); nothing is stored.
        """
        return await self.files.upload(account_id, filename, data, purpose=purpose)

    async def get_file(self, account_id: str, file_id: str) -> FileRow:
        """One of the account's files. Raises :class:`NotFound`."""
        return await self.files.get(account_id, file_id)

    async def list_files(self, account_id: str) -> list[FileRow]:
        """The account's files, newest first."""
        return await self.files.of_account(account_id)

    async def file_content(self, account_id: str, file_id: str) -> bytes:
        """The bytes of one of the account's files. Raises :class:`NotFound`."""
        return await self.files.content(account_id, file_id)

    async def delete_file(self, account_id: str, file_id: str) -> None:
        """Delete a file. Raises :class:`NotFound`, or :class:`Conflict` while a live job uses it."""
        await self.files.delete(account_id, file_id)

    # -- plans (alallo.runtime._planning) ----------------------------------------------

    def list_models(self) -> list[CatalogueModel]:
        """The model catalogue, ``runnable_here`` decided by this server's pool."""
        return self.planning.list_models()

    async def estimate(self, account_id: str, spec: JobSpec | Mapping[str, Any]) -> api.Estimate:
        """Estimate time and price of a job spec without creating it.

        Returns the estimate object of API.md: ``available``, ``reason``
        (the seed's message), ``detail`` (why, in words: see :func:`alallo._plans.why_not`),
        ``time``, ``price``, ``capacity_free``, ``note``, ``plan``,
        ``allowed_to_proceed`` (false when the upper price exceeds the balance
        plus the billing limit).

        Raises:
            pydantic.ValidationError, InvalidRequest, Forbidden: as :meth:`create_job`.
        """
        spec = spec if isinstance(spec, JobSpec) else JobSpec.model_validate(spec)
        await self.accounts.check_spec(account_id, spec, self.trainers)
        return await self.planning.estimate(account_id, spec)

    async def capacity(self, account_id: str | None = None) -> api.Capacity:
        """Nodes, devices, what runs where, and the queue (``GET /v1/capacity``); with
        ``account_id``, other accounts' jobs only counted (see :meth:`Planning.capacity`)."""
        return await self.planning.capacity(account_id)

    async def drain_node(self, name: str, *, on: bool = True) -> list[str]:
        """Stop placing jobs on a node and move the jobs running there (``on=False``
        opens it again). Returns the ids of the jobs moved (:meth:`Relocation.drain_node`).

        Raises:
            NotFound: no such node (``param="node"``).
        """
        return await self.relocation.drain_node(name, on=on)

    async def create_job(self, account_id: str, spec: JobSpec | Mapping[str, Any]) -> Job:
        """Accept a job: it is stored as ``queued`` (``Starting``) before this returns.

        A job that no node could ever run is accepted too, and fails at once
        with ``Not available right now.`` (it costs nothing, and never waits
        in the queue).

        Raises:
            pydantic.ValidationError: the spec is malformed.
            InvalidRequest: an unknown model, training file, trainer, or absurd setting.
            Forbidden: a command of its own, or a model directory of the server, from an
                account that may not send one.
        """
        spec = spec if isinstance(spec, JobSpec) else JobSpec.model_validate(spec)
        await self.accounts.check_spec(account_id, spec, self.trainers)
        return await self.jobs.create(account_id, spec)

    async def _start_actor(self, job: Job, cause: str | None = None) -> None:
        """Start the job's actor (only through :attr:`starter`, which starts each job once)."""
        await self.actors.start(job, cause, on_give_up=self.starter.given_up)

    @property
    def scheduler(self) -> ActorRef[SchedulerMessage] | None:
        """The scheduler actor, while the runtime is open."""
        return self.actors.scheduler

    # -- jobs (alallo.runtime._jobs) -------------------------------------------------------

    async def get_job(self, account_id: str, job_id: str) -> Job:
        """One of the account's jobs (:meth:`Jobs.get_job`). Raises :class:`NotFound`."""
        return await self.jobs.get_job(account_id, job_id)

    async def list_jobs(self, account_id: str, *, limit: int = 20, after: str | None = None,
                        metadata: Mapping[str, str] | None = None) -> tuple[list[Job], bool]:
        """The account's jobs, newest first (those with ``metadata``), and whether more follow."""
        return await self.jobs.list_jobs(account_id, limit=limit, after=after, metadata=metadata)

    async def cancel_job(self, account_id: str, job_id: str) -> Job:
        """Ask a job to stop; returns it ``cancelling`` (or already ``cancelled``).

        Raises:
            NotFound: no such job in the account.
            InvalidTransition: the job has already finished (409).
        """
        return await self.jobs.cancel_job(account_id, job_id)

    async def list_events(self, account_id: str, job_id: str, *, after: int = 0, limit: int = 100,
                          ) -> tuple[list[Event], bool]:
        """A job's events, oldest first, with ``seq > after``; and whether more follow."""
        return await self.jobs.list_events(account_id, job_id, after=after, limit=limit)

    async def read_log(self, account_id: str, job_id: str, *, after: int = 0, limit: int = 1000,
                       attempt: int | None = None) -> tuple[list[LogLine], bool]:
        """The training log of the current (or the given) attempt, oldest line first."""
        return await self.jobs.read_log(account_id, job_id, after=after, limit=limit,
                                        attempt=attempt)

    async def list_metrics(self, account_id: str, job_id: str, *, after: int = 0,
                           ) -> list[dict[str, float | int | None]]:
        """A job's metrics series: one row per step past ``after`` (:meth:`Jobs.list_metrics`)."""
        return await self.jobs.list_metrics(account_id, job_id, after=after)

    # -- streams (alallo.runtime._streams) -----------------------------------------------

    def stream(self, account_id: str, job_id: str, *, after: int = 0) -> AsyncIterator[Item]:
        """Every update of a job with ``seq > after``, in order, until it ends
        (:meth:`Streams.stream`: ``job``, ``event``, ``log`` and ``metrics`` items).

        Raises:
            NotFound: no such job in the account.
        """
        return self.streams.stream(account_id, job_id, after=after)

    def stream_batches(self, account_id: str, job_id: str, *, after: int = 0,
                       ) -> AsyncIterator[list[Item]]:
        """:meth:`stream`, a list at a time: the items ready together. Raises :class:`NotFound`."""
        return self.streams.stream_batches(account_id, job_id, after=after)

    def stream_jobs(self, account_id: str, *, after: int = 0) -> AsyncIterator[Item]:
        """Every job of the account whose state changed past feed position ``after``;
        never ends (:meth:`Streams.stream_jobs`)."""
        return self.streams.stream_jobs(account_id, after=after)

    async def wait_for_final(self, account_id: str, job_id: str) -> Job:
        """Wait until the job reaches a final status and return it. Raises :class:`NotFound`."""
        return await self.streams.wait_for_final(account_id, job_id)

