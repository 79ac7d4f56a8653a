"""A job's events as OpenAI lists them (``GET /v1/fine_tuning/jobs/{id}/events``).

OpenAI's list is newest first; ``after`` is the id of the last (oldest) event of the
previous page, and the next page goes on toward older events. Its events are of two
``type``\\ s: ``message`` (something happened to the job) and ``metrics`` (the figures of
one step, in ``data``). alallo keeps both as job items sharing the job's sequence
(DESIGN.md rule 4): the state machine's events (kind ``event``, their seed kind in the view's
``alallo_type``) and the trainer's metrics reports (kind ``metrics``, one per report:
:class:`~alallo.jobs.MetricsPoint`). So an event's id ``<job id>-event-<seq>`` is unique and
ordered across both, and a page is one query down the items' key
(:func:`alallo.store.item_page`).

alallo's own surfaces read the same list in the order of a log: ``order=asc`` pages
oldest first (``after`` then a seq or an event id: what comes after it), and ``type``
keeps one of the two (the Python clients and the CLI read ``type=message``, as the events
list they always showed). :meth:`alallo.Runtime.list_events` (domain events, oldest first)
and the streams' ``event`` items are unchanged. Kept out of ``_runtime``: a read-only view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from .. import api
from .._errors import InvalidRequest
from ..jobs import Event, Job, MetricsPoint
from ..store import Store, item_page, read_item
from ._views import event_view

__all__ = ["EVENT_TYPES", "EventReads", "event_cursor", "list_job_events", "metrics_event_view"]

EventTypeName = Literal["message", "metrics"]
EVENT_TYPES: tuple[EventTypeName, ...] = ("message", "metrics")
"""The ``type`` of OpenAI's events, in the order the query's ``type`` names them."""
_KINDS: dict[str, str] = {"message": "event", "metrics": "metrics"}
"""The job-item kind behind each ``type``."""
_MAX_SEQ_DIGITS = 18
_LOSSES = (("train_loss", "training loss"), ("valid_loss", "validation loss"),
           ("full_valid_loss", "full validation loss"), ("reward", "reward"),
           ("valid_reward", "validation reward"))
"""The figures a metrics event's message names, OpenAI's words for them."""


class EventReads(Protocol):
    """What the list is read from: :class:`~alallo.Runtime` has it."""

    store: Store

    async def get_job(self, account_id: str, job_id: str) -> Job: ...


def event_cursor(job_id: str, raw: str | None) -> int | None:
    """The seq an ``after`` names: an event id of this job (``<job id>-event-<seq>``, what
    the ``openai`` package sends) or a bare seq; None when absent or empty.

    Raises:
        InvalidRequest: anything else (422, ``param="after"``).
    """
    if not raw:
        return None
    prefix = f"{job_id}-event-"
    digits = raw.removeprefix(prefix)
    if not (digits.isascii() and digits.isdigit()) or len(digits) > _MAX_SEQ_DIGITS:
        raise InvalidRequest(f"after must be an event id of {job_id} ({prefix}<seq>) or a "
                             f"seq, got {raw[:80]!r}", param="after")
    return int(digits)


def metrics_event_view(point: MetricsPoint, job_id: str, total_steps: int) -> api.JobEvent:
    """A metrics report as OpenAI's ``metrics`` event: ``data`` holds ``step``,
    ``total_steps`` and every figure the report brought (``epoch`` too when known); the
    message is OpenAI's ``Step 10/100: training loss=1.23, validation loss=1.31``."""
    figures = point.figures()
    losses = [f"{words}={figures[name]:.2f}" for name, words in _LOSSES if name in figures]
    message = f"Step {point.step}/{total_steps}" + (": " + ", ".join(losses) if losses else "")
    data: dict[str, float | int] = {"step": point.step, "total_steps": total_steps, **figures}
    if point.epoch is not None:
        data["epoch"] = point.epoch
    if point.scores:
        data["scores"] = point.scores  # type: ignore[assignment]
    return {"id": f"{job_id}-event-{point.n}", "object": "fine_tuning.job.event",
            "created_at": int(point.at), "level": "info", "type": "metrics", "message": message,
            "data": data, "alallo_type": None, "seq": point.n, "hash": None, "step": point.step}


async def list_job_events(reads: EventReads, account_id: str, job_id: str, *,
                          after: str | None = None, limit: int = 20, newest_first: bool = True,
                          types: Sequence[EventTypeName] = EVENT_TYPES,
                          ) -> tuple[list[api.JobEvent], bool]:
    """A page of a job's events and whether more follow.

    Args:
        after: an event id (or seq, :func:`event_cursor`): newest first, the page holds
            the events before it; oldest first, those after it. None: from the newest
            (the oldest).
        limit: events per page (the caller bounds it).
        newest_first: OpenAI's order (the default); False: the order of a log.
        types: which of ``message`` and ``metrics`` to list.

    Raises:
        NotFound: no such job in the account (404).
        InvalidRequest: ``after`` is not an event id or seq (422, ``param="after"``).
    """
    job = await reads.get_job(account_id, job_id)
    cursor = event_cursor(job_id, after)
    rows = await item_page(reads.store, job_id, kinds=[_KINDS[t] for t in types],
                           cursor=cursor, limit=limit + 1, newest_first=newest_first)
    total = job.progress.max_steps or job.max_steps
    views: list[api.JobEvent] = []
    for kind, _, data in rows[:limit]:
        if kind == "event":
            if (event := read_item(Event, data, job_id=job_id)) is not None:
                views.append(event_view(event, job_id))
        elif (point := read_item(MetricsPoint, data, job_id=job_id)) is not None:
            views.append(metrics_event_view(point, job_id, total))
    return views, len(rows) > limit
