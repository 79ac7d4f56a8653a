"""The one place where domain objects become the API's JSON (API.md).

Each function takes what the runtime holds (a :class:`~alallo.Job`, an
:class:`~alallo.Event`, a stored file, a catalogue model ...) and returns its
answer as the TypedDict of :mod:`alallo.api` that names its keys, so the type
checker holds the server to the shapes the clients and ``/openapi.json`` use.
The domain stays free of wire concerns: it never knows how it is spelt on the
wire. Every value is plain JSON data (``str``, numbers, ``None``, lists,
dicts), ready for ``json.dumps``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, TypeVar

from .. import api
from .._status import JobStatus
from .._trainer_registry import TrainerInfo
from ..capacity import CatalogueModel, Placement, Pool
from ..jobs import (
    CHECKPOINT_EVERY,
    DEFAULT_BATCH_SIZE,
    DPO_BETA,
    PRICE_DIGITS,
    Event,
    Job,
    LogLine,
    MetricsPoint,
    Plan,
    TimeRange,
    time_left,
)
from ..store import FileRow
from ._checkpoint_list import CHECKPOINT_FIGURES, JobCheckpoint
from ._model_ids import model_id

__all__ = [
    "CURRENCY",
    "account_view",
    "checkpoint_view",
    "event_view",
    "file_view",
    "JOB_CLOCK_KEYS",
    "job_clock_view",
    "job_view",
    "log_line_view",
    "method_view",
    "metrics_row_view",
    "metrics_view",
    "model_view",
    "nodes_view",
    "page",
    "permission_list_view",
    "permission_view",
    "placement_view",
    "plan_view",
    "time_range_view",
    "trainer_view",
]

CURRENCY = "USD"
"""The currency of every price and charge."""

T = TypeVar("T")


def page(data: Sequence[T], has_more: bool) -> api.Page[T]:
    """A list answer: ``{"object": "list", "data": [...], "has_more": ...}``."""
    return {"object": "list", "data": list(data), "has_more": has_more}


def time_range_view(span: TimeRange) -> api.TimeRange:
    """A time range, seconds rounded to whole ones, with the text users read."""
    return {"low_s": round(span.low_s), "high_s": round(span.high_s), "text": span.text,
            "basis": span.basis}


def plan_view(plan: Plan) -> api.EstimatePlan:
    """The devices a job runs on (or would)."""
    return {"devices": plan.devices, "device_type": plan.device_type,
            "memory_gb": plan.memory_gb}


def placement_view(placement: Placement) -> dict[str, Any]:
    """Where a job runs now: ``{"node", "device_type", "devices", "device_indices"}``."""
    return {"node": placement.node, "device_type": placement.device_type,
            "devices": placement.devices, "device_indices": list(placement.device_indices)}


JOB_CLOCK_KEYS = ("time_left", "estimated_finish")
"""The keys of :func:`job_view` that depend on ``now``; every other value is a function of
the (frozen) :class:`~alallo.Job` alone, so a job's JSON may be rendered once per state
with these filled in per answer (:func:`job_clock_view`)."""


def job_clock_view(job: Job, *, now: float) -> dict[str, Any]:
    """The values of :data:`JOB_CLOCK_KEYS` at ``now`` (Unix seconds), as in :func:`job_view`:
    ``{"time_left": range or None, "estimated_finish": Unix seconds or None}``."""
    left = time_left(job, now=now)
    if left is None:
        return {"time_left": None, "estimated_finish": None}
    if job.status is JobStatus.PAUSED:  # the training time it still needs; no finish while paused
        return {"time_left": time_range_view(left), "estimated_finish": None}
    return {"time_left": time_range_view(left), "estimated_finish": int(now + left.high_s)}


def job_view(job: Job, *, now: float) -> api.FineTuningJob:
    """The job object (API.md, Jobs); ``now`` (Unix seconds) dates ``time_left`` and
    ``estimated_finish`` (:func:`job_clock_view`)."""
    spec = job.spec
    clock = job_clock_view(job, now=now)
    return {
        "id": job.id,
        "object": "fine_tuning.job",
        "organization_id": job.account_id,
        "name": spec.name,
        "model": spec.model,
        "training_file": spec.training_file,
        "validation_file": spec.validation_file,
        "suffix": spec.suffix,
        "user_provided_suffix": spec.suffix,
        "method": method_view(job),
        "adapter": spec.adapter,
        "precision": spec.precision,
        "goal": spec.goal,
        "trainer": job.trainer_name,
        "hyperparameters": job.resolved_hyperparameters(),
        "status": job.status.value,
        "message": job.message,
        "progress": {
            "step": job.progress.step,
            "max_steps": job.progress.max_steps,
            "percent": job.progress.percent,
            "epoch": job.progress.epoch,
            "loss": job.progress.loss,
        },
        "time_left": clock["time_left"],
        "estimate": time_range_view(job.estimate),
        "price": {
            "estimate": {"low": job.price_estimate[0], "high": job.price_estimate[1]},
            # What the user pays: net of refunds (a failed job: 0), to the ledger's digit.
            "charged": round(job.charged - job.refunded, PRICE_DIGITS),
            "refunded": round(job.refunded, PRICE_DIGITS),
            "gross": round(job.charged, PRICE_DIGITS),
            "currency": CURRENCY,
        },
        "plan": plan_view(job.plan),
        "placement": job.placement,
        "queue_position": job.queue_position,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "estimated_finish": clock["estimated_finish"],
        "attempt": job.attempt,
        "checkpoint": ({"step": job.checkpoint.step, "created_at": job.checkpoint.created_at}
                       if job.checkpoint else None),
        "fine_tuned_model": model_id(job) if job.fine_tuned_model else None,
        "fine_tuned_model_path": job.fine_tuned_model,
        "model_revision": job.model_revision,
        "result_files": list(job.result_files),
        "trained_tokens": job.trained_tokens,
        "early_stopping": spec.early_stopping.model_dump() if spec.early_stopping else None,
        "error": ({"code": job.error.code, "message": job.error.message,
                   "param": job.error.param} if job.error else None),
        "seq": job.state_seq,
        "integrations": [i.model_dump(exclude={"wandb": {"api_key"}})
                         for i in spec.integrations],
        "seed": spec.seed if spec.seed is not None else 0,  # 0: what ran before seeds were drawn
        "metadata": spec.metadata,
    }


def method_view(job: Job) -> api.JobMethod:
    """A job's ``method`` as OpenAI's object, ``{"type": KIND, KIND: {"hyperparameters":
    {...}}}``, with OpenAI's hyperparameters of that kind as they ran: ``n_epochs``,
    ``batch_size``, ``learning_rate_multiplier`` (and DPO's ``beta``), never ``"auto"`` or
    None. Sent back as a new job's ``method``, it asks for the same training."""
    hyperparameters: api.MethodHyperparameters = {
        "n_epochs": job.n_epochs,
        "batch_size": job.spec.hyperparameters.batch_size or DEFAULT_BATCH_SIZE,
        "learning_rate_multiplier": job.learning_rate_multiplier,
    }
    if job.spec.method == "dpo":
        hyperparameters["beta"] = job.spec.hyperparameters.beta or DPO_BETA
        return {"type": "dpo", "dpo": {"hyperparameters": hyperparameters}}
    if job.spec.method == "reinforcement":
        ran = job.resolved_hyperparameters()
        hyperparameters.update({name: ran[name] for name in (  # type: ignore[misc]
            "compute_multiplier", "eval_samples", "reasoning_effort") if name in ran})
        hyperparameters["eval_interval"] = ran.get("eval_interval", CHECKPOINT_EVERY)
        grader = job.spec.grader.model_dump(exclude_none=True) if job.spec.grader else {}
        return {"type": "reinforcement",
                "reinforcement": {"grader": grader, "hyperparameters": hyperparameters}}
    return {"type": "supervised", "supervised": {"hyperparameters": hyperparameters}}


def event_view(event: Event, job_id: str) -> api.JobEvent:
    """One entry of a job's events list as OpenAI's ``fine_tuning.job.event`` of ``type``
    ``message`` (``level`` ``info``, ``warn`` or ``error``); its ``id`` is
    ``<job id>-event-<seq>``. alallo's own fields: ``alallo_type`` (the seed's kind,
    ``JOB_START`` ...), ``seq``, ``hash``, ``step``. Metrics events:
    :func:`alallo.runtime._event_list.metrics_event_view`."""
    return {
        "id": f"{job_id}-event-{event.seq}",
        "object": "fine_tuning.job.event",
        "created_at": event.created_at,
        "level": "warn" if event.level.value == "warning" else event.level.value,  # OpenAI's word
        "type": "message",
        "message": event.message,
        "data": event.data,
        "alallo_type": event.type.value,
        "seq": event.seq,
        "hash": event.hash,
        "step": event.step,
    }


def log_line_view(line: LogLine) -> api.TrainingLogLine:
    """One line of the training log; ``at`` rounded to milliseconds."""
    return {"n": line.n, "at": round(line.at, 3), "text": line.text, "attempt": line.attempt}


def metrics_view(point: MetricsPoint) -> api.JobMetrics:
    """One report of figures (a ``metrics`` stream item): ``step``, ``epoch`` and the
    figures it brought; those it did not bring are left out."""
    view: dict[str, Any] = {"object": "fine_tuning.job.metrics", "step": point.step,
                            "epoch": point.epoch, **point.figures()}
    if point.scores:
        view["scores"] = point.scores
    return view  # type: ignore[return-value]  # a partial JobMetrics: what one report brought


def metrics_row_view(row: dict[str, float | int | None]) -> api.JobMetrics:
    """One step of the metrics series (:func:`alallo.jobs.series`): every figure, None
    where it was not measured."""
    return {"object": "fine_tuning.job.metrics", **row}  # type: ignore[typeddict-item]


def checkpoint_view(checkpoint: JobCheckpoint) -> api.Checkpoint:
    """A saved checkpoint, as OpenAI's ``fine_tuning.job.checkpoint``."""
    return {
        "id": checkpoint.id,
        "object": "fine_tuning.job.checkpoint",
        "created_at": checkpoint.created_at,
        "fine_tuned_model_checkpoint": checkpoint.model,
        "fine_tuning_job_id": checkpoint.job_id,
        "step_number": checkpoint.step,
        "metrics": {"step": checkpoint.step, "train_loss": checkpoint.train_loss,
                    **{name: checkpoint.figures.get(name) for name in CHECKPOINT_FIGURES}},  # type: ignore[typeddict-item]
    }


def permission_view(row: dict[str, Any]) -> api.CheckpointPermission:
    """A checkpoint model shared with an account (:class:`~alallo.store.Store`'s permission
    row), as OpenAI's ``checkpoint.permission``: never the owner, job or step."""
    return {"id": str(row["id"]), "object": "checkpoint.permission",
            "created_at": int(row["created_at"]), "project_id": str(row["project_id"])}


def permission_list_view(rows: Sequence[dict[str, Any]],
                         has_more: bool) -> api.CheckpointPermissionList:
    """A page of permissions, OpenAI's list shape (``first_id``, ``last_id``: null when
    empty)."""
    data = [permission_view(row) for row in rows]
    return {"object": "list", "data": data, "has_more": has_more,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None}


def account_view(row: dict[str, Any]) -> api.Account:
    """The caller's account from its row and ledger sums (:meth:`Store.account_summary`):
    every amount rounded to the ledger's digit, so that sums of floats read as the ledger."""
    def usd(amount: float) -> float:
        return round(float(amount), PRICE_DIGITS) + 0.0  # + 0.0: never "-0.0"

    balance, limit = usd(row["balance"]), usd(row["billing_limit"])
    charges, refunds = usd(row["charges"]), usd(row["refunds"])
    return {
        "id": row["id"], "object": "account", "name": row["name"],
        "created_at": row["created_at"], "balance": balance, "billing_limit": limit,
        "available": usd(balance + limit),
        "spend": {"charged": usd(charges - refunds), "refunded": refunds, "gross": charges},
        "currency": CURRENCY,
    }


def file_view(row: FileRow) -> api.FileObject:
    """An uploaded training file (only files that passed the checks are stored)."""
    return {
        "id": row.id, "object": "file", "filename": row.filename, "bytes": row.bytes,
        "purpose": row.purpose, "created_at": row.created_at, "line_count": row.line_count,
        "format": row.format,  # type: ignore[typeddict-item]  # one of api.FileObject's three
        "status": "processed", "status_details": None, "expires_at": row.expires_at,
    }


def model_view(model: CatalogueModel) -> api.Model:
    """A model of the catalogue (``owned_by``: ``alallo``, ``local`` for a directory on disk,
    a hub model's organisation)."""
    owner = ("alallo" if model.local_path is None else model.id.split("/")[0]
             if model.revision else "local")
    return {
        "id": model.id,
        "object": "model",
        "created": _written_at(model.local_path),
        "owned_by": owner,
        "revision": model.revision,
        "parameters": model.parameters,
        "context_length": model.context_length,
        "adapters": ["lora", "full"],
        "precisions": ["16-bit", "4-bit"],
        "runnable_here": model.runnable_here,
    }


def fine_tuned_model_view(job: Job, base: CatalogueModel | None, *, checkpoint: str | None = None,
                          path: str | None = None) -> api.Model:
    """An account's fine-tuned model, as ``GET /v1/models`` lists it (``owned_by``: the
    account; its size is its base's, and a job may train it further where its base can
    be trained); or, given ``checkpoint`` (its id) and ``path``, one of the job's checkpoint
    models, ``created`` when its files were written."""
    created = _written_at(path) if checkpoint else job.finished_at or job.created_at
    return {
        "id": checkpoint or model_id(job), "object": "model", "created": created,
        "owned_by": job.account_id, "revision": None,
        "parameters": base.parameters if base else 0,
        "context_length": base.context_length if base else 0,
        "adapters": [job.spec.adapter], "precisions": [job.spec.precision],
        "runnable_here": base.runnable_here if base else False,
    }


def _written_at(path: str | os.PathLike[str] | None) -> int:
    """When the files at ``path`` were written (Unix s; a ``stat``, no reading); 0 if none."""
    try:
        return int(os.stat(path).st_mtime) if path else 0
    except OSError:
        return 0


def trainer_view(trainer: TrainerInfo) -> api.Trainer:
    """A trainer a job may name; never its command."""
    return {"object": "trainer", "name": trainer.name, "description": trainer.description,
            "built_in": trainer.built_in}


def nodes_view(pool: Pool) -> list[api.CapacityNode]:
    """Every node of the pool: devices, free and busy (how many and which, by job id), price
    and memory."""
    return [{
        "name": n.spec.name, "device_type": n.device.name, "devices": n.spec.count,
        "free": n.free, "busy": dict(n.busy),
        "device_indices": {job_id: list(held) for job_id, held in n.held.items()},
        "simulated": n.spec.simulated, "ray": n.spec.ray,
        "draining": n.draining, "memory_gb": n.device.memory_gb,
        "price_per_hour": n.device.price_per_hour,
    } for n in pool.nodes.values()]
