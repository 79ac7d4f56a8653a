"""The ids of trained models and of checkpoint models, as OpenAI writes them (issue 32).

- A job's model: ``ft:BASE:ACCOUNT:SUFFIX:JOB`` (:func:`model_id`), OpenAI's five fields
  (``ft:gpt-4o-mini-2024-07-18:org:suffix:abc123``; SUFFIX is empty when the job had none,
  ``ft:BASE:ACCOUNT::JOB``, as OpenAI writes it).
- A checkpoint of it: ``ft:BASE:ACCOUNT:SUFFIX:JOB:ckpt-step-N`` (:func:`checkpoint_model_id`),
  N the optimizer step it was saved at.

BASE is the base model's name with ``/`` written ``--`` (as the Hugging Face cache writes it),
so that every id is one segment of a URL path; JOB is the job id's hex (``ft-`` left out).
Ids made before issue 32 had four fields, ``ft:BASE:ACCOUNT[-SUFFIX]:JOB``
(:func:`legacy_model_id`): they keep naming the same model (:func:`parse_model_id` reads
both), and every answer writes the five-field id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..jobs import Job

__all__ = ["CHECKPOINT_STEP_PREFIX", "ModelRef", "checkpoint_model_id", "legacy_model_id",
           "model_id", "parse_model_id"]

CHECKPOINT_STEP_PREFIX = "ckpt-step-"
"""The last field of a checkpoint model's id, before the step (OpenAI's)."""
_HEX = re.compile(r"^[0-9a-f]+$")
_STEP = re.compile(rf"^{CHECKPOINT_STEP_PREFIX}([0-9]{{1,18}})$")


@dataclass(frozen=True)
class ModelRef:
    """What an ``ft:…`` id names: a job's model, or one of the job's checkpoints."""

    job_id: str
    """The job that trained it (``ft-…``)."""
    step: int | None
    """The checkpoint's step; None for the job's model itself."""


def model_id(job: Job) -> str:
    """The id of the model ``job`` trained: ``ft:BASE:ACCOUNT:SUFFIX:JOB``."""
    suffix = job.spec.suffix or ""
    return f"ft:{_base(job)}:{job.account_id}:{suffix}:{job.id.removeprefix('ft-')}"


def legacy_model_id(job: Job) -> str:
    """The four-field id earlier versions gave the job's model, ``ft:BASE:ACCOUNT[-SUFFIX]:JOB``
    (still accepted wherever a model id is)."""
    suffix = job.spec.suffix
    owner = job.account_id + (f"-{suffix}" if suffix else "")
    return f"ft:{_base(job)}:{owner}:{job.id.removeprefix('ft-')}"


def checkpoint_model_id(job: Job, step: int) -> str:
    """The id of ``job``'s checkpoint at ``step``: ``ft:BASE:ACCOUNT:SUFFIX:JOB:ckpt-step-N``."""
    return f"{model_id(job)}:{CHECKPOINT_STEP_PREFIX}{step}"


def parse_model_id(name: str) -> ModelRef | None:
    """The job (and checkpoint step) an ``ft:…`` id names, or None for any other name.

    Reads the five-field id, the checkpoint id (six fields) and the four-field id of
    earlier versions. Only the shape is checked: whether the rest of the id matches the
    job (its base, account, suffix) is for the caller, who has the job.
    """
    fields = name.split(":")
    if fields[0] != "ft" or len(fields) not in (4, 5, 6):
        return None
    step: int | None = None
    if len(fields) == 6:
        found = _STEP.match(fields[5])
        if found is None:
            return None
        step = int(found[1])
        fields = fields[:5]
    if not _HEX.match(fields[-1]):
        return None
    return ModelRef(job_id="ft-" + fields[-1], step=step)


def _base(job: Job) -> str:
    return job.base_model.replace("/", "--")
