"""Continued training: the weights a new job starts from, when not its base model's own.

A job may name a fine-tuned model of the account as its ``model`` (``ft:…``), or a
checkpoint model (``ft:…:ckpt-step-N``) of its own or shared with it: a LoRA job then trains
that adapter further, a full fine-tune starts from its weights (an adapter is merged into
its base first). Or it names ``from_checkpoint``: a checkpoint of one of the
account's jobs, by its id (``ftckpt-<job hex>-<step>``) or as ``ft-…:STEP`` (Together's
form), with ``model`` that job's base model or its model id. Either way the job plans,
prices and loads the base model under them, pinned to the revision that job trained.

Another account's model or checkpoint is refused in the very words of one that does not
exist; so is a checkpoint the server no longer keeps (a job keeps its newest three).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

import trio

from .._errors import InvalidRequest, NotFound
from ..jobs import Job, JobSpec, StartingWeights
from ._checkpoint_list import CHECKPOINT_ID_PREFIX, checkpoint_dir
from ._model_ids import model_id, parse_model_id

__all__ = ["GetJob", "starting_weights"]

_CHECKPOINT = re.compile(
    rf"^(?:{CHECKPOINT_ID_PREFIX}(?P<hex>[0-9a-f]+)-(?P<step>\d+)|ft-(?P<job>[0-9a-f]+):(?P<at>\d+))$")

GetJob = Callable[[str, str], Awaitable[Job]]


async def starting_weights(account_id: str, spec: JobSpec, *, find_model: GetJob,
                           get_job: GetJob) -> StartingWeights | None:
    """Where ``spec`` starts from, or None for its base model's own weights.

    Args:
        find_model: the job whose model (or checkpoint model) an ``ft:…`` id is, as the
            account may train from it (:meth:`FineTunedModels.usable`; raises
            :class:`NotFound`).
        get_job: the account's job by id (raises :class:`NotFound`).

    Raises:
        InvalidRequest: no such model or checkpoint of the account (``param`` ``model``
            or ``from_checkpoint``), or a ``model`` that is not the checkpoint's.
    """
    if spec.from_checkpoint is not None:
        return await _from_checkpoint(account_id, spec, spec.from_checkpoint, get_job)
    ref = parse_model_id(spec.model)
    if ref is None:
        return None
    missing = InvalidRequest(f"no model {spec.model!r}", param="model")
    try:
        source = await find_model(account_id, spec.model)
    except NotFound:
        raise missing from None
    found = (Path(source.fine_tuned_model or "") if ref.step is None
             else await trio.to_thread.run_sync(checkpoint_dir, source, ref.step))
    if found is None:  # pruned since
        raise missing
    path = found
    return StartingWeights(source=spec.model, base_model=source.base_model,
                           base_revision=source.model_revision, path=str(path),
                           kind=await _kind(path))


async def _from_checkpoint(account_id: str, spec: JobSpec, name: str,
                           get_job: GetJob) -> StartingWeights:
    found = _CHECKPOINT.match(name)
    if found is None:
        raise InvalidRequest(f"from_checkpoint must be a checkpoint id ({CHECKPOINT_ID_PREFIX}…) "
                             f"or ft-…:STEP, got {name!r}", param="from_checkpoint")
    job_id = "ft-" + (found["hex"] or found["job"])
    step = int(found["step"] or found["at"])
    missing = InvalidRequest(f"no checkpoint {name!r} (a job keeps its newest three)",
                             param="from_checkpoint")
    try:
        source = await get_job(account_id, job_id)
    except NotFound:
        raise missing from None
    path = await trio.to_thread.run_sync(checkpoint_dir, source, step)
    if path is None:
        raise missing
    if spec.model not in (source.base_model, model_id(source)):
        raise InvalidRequest(f"checkpoint {name} is of {source.base_model}: model must be "
                             f"{source.base_model}", param="model")
    return StartingWeights(source=name, base_model=source.base_model,
                           base_revision=source.model_revision, path=str(path),
                           kind=await _kind(path))


async def _kind(path: Path) -> Literal["adapter", "full"]:
    adapter = await trio.to_thread.run_sync((path / "adapter_config.json").is_file)
    return "adapter" if adapter else "full"
