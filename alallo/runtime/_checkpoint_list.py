"""A job's saved checkpoints, newest first (``GET /v1/fine_tuning/jobs/{id}/checkpoints``).

The source is the job's ``CHECKPOINT_SAVE`` events: the state machine
writes one for every checkpoint the trainer reports (``_lifecycle``), with
the step. The rest is read from what the runtime already keeps:

- where a checkpoint is: the job's latest checkpoint has its exact path; the
  trainer protocol names every checkpoint ``checkpoint-<step>`` under its run's
  ``checkpoint_dir`` (docs/trainer-protocol.md), so an older one is that name
  in one of the job's runs (:func:`checkpoint_dir`). The server keeps the newest
  three, as OpenAI does: the list holds only the checkpoints still on disk, each a model
  (``ft:…:ckpt-step-N``, :mod:`alallo.runtime._checkpoint_models`).
- its metrics: the figures of the job's metrics series at that step (training loss
  and mean token accuracy, validation loss and accuracy where evaluated, the
  ``full_valid_*`` figures at the checkpoint that became the model). A trainer that
  reports no ``metrics`` lines (an older or the account's own) still gets a training
  loss: the one of the last ``Step <n>/<max>: loss <x>`` log line (the protocol's
  line for every reported loss) with ``n`` at or before the step; if the log has none,
  the job's latest loss when the job stands at that very step; else null.

The shape is OpenAI's ``fine_tuning.job.checkpoint`` list, so the ``openai``
package's ``client.fine_tuning.jobs.checkpoints.list(job_id)`` reads it.
Built from the runtime's public reads (``get_job``, ``list_events``,
``read_log``) and kept out of ``_runtime`` itself: a read-only view.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

import trio
from pydantic import BaseModel, ConfigDict

from .._errors import InvalidRequest
from .._status import EventType
from ..jobs import Event, Job, LogLine
from ._model_ids import checkpoint_model_id

__all__ = ["CHECKPOINT_FIGURES", "CHECKPOINT_ID_PREFIX", "JobCheckpoint", "JobReads", "checkpoint_dir", "checkpoint_id",
           "list_checkpoints"]


CHECKPOINT_ID_PREFIX = "ftckpt-"
CHECKPOINT_FIGURES = ("train_mean_token_accuracy", "valid_loss", "valid_mean_token_accuracy",
                      "full_valid_loss", "full_valid_mean_token_accuracy")
"""The figures of OpenAI's checkpoint ``metrics`` besides ``step`` and ``train_loss``."""
_PAGE = 1000
"""Events or log lines read per request to the runtime."""
_LOSS_LINE = re.compile(r"Step (\d+)/\d+: loss (\S+)")


def checkpoint_id(job_id: str, step: int) -> str:
    """The stable id of a job's checkpoint at ``step``: ``ftckpt-<job's hex>-<step>``."""
    return f"{CHECKPOINT_ID_PREFIX}{job_id.removeprefix('ft-')}-{step}"


class JobCheckpoint(BaseModel):
    """One checkpoint a job's trainer saved."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    """The job (``ft-…``)."""
    step: int
    """The optimizer step it was saved at."""
    created_at: int
    """Unix seconds when alallo heard of it."""
    path: str | None
    """The directory it was saved in (None only if the job never said where); the
    operator's, never in an answer."""
    model: str
    """The checkpoint model's id, ``ft:…:ckpt-step-N``."""
    train_loss: float | None
    """The training loss known at that step, or None."""
    figures: dict[str, float | None] = {}
    """:data:`CHECKPOINT_FIGURES` measured at that step (a figure not measured: absent)."""

    @property
    def id(self) -> str:
        """``ftckpt-…``, stable for the job and step (:func:`checkpoint_id`)."""
        return checkpoint_id(self.job_id, self.step)

class JobReads(Protocol):
    """The reads of a job the list is built from: :class:`~alallo.Runtime` has them."""

    async def get_job(self, account_id: str, job_id: str) -> Job: ...

    async def list_events(self, account_id: str, job_id: str, *, after: int = 0,
                          limit: int = 100) -> tuple[list[Event], bool]: ...

    async def read_log(self, account_id: str, job_id: str, *, after: int = 0,
                       limit: int = 1000, attempt: int | None = None,
                       ) -> tuple[list[LogLine], bool]: ...

    async def list_metrics(self, account_id: str, job_id: str, *, after: int = 0,
                           ) -> list[dict[str, float | int | None]]: ...


async def list_checkpoints(runtime: JobReads, account_id: str, job_id: str, *,
                           after: str | None = None, limit: int = 10,
                           ) -> tuple[list[JobCheckpoint], bool]:
    """A page of a job's checkpoints, newest (highest step) first; and whether more follow.

    Args:
        after: The id of the last checkpoint of the previous page
            (``ftckpt-…`` of this job); the page starts after it.
        limit: Checkpoints per page (the caller bounds it).

    Raises:
        NotFound: no such job in the account (404).
        InvalidRequest: ``after`` is not a checkpoint id of this job (422, ``param="after"``).
    """
    job = await runtime.get_job(account_id, job_id)
    before_step = _step_of(job_id, after) if after else None
    saved = await _saved_steps(runtime, account_id, job_id)
    steps = sorted((s for s in saved if before_step is None or s < before_step), reverse=True)
    kept = await trio.to_thread.run_sync(
        lambda: {s: path for s in steps if (path := checkpoint_dir(job, s)) is not None})
    steps = [s for s in steps if s in kept]  # only those still on disk
    page, more = steps[:limit], len(steps) > limit
    if not page:
        return [], more
    rows = {int(row["step"] or 0): row for row in await runtime.list_metrics(account_id, job_id)}
    losses = {step: float(loss) for step, row in rows.items()
              if (loss := row.get("train_loss")) is not None}
    if not losses:  # a trainer that reports no metrics lines: its log lines say the loss
        losses = await _losses(runtime, account_id, job, up_to=max(page))
    return [JobCheckpoint(
        job_id=job_id, step=s, created_at=saved[s], path=str(kept[s]),
        model=checkpoint_model_id(job, s),
        train_loss=_loss_at(job, losses, s),
        figures={name: float(value) for name in CHECKPOINT_FIGURES
                 if (value := rows.get(s, {}).get(name)) is not None}) for s in page], more


def _step_of(job_id: str, after: str) -> int:
    prefix = checkpoint_id(job_id, 0)[:-1]
    step = after.removeprefix(prefix)
    if not after.startswith(prefix) or not (step.isascii() and step.isdigit()) \
            or len(step) > 18:  # "²" is a digit to isdigit(), not to int(): a 500 it was
        raise InvalidRequest(f"after must be a checkpoint id of {job_id} ({prefix}<step>), "
                             f"got {after!r}", param="after")
    return int(step)


async def _saved_steps(runtime: JobReads, account_id: str, job_id: str) -> dict[int, int]:
    """``{step: created_at}`` of every ``CHECKPOINT_SAVE`` (a step saved again: the latest)."""
    saved: dict[int, int] = {}
    seq, more = 0, True
    while more:
        events, more = await runtime.list_events(account_id, job_id, after=seq, limit=_PAGE)
        for event in events:
            if event.type is EventType.CHECKPOINT_SAVE and event.step is not None:
                saved[event.step] = event.created_at
        seq = events[-1].seq if events else seq
        more = more and bool(events)
    return saved


async def _losses(runtime: JobReads, account_id: str, job: Job, *, up_to: int) -> dict[int, float]:
    """``{step: loss}`` from the log lines of every attempt, steps up to ``up_to`` only."""
    losses: dict[int, float] = {}
    for attempt in range(1, job.attempt + 1):
        seq, more = 0, True
        while more:
            lines, more = await runtime.read_log(account_id, job.id, after=seq, limit=_PAGE,
                                                 attempt=attempt)
            for line in lines:
                found = _LOSS_LINE.fullmatch(line.text.strip())
                if found and int(found[1]) <= up_to:
                    try:
                        losses[int(found[1])] = float(found[2])
                    except ValueError:
                        continue  # not a number: a trainer's own line that looks alike
            seq = lines[-1].n if lines else seq
            more = more and bool(lines)
    return losses


def _loss_at(job: Job, losses: dict[int, float], step: int) -> float | None:
    known = [s for s in losses if s <= step]
    if known:
        return losses[max(known)]
    return job.progress.loss if job.progress.step == step else None


def checkpoint_dir(job: Job, step: int) -> Path | None:
    """The directory of the job's checkpoint at ``step`` while it is kept, else None.

    The job's latest checkpoint is where it says; an older one is ``checkpoint-<step>``
    under the ``checkpoints`` folder of one of the job's runs (``attempt-N/``, or the job's
    own folder for jobs of earlier versions), which the server prunes to the newest three.
    """
    latest = job.checkpoint
    if latest is None:
        return None
    if latest.step == step:  # unless deleted (DELETE /v1/models/{its checkpoint model})
        return Path(latest.path) if Path(latest.path).is_dir() else None
    job_dir = next((p for p in Path(latest.path).parents if p.name == job.id), None)
    if job_dir is None:
        return None
    name = f"checkpoint-{step}"
    found = [*job_dir.glob(f"attempt-*/checkpoints/{name}"), job_dir / "checkpoints" / name]
    return next((p for p in sorted(found, reverse=True) if p.is_dir()), None)
