"""Where and how long a job would run, and at what price: its plans on this server's
pool, the estimate shown before it is created, the models that can run here, and the
capacity report (:meth:`alallo.Runtime.estimate`, :meth:`alallo.Runtime.capacity`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, NamedTuple, cast

import trio

from actors import ActorRef

from .. import api
from .._errors import InvalidRequest, NotFound
from .._status import Message
from ..capacity import (
    Catalogue,
    CatalogueModel,
    PlanOptions,
    Pool,
    QueueSnapshot,
    SchedulerMessage,
    WaitEstimate,
    find_on_hub,
    hub_reachable,
    plan_options,
    tokens_per_example,
)
from ..jobs import (
    PREFERENCE_FORMATS,
    Job,
    JobSpec,
    Plan,
    StartingWeights,
    estimate_price,
    estimate_time,
)
from ..settings import Settings
from ..store import FileRow, Store
from ..trainers.graders import Grader, judge_models
from ._data_fit import DataFit
from ._model_ids import parse_model_id
from ._serving import SERVING
from ._starting_weights import GetJob, starting_weights
from ._training_files import TrainingFiles
from ._views import CURRENCY, nodes_view, plan_view, time_range_view

__all__ = ["DEFAULT_STEPS_BATCH", "NO_CAPACITY_NOTE", "NO_PLAN", "OTHERS", "SCHEDULER_ASK_S",
           "Planned", "Planning"]

DEFAULT_STEPS_BATCH = 4
"""Examples per step when the spec names no batch size (to count a job's steps)."""
SCHEDULER_ASK_S = 10.0
"""How long a question to the scheduler may take (s)."""
NO_CAPACITY_NOTE = "No capacity is free right now; the job would wait in the queue."
OTHERS = "others"
"""The key of a node's ``busy`` that sums other accounts' devices (:meth:`Planning.capacity`)."""
NO_PLAN = Plan(device_type="none", devices=0, memory_gb=0, price_per_hour=0, step_time_s=0,
               startup_s=0)
"""The plan of a job no node can run (it fails at once)."""


class Planned(NamedTuple):
    """What :meth:`Planning.plan` found for a spec."""

    spec: JobSpec
    options: PlanOptions
    max_steps: int
    start: StartingWeights | None
    """The weights the job continues from (None: its base model's own)."""
    notes: tuple[str, ...] = ()
    """What a new job's data loses to the model's context (:class:`DataFit`): the estimate's
    ``warnings``, the job's ``WARNING`` events."""
    steps_per_epoch: int = 1
    """Steps one pass over the training file takes (its examples over the batch size)."""


class Planning:
    """Plans and estimates on one runtime's pool.

    Args:
        settings: ``max_steps_limit``, ``cpu_price_per_hour``.
        store: the account's files and balance.
        catalogue: the models (:mod:`alallo._catalogue`).
        pool: the nodes and their devices (:mod:`alallo._capacity`).
        files: where the training file's row is kept for the job's actor.
        scheduler: the scheduler actor, once the runtime has started it (None before).
        find_model, get_job: the account's fine-tuned models and jobs, for the weights a
            job continues from (:mod:`alallo.runtime._starting_weights`).
    """

    def __init__(self, settings: Settings, store: Store, catalogue: Catalogue, pool: Pool,
                 files: TrainingFiles,
                 scheduler: Callable[[], ActorRef[SchedulerMessage] | None], *,
                 find_model: GetJob, get_job: GetJob) -> None:
        self._settings = settings
        self._store = store
        self._catalogue = catalogue
        self._pool = pool
        self._files = files
        self._scheduler = scheduler
        self._find_model = find_model
        self._get_job = get_job
        self._fit = DataFit(files)

    def list_models(self) -> list[CatalogueModel]:
        """The model catalogue and the hub models in the Hugging Face cache, ``runnable_here``
        decided by this server's pool."""
        self._catalogue.cached_hub_models()  # known from now on, listed after the built-in
        return [replace(m, runnable_here=self._runnable(m)) for m in self._catalogue.list()]

    async def _check_judges(self, account_id: str, grader: Grader) -> None:
        """Each model a ``score_model`` grader asks is one the account may use with its
        weights on this server (the trainer loads it beside the model it trains): a base
        model, or a fine-tuned or checkpoint model of the account (or shared with it).

        Raises:
            InvalidRequest: a judge that is no such model for the account (``param="grader"``;
                another account's model answers as a name nobody has).
        """
        for name in judge_models(grader):
            try:
                if parse_model_id(name) is not None:
                    await self._find_model(account_id, name)
                    continue
                model = self.model(name)
            except (InvalidRequest, NotFound) as exc:
                raise InvalidRequest(f"the score_model grader's model: {exc.message}; the "
                                     "judge is a model of this server (GET /v1/models)",
                                     param="grader") from None
            if model.on_hub or not model.weights_here:
                raise InvalidRequest(f"the score_model grader's model {name} has no weights "
                                     "on this server yet: train a job on it first (its weights "
                                     "are downloaded then)", param="grader")

    def model(self, name: str) -> CatalogueModel:
        """The model a job names (:meth:`~alallo.capacity.Catalogue.resolve`).

        Raises:
            InvalidRequest: no such model (``param="model"``).
        """
        return self._catalogue.resolve(name)

    async def find_model(self, name: str) -> CatalogueModel:
        """The model a job names, asking the Hugging Face hub (in a worker thread) for a hub
        id the cache lacks, when this server reaches the hub; remembered from then on. Never
        for a name of ``alallo/`` (:meth:`~alallo.capacity.Catalogue.hub_may_have`).

        Raises:
            InvalidRequest: no such model here or on the hub, or the hub cannot be reached
                to tell (``param="model"``; the message names the closest known models).
        """
        try:
            return self._catalogue.resolve(name)
        except InvalidRequest:
            if not self._catalogue.hub_may_have(name) or not hub_reachable():
                raise
        token = self._settings.hf_token
        try:
            model = await trio.to_thread.run_sync(
                find_on_hub, name, token.get_secret_value() if token else None)
        except InvalidRequest as exc:
            closest = ", ".join(repr(known) for known in self._catalogue.closest(name))
            raise InvalidRequest(f"{exc.message}; the closest known: {closest}" if closest
                                 else exc.message, param="model") from None
        self._catalogue.remember(model)
        return model

    def _runnable(self, model: CatalogueModel) -> bool:
        simulated = any(n.spec.simulated for n in self._pool.nodes.values())
        if not model.weights_here and not simulated:
            return False
        spec = JobSpec(model=model.id, training_file="-", precision="4-bit")
        lora16 = JobSpec(model=model.id, training_file="-")
        return any(plan_options(model, s, self._pool, max_steps=1,
                                tokens_per_example=512).verdict == "ok" for s in (spec, lora16))

    async def estimate(self, account_id: str, spec: JobSpec) -> api.Estimate:
        """The estimate object of API.md for ``spec`` (see :meth:`alallo.Runtime.estimate`).

        Raises:
            InvalidRequest: an unknown model or training file, or too many steps.
        """
        planned = await self.plan(account_id, spec)
        spec, options, notes = planned.spec, planned.options, planned.notes
        balance, billing_limit = await self._store.balance(account_id)
        if not options.options:
            reason = (Message.CHOOSE_LOWER_PRECISION if options.verdict == "choose_lower_precision"
                      else Message.NOT_AVAILABLE).value
            return {"available": False, "reason": reason, "detail": options.detail,
                    "time": None, "price": None,
                    "capacity_free": False, "note": None, "plan": None,
                    "allowed_to_proceed": False, "warnings": list(notes), "train_tokens": None}
        plan = options.pick(spec.goal)
        wait = await self.wait_s(plan)
        time_range = estimate_time(plan, wait_s=wait)
        low, high = estimate_price(plan)
        return {
            "available": True,
            "reason": None,
            "detail": None,
            "time": time_range_view(time_range),
            "price": {"low": low, "high": high, "currency": CURRENCY},
            "capacity_free": wait == 0,
            "note": None if wait == 0 else NO_CAPACITY_NOTE,
            "plan": plan_view(plan),
            "allowed_to_proceed": high <= balance + billing_limit,
            "warnings": list(notes),
            "train_tokens": (None if plan.tokens_per_step is None
                             else round(plan.max_steps * plan.tokens_per_step)),
        }

    async def replan(self, job: Job) -> PlanOptions:
        """A job's plans again, with its measured memory (after a re-scheduling)."""
        planned = await self.plan(job.account_id, job.spec,
                                  memory_factor=job.memory_factor, job=job)
        return planned.options

    async def plan(self, account_id: str, spec: JobSpec | Mapping[str, Any], *,
                   memory_factor: float = 1.0, job: Job | None = None) -> Planned:
        """The spec (validated), its plans on this pool, its number of steps, the
        weights it starts from (those of ``job`` when it exists already), and, for a new job
        (no ``job``), what its data loses to the model's context (:meth:`_data_notes`).

        Raises:
            pydantic.ValidationError: a malformed spec.
            InvalidRequest: an unknown model, training or validation file, fine-tuned model
                or checkpoint; too many steps; an example that cannot train (its line).
        """
        if not isinstance(spec, JobSpec):
            spec = JobSpec.model_validate(spec)
        # The account's own rows first, the hub last: a model looked up on the hub is
        # remembered (and listed by GET /v1/models), so a refused spec must not get there.
        file = await self._store.get_file(account_id, spec.training_file)
        if file is None or (job is None and file.expired(time.time())):  # kept for its jobs
            raise InvalidRequest(f"no training file {spec.training_file!r}",
                                 param="training_file")
        _suits_the_method(spec, file, "training_file")
        if spec.grader is not None:
            await self._check_judges(account_id, spec.grader)
        validation = None
        if spec.validation_file:
            validation = await self._store.get_file(account_id, spec.validation_file)
            if validation is None or (job is None and validation.expired(time.time())):
                raise InvalidRequest(f"no validation file {spec.validation_file!r}",
                                     param="validation_file")
            _suits_the_method(spec, validation, "validation_file")
        per_epoch = max(1, math.ceil(file.line_count
                                     / (spec.hyperparameters.batch_size or DEFAULT_STEPS_BATCH)))
        max_steps = self._max_steps(spec, per_epoch)
        start = job.init_from if job is not None else await starting_weights(
            account_id, spec, find_model=self._find_model, get_job=self._get_job)
        model = await self.find_model(start.base_model if start else spec.model)
        notes = await self._data_notes(account_id, spec, model, file, validation) \
            if job is None else ()
        eval_examples = 0
        if validation is not None:
            self._files.remember(validation)
            eval_examples = validation.line_count
        self._files.remember(file)
        options = plan_options(
            model, spec, self._pool, max_steps=max_steps,
            tokens_per_example=tokens_per_example(model, file.bytes, file.line_count),
            cpu_price_per_hour=self._settings.cpu_price_per_hour, memory_factor=memory_factor,
            cpu_ranks=self._settings.cpu_devices or 1, eval_examples=eval_examples)
        if not model.weights_here:
            # Without weights, only simulated nodes can run the model.
            simulated = {n.device.name for n in self._pool.nodes.values() if n.spec.simulated}
            kept = tuple(p for p in options.options if p.device_type in simulated)
            if options.options and not kept:
                options = PlanOptions((), "not_available",
                                      "This server does not have the model's weights")
            else:
                options = PlanOptions(kept, options.verdict, options.detail)
        return Planned(spec, options, max_steps, start, notes, per_epoch)

    async def _data_notes(self, account_id: str, spec: JobSpec, model: CatalogueModel,
                          file: FileRow, validation: FileRow | None) -> tuple[str, ...]:
        """The job's files against the model's context (:class:`DataFit`), for jobs the
        built-in TRL trainer runs (a node here that is not simulated): the notes on examples
        that are cut.

        Raises:
            InvalidRequest: an example cannot train (``param`` the file's field).
        """
        if spec.trainer != "trl" or all(n.spec.simulated for n in self._pool.nodes.values()):
            return ()
        notes = [await self._fit.check(account_id, model, file, "training_file")]
        if validation is not None:
            note = await self._fit.check(account_id, model, validation, "validation_file")
            notes.append(f"Validation file: {note}" if note else None)
        return tuple(note for note in notes if note)

    async def wait_s(self, plan: Plan) -> float:
        """The scheduler's guess of the queue wait for ``plan`` (s; 0 before it runs)."""
        scheduler = self._scheduler()
        if scheduler is None:
            return 0.0
        return cast(float, await scheduler.ask(WaitEstimate(plan), timeout=SCHEDULER_ASK_S))

    async def capacity(self, account_id: str | None = None) -> api.Capacity:
        """Nodes, devices, what runs where, and the queue (``GET /v1/capacity``).

        A vLLM engine's device shows under ``serving:vllm-N`` (to every account: it names no
        model). With ``account_id``, as that account sees it: other accounts' job ids are not
        shown; their devices count under ``busy["others"]`` (:data:`OTHERS`), their device
        indices under ``device_indices["others"]``, and their place in line only in
        ``queue_length``.
        """
        queue: list[str] = []
        scheduler = self._scheduler()
        if scheduler is not None:
            queue = cast(list[str], await scheduler.ask(QueueSnapshot(), timeout=SCHEDULER_ASK_S))
        nodes = nodes_view(self._pool)
        if account_id is not None:
            ids = [*queue, *(job_id for node in nodes for job_id in node["busy"])]
            own = {*await self._store.jobs_of_account(account_id, ids),
                   *(i for i in ids if i.startswith(SERVING))}  # engines: no account's
            for node in nodes:
                busy = {job_id: n for job_id, n in node["busy"].items() if job_id in own}
                others = sum(n for job_id, n in node["busy"].items() if job_id not in own)
                node["busy"] = busy | ({OTHERS: others} if others else {})
                held = node["device_indices"]
                theirs = sorted(i for job_id, ix in held.items() if job_id not in own for i in ix)
                node["device_indices"] = ({job_id: ix for job_id, ix in held.items()
                                           if job_id in own}
                                          | ({OTHERS: theirs} if theirs else {}))
            return {"nodes": nodes, "queue_length": len(queue),
                    "queue": [job_id for job_id in queue if job_id in own]}
        return {"nodes": nodes, "queue_length": len(queue), "queue": queue}

    def _max_steps(self, spec: JobSpec, per_epoch: int) -> int:
        hp = spec.hyperparameters
        if hp.max_steps is not None:
            steps = hp.max_steps
        else:
            steps = (hp.n_epochs or 3) * per_epoch
        limit = self._settings.max_steps_limit
        if steps > limit:
            raise InvalidRequest(f"the job would train {steps} steps; the limit is {limit}",
                                 param="hyperparameters.max_steps")
        return steps


def _suits_the_method(spec: JobSpec, file: FileRow, field: str) -> None:
    """A preference file for ``dpo``, prompts for ``reinforcement``, examples for
    ``supervised``; else 422 saying which method the file is for.

    Raises:
        InvalidRequest: the file's format is not the method's, or it is no training data (a
            job's results file) (``param=field``).
    """
    if file.purpose != "fine-tune":
        raise InvalidRequest(f"{file.id} is a job's {file.format} results file, not training "
                             f"data: upload a JSONL file with purpose fine-tune", param=field)
    kind = ("dpo" if file.format in PREFERENCE_FORMATS
            else "reinforcement" if file.format == "reinforcement" else "supervised")
    if kind == spec.method:
        return
    wants = {"dpo": "preference pairs (prompt, chosen and rejected; or OpenAI's input, "
                    "preferred_output and non_preferred_output)",
             "reinforcement": "prompts: conversations that end before the answer, which the "
                              "model writes and the grader scores",
             "supervised": "examples with their answers (text, messages ending with the "
                           "assistant's, or prompt and completion)"}
    holds = {"dpo": "preference pairs", "reinforcement": "prompts without answers",
             "supervised": f"{file.format} examples"}
    hint = (" (or, for reinforcement, leave the assistant's answer out of each conversation "
            "and give it in a field the grader reads, such as \"answer\")"
            if spec.method == "reinforcement" and file.format == "messages" else "")
    raise InvalidRequest(f"method {spec.method} trains on {wants[spec.method]}; {file.id} "
                         f"holds {holds[kind]}: use method {kind}{hint}", param=field)
