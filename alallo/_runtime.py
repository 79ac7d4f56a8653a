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
import hashlib
import math
import time
import uuid
from functools import partial
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack
from dataclasses import replace
from types import TracebackType
from typing import Any, cast

import structlog
import trio
from actors import ActorRef, ActorStopped, Restart, RestartIntensity, Supervisor, open_supervisor
from actors import SupervisorStatistics

from . import _lifecycle as lifecycle
from ._actor_failure import fail_job
from ._bus import EventBus, Item, Lagged
from ._catalogue import Catalogue, CatalogueModel
from ._errors import Conflict, Forbidden, InvalidRequest, NotFound, SettingError, Unauthorized
from ._capacity import Pool
from ._checkpoint_storage import CheckpointStorage
from ._file_storage import FileStorage
from ._checkpoints import JobCheckpoints
from ._cluster import ADOPTED_CAUSE, Claim, Cluster
from ._notify import listen
from ._estimate import estimate_price, estimate_time
from ._plans import PlanOptions, plan_options, tokens_per_example
from ._shared_storage import check_writable
from ._scheduler import Drain, QueueSnapshot, Scheduler, SchedulerMessage, WaitEstimate
from ._status import JobStatus, Message
from ._files import check_jsonl
from ._job import Event, Job, LogLine, Plan, Progress
from ._job_actor import CancelJob, JobActor, RescheduleJob
from ._operator import notify_platform_failure
from ._job_cache import LiveJobs
from ._key_cache import KeyCache
from ._keys import hash_key, new_key, read_key_file, write_key_file
from ._launch import COMMANDS_NOT_ALLOWED
from ._spec import CommandTrainer, JobSpec, NamedTrainer
from ._starter import JOB_ACTOR_BACKOFF, JOB_ACTOR_INTENSITY, Starter
from ._store import FileRow, Store, StoreUnavailable
from ._tolerant import read_item
from ._trainer_env import trainer_user
from ._trainer_registry import TrainerInfo, TrainerRegistry
from .settings import Settings

__all__ = ["LOCAL_ACCOUNT", "Runtime"]

LOCAL_ACCOUNT = "acct-local"
"""The account of the embedded default; its key is in ``<data_dir>/api-key``."""
DEFAULT_STEPS_BATCH = 4
FEED_PAGE = 500
"""Jobs read from the store at a time by :meth:`Runtime.stream_jobs`."""
SCHEDULER_ASK_S = 10.0
"""How long a question to the scheduler may take (it answers from memory)."""
CANCEL_TIMEOUT_S = 30.0
"""How long a cancel request waits for the job's actor to take it."""
JOB_RESTART_INTENSITY = RestartIntensity(max_restarts=50, within=60.0)
"""Restarts the supervisor of job actors allows its children without an intensity of their own
(the scheduler) before it gives up; each job's actor has its own (:data:`JOB_ACTOR_INTENSITY`)."""
NO_CAPACITY_NOTE = "No capacity is free right now; the job would wait in the queue."

log = structlog.get_logger("alallo.runtime")


class Runtime:
    """alallo's engine: store, event bus, and the supervisor of job actors.

    Args:
        settings: where data lives and how jobs run (:class:`Settings`).

    Raises:
        SettingError: a setting that cannot work here: the trainer user does not
            exist (at construction); the storage URL cannot be written (on entering).

    Use as ``async with Runtime(settings) as rt``; leaving the block stops
    every job actor and its trainer (jobs that were running continue from
    their checkpoints when a runtime opens on the same data again, or at
    once in another process on the same database: :mod:`alallo._cluster`).
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.store = Store(self.settings.resolved_database_url)
        self.key_cache = KeyCache()
        """API key -> account for a few seconds (:mod:`alallo._key_cache`)."""
        self.live_jobs = LiveJobs()
        """The jobs this process owns, as last read, until the bus says they changed."""
        self.bus = EventBus()
        self.catalogue = Catalogue()
        self.pool = Pool(self.settings.node_specs)
        self.trainers = TrainerRegistry(self.settings.trainers)
        """The trainers a job may name (:mod:`alallo._trainer_registry`)."""
        try:
            self.trainer_user = trainer_user(self.settings.trainer_user)
            """The user trainers run as, when this server runs as root (None: its own)."""
        except ValueError as exc:
            raise SettingError(str(exc), param="trainer_user") from None
        self.checkpoint_storage = CheckpointStorage(self.settings.shared_storage_url)
        self.file_storage = FileStorage(self.settings.shared_storage_url,
                                        self.settings.files_dir)
        self.cluster = Cluster(self.store, heartbeat_interval_s=self.settings.heartbeat_interval_s,
                               lease_ttl_s=self.settings.lease_ttl_s,
                               address=f"{self.settings.host}:{self.settings.port}")
        self._registered = False
        self.scheduler: ActorRef[SchedulerMessage] | None = None
        self.api_key: str = ""
        self.api_key_created = False
        self._stack = AsyncExitStack()
        self._supervisor: Supervisor | None = None
        self._background: trio.Nursery | None = None
        self._files: dict[str, FileRow] = {}
        self._checkpoints = JobCheckpoints(self.store, self.cluster.epoch_of)
        self.starter = Starter(lambda job, cause: self._start_actor(job, cause),
                               exists=lambda job_id: job_id in (self._supervisor or ()),
                               fail=partial(fail_job, self))
        """The one way job actors start, at most once per job (:mod:`alallo._starter`)."""

    @property
    def bus(self) -> EventBus:
        """The event bus of this process (:mod:`alallo._bus`)."""
        return self._bus

    @bus.setter
    def bus(self, bus: EventBus) -> None:
        # The remembered jobs are valid only while this bus reports their changes.
        bus.watch(self.live_jobs.forget)
        self.live_jobs.forget(None)
        self._bus = bus

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
        await trio.to_thread.run_sync(self.store.open)
        await self._ensure_local_account()
        await self.cluster.register()
        self._registered = True
        self.store.announce_as = self.cluster.node_id
        self._background = await self._stack.enter_async_context(trio.open_nursery())
        self._supervisor = await self._stack.enter_async_context(
            open_supervisor(name="jobs", intensity=JOB_RESTART_INTENSITY,
                            checkpoints=self._checkpoints))
        self.scheduler = await self._supervisor.start_child(
            Scheduler, self.pool, name="scheduler", restart=Restart.PERMANENT)
        await self._stack.enter_async_context(self.starter.open())  # at exit: stop starting first
        # Recovery: the live jobs are read in bulk and their actors start in the
        # background; the runtime serves at once.
        await self._queue_starts([claim.job_id for claim in await self.cluster.claim_expired()])
        await self._stack.enter_async_context(self._cluster_services())

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            await self._stack.__aexit__(exc_type, exc, tb)
        finally:
            if self._registered:
                with trio.CancelScope(shield=True), contextlib.suppress(StoreUnavailable):
                    await self.cluster.leave()  # the others adopt our jobs at once
            self.store.close()

    @contextlib.asynccontextmanager
    async def _cluster_services(self) -> AsyncIterator[None]:
        """Heartbeat and adoption, and on PostgreSQL the LISTEN of other processes' changes."""
        async with trio.open_nursery() as nursery:
            if self.store.is_postgres:
                await nursery.start(partial(
                    listen, self.store.url, self.cluster.node_id, self.bus,
                    on_cancel=self._on_cancel_notice, on_connected=self._on_listening))
            nursery.start_soon(self.cluster.run, self._adopt)
            yield
            nursery.cancel_scope.cancel()

    async def _adopt(self, claims: list[Claim]) -> None:
        """Run the jobs whose leases this process took from a stopped one (relocation)."""
        fresh = []
        for claim in claims:
            if self.starter.idle(claim.job_id):
                fresh.append(claim.job_id)
            elif self.cluster.take_cancel_request(claim.job_id):
                # Its actor runs here still (this process's heartbeat was late): it
                # writes with the new epoch now, and takes the cancel asked meanwhile.
                await self._tell_cancel(claim.job_id)
        await self._queue_starts(fresh, cause=ADOPTED_CAUSE)

    async def _queue_starts(self, job_ids: list[str], cause: str | None = None) -> None:
        """Start the actors of these jobs in the background, oldest first (recovery, adoption).

        The jobs and their files are read in two queries and the checkpoint
        store is primed with them, so no store read happens per job. Requests
        for a job whose actor has not started yet read the store as usual; a
        cancel waits for its actor (:meth:`Starter.wait_started`). A job whose
        actor is running or on its way already is left alone (:class:`Starter`).
        """
        job_ids = [job_id for job_id in job_ids if self.starter.idle(job_id)]
        if not job_ids:
            return
        jobs = await self.store.jobs_by_id(job_ids)
        missing = [job.spec.training_file for job in jobs
                   if job.spec.training_file not in self._files]
        for row in await self.store.files_by_id(missing):
            self._files[row.id] = row
        for job in jobs:
            if self.starter.request(job, cause):  # primed only for a start that will read it
                self._checkpoints.prime([job])

    @property
    def recovering(self) -> bool:
        """True while actors of recovered (or adopted) jobs are still being started.

        The runtime serves meanwhile: reads answer from the store, a cancel
        waits for the job's actor, and a job created meanwhile starts after
        the recovered ones.
        """
        return self.starter.recovering

    def _on_cancel_notice(self, job_id: str) -> None:
        if self.cluster.owns(job_id) and self._background is not None:
            self._background.start_soon(self._tell_cancel, job_id)

    def _on_listening(self) -> None:
        if self._background is not None:
            self._background.start_soon(self._cancel_requested_jobs)

    async def _cancel_requested_jobs(self) -> None:
        # A cancel notice sent while this process was not listening is in the store.
        with contextlib.suppress(StoreUnavailable):
            for job_id in await self.cluster.owned_cancel_requests():
                await self._tell_cancel(job_id)

    async def _tell_cancel(self, job_id: str) -> None:
        await self.starter.wait_started(job_id)
        ref = self._supervisor.lookup(job_id) if self._supervisor else None
        if ref is not None:
            with contextlib.suppress(ActorStopped):
                await ref.tell(CancelJob())

    async def _ensure_local_account(self) -> None:
        now = int(time.time())
        await self.store.ensure_account(LOCAL_ACCOUNT, "local", self.settings.default_balance, now,
                                        billing_limit=self.settings.default_billing_limit,
                                        allow_commands=True)
        key_file = self.settings.data_dir / "api-key"
        configured = self.settings.api_key.get_secret_value() if self.settings.api_key else None
        key = configured or read_key_file(key_file)
        if key is None:
            key = new_key()
            write_key_file(key_file, key)
            self.api_key_created = True
        self.api_key = key
        await self.store.add_api_key(hash_key(key), LOCAL_ACCOUNT, now)

    def actor_statistics(self) -> SupervisorStatistics | None:
        """Counters of the supervisor of job actors (starts, restarts, crashes); None when closed."""
        return self._supervisor.statistics() if self._supervisor is not None else None

    def notify_operator(self, job_id: str, reason: str) -> None:
        """Report a platform failure to the operator, in the background (log, metric, webhook)."""
        if self._background is not None:
            self._background.start_soon(partial(
                notify_platform_failure, job_id, reason,
                webhook_url=self.settings.operator_webhook_url))

    # -- accounts ------------------------------------------------------------

    async def authenticate(self, api_key: str | None) -> str:
        """The account id of an API key.

        A key found in the store is remembered for
        :data:`alallo._key_cache.KEY_CACHE_TTL_S` seconds: one revoked with
        :meth:`revoke_api_key` stops working at once, one revoked by another
        process within that time.

        Raises:
            Unauthorized: no key, or one that belongs to no account.
        """
        if not api_key:
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        key_hash = hash_key(api_key)
        account = self.key_cache.get(key_hash)
        if account is not None:
            return account
        revocations = self.key_cache.revocations
        account = await self.store.account_for_key(key_hash)
        if account is None:
            raise Unauthorized("invalid API key")
        self.key_cache.put(key_hash, account, revocations=revocations)
        return account

    async def revoke_api_key(self, key_hash: str) -> bool:
        """Revoke a key by its hash (:func:`alallo._keys.hash_key`); it answers 401 at once.

        Returns False if it was revoked already (or is unknown).
        """
        self.key_cache.forget(key_hash)
        try:
            return await self.store.revoke_api_key(key_hash, int(time.time()))
        finally:
            self.key_cache.forget(key_hash)

    # -- files ---------------------------------------------------------------

    async def upload_file(self, account_id: str, filename: str, data: bytes,
                          *, purpose: str = "fine-tune") -> FileRow:
        """Check and store a JSONL training file.

        Raises:
            InvalidRequest: a purpose other than ``fine-tune``, or a file too large.
            InvalidFile: a bad line (the message names it); nothing is stored.
        """
        if purpose != "fine-tune":
            raise InvalidRequest(f"purpose must be 'fine-tune', got {purpose!r}", param="purpose")
        if len(data) > self.settings.max_upload_bytes:
            raise InvalidRequest(
                f"the file is {len(data)} bytes; the limit is {self.settings.max_upload_bytes}",
                param="file")
        checked = await trio.to_thread.run_sync(check_jsonl, data)
        file_id = "file-" + uuid.uuid4().hex[:24]
        path = self.file_storage.local_path(file_id)
        await trio.Path(path).write_bytes(data)
        try:  # at the shared URL before it is recorded and answered
            await self.file_storage.put(file_id, path)
        except BaseException:
            await trio.Path(path).unlink(missing_ok=True)
            raise
        row = FileRow(
            id=file_id, account_id=account_id, filename=filename or "upload.jsonl",
            bytes=len(data), purpose=purpose, created_at=int(time.time()),
            line_count=checked.line_count, format=checked.format,
            sha256=hashlib.sha256(data).hexdigest(), path=str(path),
        )
        await self.store.insert_file(row)
        self._files[file_id] = row
        return row

    async def get_file(self, account_id: str, file_id: str) -> FileRow:
        """One of the account's files. Raises :class:`NotFound`."""
        row = await self.store.get_file(account_id, file_id)
        if row is None:
            raise NotFound(f"no file {file_id!r}", param="file_id")
        return row

    async def list_files(self, account_id: str) -> list[FileRow]:
        """The account's files, newest first."""
        return await self.store.list_files(account_id)

    async def file_content(self, account_id: str, file_id: str) -> bytes:
        """The bytes of one of the account's files. Raises :class:`NotFound`."""
        row = await self.get_file(account_id, file_id)
        return await trio.Path(await self.file_storage.local_copy(row)).read_bytes()

    async def delete_file(self, account_id: str, file_id: str) -> None:
        """Delete a file. Raises :class:`NotFound`, or :class:`Conflict` while a live job uses it."""
        row = await self.get_file(account_id, file_id)
        if not await self.store.delete_file(account_id, file_id):
            raise Conflict(f"file {file_id} is used by a job that has not finished",
                           param="file_id")
        self._files.pop(file_id, None)
        await self.file_storage.delete(row)

    async def file_path(self, file_id: str) -> str:
        """Where a known file's bytes are on this machine, fetched from the shared
        storage URL if need be (for the job actor).

        Raises:
            OSError: the bytes are not here and cannot be fetched
                (:meth:`FileStorage.local_copy`).
        """
        return str(await self.file_storage.local_copy(self._files[file_id]))

    def file_format(self, file_id: str) -> Any:
        """The format of a known file (for the job actor)."""
        return self._files[file_id].format

    async def may_run_commands(self, account_id: str) -> bool:
        """Whether the account may send a command of its own as a trainer: the local
        account, and those the operator allowed (``alallo accounts create --allow-commands``)."""
        return await self.store.allows_commands(account_id)

    def list_trainers(self) -> list[TrainerInfo]:
        """The trainers a job may name here (``GET /v1/trainers``), built-in ones first."""
        return self.trainers.listed()

    async def _check_trainer(self, account_id: str, spec: JobSpec) -> None:
        """Refuse a trainer the account may not use, before anything is stored or run.

        Raises:
            Forbidden: the account sent a command and may not (``param="trainer.command"``).
            InvalidRequest: no trainer of the given name here (``param="trainer.name"``).
        """
        if isinstance(spec.trainer, NamedTrainer):
            self.trainers.command(spec.trainer.name)
        elif isinstance(spec.trainer, CommandTrainer) and not await self.may_run_commands(
                account_id):
            raise Forbidden(COMMANDS_NOT_ALLOWED, param="trainer.command")

    # -- models --------------------------------------------------------------

    def list_models(self) -> list[CatalogueModel]:
        """The model catalogue, ``runnable_here`` decided by this server's pool."""
        return [replace(m, runnable_here=self._runnable(m)) for m in self.catalogue.list()]

    def _runnable(self, model: CatalogueModel) -> bool:
        simulated = any(n.spec.simulated for n in self.pool.nodes.values())
        if not model.weights_here and not simulated:
            return False
        spec = JobSpec(model=model.id, training_file="-", precision="4-bit")
        lora16 = JobSpec(model=model.id, training_file="-")
        return any(plan_options(model, s, self.pool, max_steps=1,
                                tokens_per_example=512).verdict == "ok" for s in (spec, lora16))

    # -- jobs ----------------------------------------------------------------

    async def create_job(self, account_id: str, spec: JobSpec | Mapping[str, Any]) -> Job:
        """Accept a job: it is stored as ``queued`` (``Starting``) before this returns.

        A job that no node could ever run is accepted too, and fails at once
        with ``Not available right now.`` (it costs nothing, and never waits
        in the queue).

        Raises:
            pydantic.ValidationError: the spec is malformed.
            InvalidRequest: an unknown model, training file, trainer, or absurd setting.
            Forbidden: a command of its own from an account that may not send one.
        """
        spec = spec if isinstance(spec, JobSpec) else JobSpec.model_validate(spec)
        await self._check_trainer(account_id, spec)
        spec, options, max_steps = await self._plan(account_id, spec)
        plan = options.pick(spec.goal) if options.options else _NO_PLAN
        estimate = estimate_time(plan, wait_s=await self._wait_s(plan) if options.options else 0)
        now = time.time()
        job = Job(
            id="ft-" + uuid.uuid4().hex[:24], account_id=account_id, spec=spec,
            max_steps=max_steps, progress=Progress(max_steps=max_steps), plan=plan,
            options=options.options, verdict=options.verdict,
            estimate=estimate, price_estimate=estimate_price(plan), created_at=int(now),
        )
        transition = lifecycle.apply(job, lifecycle.Created(now=now))
        job = transition.job
        await self.store.save_job(job, transition.events, insert=True,
                                  owner=self.cluster.node_id)
        self.cluster.hold(job.id, 1)
        self._checkpoints.prime([job])  # its actor starts from it without reading it back
        await self.starter.start(job)  # queued behind recovered jobs: it must not overtake them
        return job

    async def estimate(self, account_id: str, spec: JobSpec | Mapping[str, Any]) -> dict[str, Any]:
        """Estimate time and price of a job spec without creating it.

        Returns the estimate object of API.md: ``available``, ``reason``
        (the seed's message), ``detail`` (why, in words: see :func:`alallo._plans.why_not`),
        ``time``, ``price``, ``capacity_free``, ``note``, ``plan``,
        ``allowed_to_proceed`` (false when the upper price exceeds the balance
        plus the billing limit).

        Raises:
            pydantic.ValidationError, InvalidRequest: as :meth:`create_job`.
        """
        spec = spec if isinstance(spec, JobSpec) else JobSpec.model_validate(spec)
        await self._check_trainer(account_id, spec)
        spec, options, _ = await self._plan(account_id, spec)
        balance, billing_limit = await self.store.balance(account_id)
        if not options.options:
            reason = (Message.CHOOSE_LOWER_PRECISION if options.verdict == "choose_lower_precision"
                      else Message.NOT_AVAILABLE).value
            return {"available": False, "reason": reason, "detail": options.detail,
                    "time": None, "price": None,
                    "capacity_free": False, "note": None, "plan": None,
                    "allowed_to_proceed": False}
        plan = options.pick(spec.goal)
        wait = await self._wait_s(plan)
        time_range = estimate_time(plan, wait_s=wait)
        low, high = estimate_price(plan)
        return {
            "available": True,
            "reason": None,
            "detail": None,
            "time": time_range.public(),
            "price": {"low": low, "high": high, "currency": "USD"},
            "capacity_free": wait == 0,
            "note": None if wait == 0 else NO_CAPACITY_NOTE,
            "plan": {"devices": plan.devices, "device_type": plan.device_type,
                     "memory_gb": plan.memory_gb},
            "allowed_to_proceed": high <= balance + billing_limit,
        }

    async def replan(self, job: Job) -> PlanOptions:
        """A job's plans again, with its measured memory (after a re-scheduling)."""
        _, options, _ = await self._plan(job.account_id, job.spec,
                                         memory_factor=job.memory_factor)
        return options

    async def _plan(self, account_id: str, spec: JobSpec | Mapping[str, Any], *,
                    memory_factor: float = 1.0) -> tuple[JobSpec, PlanOptions, int]:
        if not isinstance(spec, JobSpec):
            spec = JobSpec.model_validate(spec)
        model = self.catalogue.resolve(spec.model)
        file = await self.store.get_file(account_id, spec.training_file)
        if file is None:
            raise InvalidRequest(f"no training file {spec.training_file!r}",
                                 param="training_file")
        if spec.validation_file and not await self.store.get_file(account_id,
                                                                  spec.validation_file):
            raise InvalidRequest(f"no validation file {spec.validation_file!r}",
                                 param="validation_file")
        self._files[file.id] = file
        max_steps = self._max_steps(spec, file.line_count)
        options = plan_options(
            model, spec, self.pool, max_steps=max_steps,
            tokens_per_example=tokens_per_example(model, file.bytes, file.line_count),
            cpu_price_per_hour=self.settings.cpu_price_per_hour, memory_factor=memory_factor)
        if not model.weights_here:
            # Without weights, only simulated nodes can run the model.
            simulated = {n.device.name for n in self.pool.nodes.values() if n.spec.simulated}
            kept = tuple(p for p in options.options if p.device_type in simulated)
            if options.options and not kept:
                options = PlanOptions((), "not_available",
                                      "This server does not have the model's weights")
            else:
                options = PlanOptions(kept, options.verdict, options.detail)
        return spec, options, max_steps

    async def _wait_s(self, plan: Plan) -> float:
        if self.scheduler is None:
            return 0.0
        wait = cast(float, await self.scheduler.ask(WaitEstimate(plan), timeout=SCHEDULER_ASK_S))
        return wait

    async def drain_node(self, name: str, *, on: bool = True) -> list[str]:
        """Stop placing jobs on a node and move the jobs running there (``on=False``
        opens it again). Returns the ids of the jobs moved.

        Raises:
            NotFound: no such node (``param="node"``).
        """
        if self.scheduler is None or name not in self.pool.nodes:
            raise NotFound(f"no node {name!r}", param="node")
        moved = cast(list[str], await self.scheduler.ask(Drain(name, on=on),
                                                         timeout=SCHEDULER_ASK_S))
        if on and self._supervisor is not None:
            for job_id in moved:
                ref = self._supervisor.lookup(job_id)
                if ref is not None:
                    with contextlib.suppress(ActorStopped):
                        await ref.tell(RescheduleJob(f"node {name} is draining"))
        return moved if on else []

    async def capacity(self) -> dict[str, Any]:
        """Nodes, devices, what runs where, and the queue (``GET /v1/capacity``)."""
        queue: list[str] = []
        if self.scheduler is not None:
            queue = cast(list[str], await self.scheduler.ask(QueueSnapshot(),
                                                             timeout=SCHEDULER_ASK_S))
        return {"nodes": self.pool.public(), "queue_length": len(queue), "queue": queue}

    def _max_steps(self, spec: JobSpec, line_count: int) -> int:
        hp = spec.hyperparameters
        if hp.max_steps is not None:
            steps = hp.max_steps
        else:
            per_epoch = math.ceil(line_count / (hp.batch_size or DEFAULT_STEPS_BATCH))
            steps = (hp.n_epochs or 3) * per_epoch
        limit = self.settings.max_steps_limit
        if steps > limit:
            raise InvalidRequest(f"the job would train {steps} steps; the limit is {limit}",
                                 param="hyperparameters.max_steps")
        return steps

    async def _start_actor(self, job: Job, cause: str | None = None) -> None:
        """Start the job's actor under the supervisor, with its own restart limit (only
        through :attr:`starter`, which starts each job once)."""
        if self._supervisor is None:
            raise RuntimeError("the runtime is not open: use 'async with Runtime(...)'")
        if job.spec.training_file not in self._files:
            row = await self.store.get_file(job.account_id, job.spec.training_file)
            if row is not None:
                self._files[row.id] = row
        await self._supervisor.start_child(
            JobActor, self, job.id, cause, name=job.id, restart=Restart.TRANSIENT,
            intensity=JOB_ACTOR_INTENSITY, backoff=JOB_ACTOR_BACKOFF,
            on_give_up=self.starter.given_up)

    async def get_job(self, account_id: str, job_id: str) -> Job:
        """One of the account's jobs. Raises :class:`NotFound`.

        A job this process owns (its actor runs here under the job's lease)
        is answered from memory while the bus reports no change of it
        (:mod:`alallo._job_cache`); any other job is read from the store.
        """
        owned = self.cluster.owns(job_id)
        job = self.live_jobs.get(job_id) if owned else None
        if job is None:
            token = self.live_jobs.begin_read(job_id)
            job = None
            try:
                job = await self.store.get_job(job_id)
            finally:
                keep = job is not None and owned and self.cluster.owns(job_id)
                self.live_jobs.finish_read(job_id, token, job if keep else None)
        if job is None or job.account_id != account_id:
            raise NotFound(f"no job {job_id!r}", param="job_id")
        return job

    async def list_jobs(self, account_id: str, *, limit: int = 20,
                        after: str | None = None) -> tuple[list[Job], bool]:
        """The account's jobs, newest first, and whether more follow."""
        return await self.store.list_jobs(account_id, limit=limit, after=after)

    async def cancel_job(self, account_id: str, job_id: str) -> Job:
        """Ask a job to stop; returns it ``cancelling`` (or already ``cancelled``).

        Idempotent while the job is live.

        Raises:
            NotFound: no such job in the account.
            InvalidTransition: the job has already finished (409).
        """
        job = await self.get_job(account_id, job_id)
        if not job.status.is_final:
            await self.starter.wait_started(job_id)
            ref = self._supervisor.lookup(job_id) if self._supervisor else None
            if ref is not None:
                try:
                    return cast(Job, await ref.ask(CancelJob(), timeout=CANCEL_TIMEOUT_S))
                except ActorStopped:
                    pass  # the job ended meanwhile: answer from what the store says
            elif not self.cluster.owns(job_id):
                return await self._cancel_elsewhere(account_id, job_id)
            job = await self.get_job(account_id, job_id)
        lifecycle.apply(job, lifecycle.CancelRequested(now=time.time()))  # refuses a final job
        return job

    async def _cancel_elsewhere(self, account_id: str, job_id: str) -> Job:
        """Cancel a job another process owns: record the request (it survives that process)
        and, on PostgreSQL, wait (bounded) until the owner has taken it."""
        with self.bus.subscribe(job_id=job_id) as subscription:
            await self.cluster.request_cancel(job_id)
            job = await self.get_job(account_id, job_id)
            if self.store.is_postgres:
                with trio.move_on_after(CANCEL_TIMEOUT_S):
                    while not (job.status is JobStatus.CANCELLING or job.status.is_final):
                        with contextlib.suppress(Lagged):
                            await subscription.receive_batch()
                        job = await self.get_job(account_id, job_id)
        lifecycle.apply(job, lifecycle.CancelRequested(now=time.time()))  # refuses a final job
        return job

    async def list_events(self, account_id: str, job_id: str, *, after: int = 0,
                          limit: int = 100) -> tuple[list[Event], bool]:
        """A job's events, oldest first, with ``seq > after``; and whether more follow."""
        await self.get_job(account_id, job_id)
        rows = await self.store.items_after(job_id, after, kinds=("event",), limit=limit + 1)
        events = [event for _, _, data in rows[:limit]
                  if (event := read_item(Event, data, job_id=job_id)) is not None]
        return events, len(rows) > limit

    async def read_log(self, account_id: str, job_id: str, *, after: int = 0,
                       limit: int = 1000, attempt: int | None = None,
                       ) -> tuple[list[LogLine], bool]:
        """The training log of the current (or the given) attempt, oldest line first."""
        job = await self.get_job(account_id, job_id)
        rows = await self.store.items_after(job_id, after, kinds=("log",),
                                            attempt=attempt or max(job.attempt, 1),
                                            limit=limit + 1)
        lines = [line for _, _, data in rows[:limit]
                 if (line := read_item(LogLine, data, job_id=job_id)) is not None]
        return lines, len(rows) > limit

    async def stream(self, account_id: str, job_id: str, *, after: int = 0,
                     ) -> AsyncIterator[Item]:
        """Every update of a job with ``seq > after``, in order, until it ends.

        Yields ``job`` items (the whole job object), ``event`` items and
        ``log`` items. What happened before the call comes from the store
        (only the latest job state, not every intermediate one); then live
        updates follow from the bus with no gap and no repeat. Ends after the
        job's final state.

        Raises:
            NotFound: no such job in the account.
        """
        async for batch in self.stream_batches(account_id, job_id, after=after):
            for item in batch:
                yield item

    async def stream_batches(self, account_id: str, job_id: str, *, after: int = 0,
                             ) -> AsyncIterator[list[Item]]:
        """:meth:`stream`, a list at a time: the items that were ready together.

        Each list is non-empty and in ``seq`` order; the backlog from the
        store comes as one list, then each list holds what the bus had
        buffered for this subscriber (the gateway sends a list as one chunk).

        Raises:
            NotFound: no such job in the account.
        """
        await self.get_job(account_id, job_id)
        cursor = after
        while True:
            with self.bus.subscribe(job_id=job_id) as subscription:
                job = await self.get_job(account_id, job_id)
                backlog = [Item(job_id, kind, seq, public)
                           for kind, seq, data in await self.store.items_after(job_id, cursor)
                           if (public := _public_item(job_id, kind, data)) is not None]
                if job.state_seq > cursor:
                    backlog.append(Item(job_id, "job", job.state_seq, job.public(now=time.time())))
                backlog.sort(key=lambda item: item.seq)
                if backlog:
                    yield backlog
                    cursor = backlog[-1].seq
                if job.status.is_final and cursor >= job.state_seq:
                    return
                try:
                    while True:
                        batch: list[Item] = []
                        final = False
                        for item in await subscription.receive_batch():
                            if item.seq <= cursor:
                                continue
                            batch.append(item)
                            cursor = item.seq
                            if item.kind == "job" and item.data["status"] in _FINAL:
                                final = True
                                break
                        if batch:
                            yield batch
                        if final:
                            return
                except Lagged:
                    continue

    async def stream_jobs(self, account_id: str, *, after: int = 0) -> AsyncIterator[Item]:
        """Every job of the account whose state changed past feed position ``after``; never ends.

        Yields ``job`` items whose ``seq`` is the job's position in the
        account's feed (not the job's own sequence number, which is
        ``data["seq"]``): resuming with the last position seen gives each job
        that changed since, once, in its latest state. ``after=0`` starts
        with every job of the account. The bus only wakes the reader; what it
        yields is always read from the store, so a reader that lagged loses
        nothing and never sees a state twice.
        """
        cursor = after
        with self.bus.subscribe(account_id=account_id) as subscription:
            while True:
                while True:
                    rows = await self.store.job_feed_after(account_id, cursor, limit=FEED_PAGE)
                    now = time.time()
                    for position, job in rows:
                        yield Item(job.id, "job", position, job.public(now=now))
                        cursor = position
                    if len(rows) < FEED_PAGE:
                        break
                try:
                    await subscription.receive_batch()
                except Lagged:
                    pass

    async def wait_for_final(self, account_id: str, job_id: str) -> Job:
        """Wait until the job reaches a final status and return it."""
        async for _ in self.stream(account_id, job_id, after=0):
            pass
        return await self.get_job(account_id, job_id)


_NO_PLAN = Plan(device_type="none", devices=0, memory_gb=0, price_per_hour=0, step_time_s=0,
                startup_s=0)
"""The plan of a job no node can run (it fails at once)."""

_FINAL = frozenset({"succeeded", "failed", "cancelled"})


def _public_item(job_id: str, kind: str, data: dict[str, Any]) -> dict[str, Any] | None:
    if kind == "event":
        event = read_item(Event, data, job_id=job_id)
        return event.public(job_id) if event is not None else None
    line = read_item(LogLine, data, job_id=job_id)
    return line.public() if line is not None else None
