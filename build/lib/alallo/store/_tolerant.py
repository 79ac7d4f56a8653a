"""Reading stored rows that no longer validate, without losing the rest of the account.

The job spec tightens over time (a W&B integration without ``api_key`` was
once accepted and is refused now), so a row written by an older alallo may
fail today's models. Such a row must never make an account's list, stream,
job, events or log unreadable (issue 14): :func:`read_job` repairs the
row's data by dropping what does not validate — the list element that holds
it (an integration), else the field itself (its default applies) — logs the
repair once per job and process, and returns the job with what can be read.
An event or log line that does not validate is left out (:func:`read_item`).

The repair is made where the row is read, not in a migration: it covers
every future tightening too, and the job's actor writes the repaired state
back at its next change. Only a row nothing can be salvaged from (its id or
status gone, or its JSON cut short by a disk or a hand) is left out altogether,
and said so in the log: one job's bad row never stops a reader, nor a server's
start (issue 14).
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import structlog
from pydantic import BaseModel, ValidationError

from ..jobs import Job

__all__ = ["UnreadableRow", "read_item", "read_job"]

MAX_REPAIRS = 20
"""Fields dropped from one row at most before it counts as unreadable."""

M = TypeVar("M", bound=BaseModel)
_ID = re.compile(r'"id"\s*:\s*"([^"]+)"')
"""The job's id in a row too broken to parse (its first field)."""
log = structlog.get_logger("alallo.store")
_reported: set[tuple[str, str]] = set()


class UnreadableRow(ValueError):
    """A stored job row that no repair makes valid (``job_id`` may be None)."""

    def __init__(self, job_id: str | None, error: ValueError) -> None:
        super().__init__(f"stored job {job_id or '?'} cannot be read: {error}")
        self.job_id = job_id


def read_job(state: str | bytes) -> Job:
    """The job of a stored state (JSON), repaired if it no longer validates.

    Raises:
        UnreadableRow: nothing valid could be made of it.
    """
    try:
        return Job.model_validate_json(state)
    except ValidationError as exc:
        first = exc
    try:
        data = json.loads(state)
    except ValueError as exc:  # not JSON at all: cut short
        found = _ID.search(state if isinstance(state, str) else state.decode(errors="replace"))
        cut_id = found.group(1) if found else None
        _once(str(cut_id), "unreadable", error=f"not JSON: {exc}")
        raise UnreadableRow(cut_id, exc) from None
    job_id = data.get("id") if isinstance(data, dict) else None
    dropped: list[str] = []
    for _ in range(MAX_REPAIRS):
        try:
            job = Job.model_validate(data)
        except ValidationError as exc:
            where = _drop(data, exc.errors()[0]["loc"])
            if where is None:
                break
            dropped.append(where)
            continue
        _once(job.id, "repaired", dropped=dropped, error=_short(first))
        return job
    _once(str(job_id), "unreadable", error=_short(first))
    raise UnreadableRow(job_id if isinstance(job_id, str) else None, first)


def read_item(model: type[M], data: dict[str, Any], *, job_id: str) -> M | None:
    """A stored event or log line, or None (logged once) when it no longer validates."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        _once(job_id, f"{model.__name__.lower()}_skipped", seq=data.get("seq", data.get("n")),
              error=_short(exc))
        return None


def _drop(data: Any, loc: tuple[int | str, ...]) -> str | None:
    """Remove what an error points at: the innermost list element on its path, else the
    innermost field of the path that the row has (for a missing field, the object that
    lacks it; for a union member's error, the union's field). Returns the dotted path
    removed, or None when the row has nothing on that path to remove."""
    path: list[tuple[Any, int | str]] = []  # (container, key) along the loc, as far as it goes
    node = data
    for key in loc:
        present = ((isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node))
                   or (isinstance(node, dict) and key in node))
        if not present:
            break  # a union member's tag, or the missing field itself
        path.append((node, key))
        node = node[key]
    if not path:
        return None
    lists = [i for i, (container, _) in enumerate(path) if isinstance(container, list)]
    cut = lists[-1] if lists else len(path) - 1
    container, key = path[cut]
    del container[key]
    return ".".join(str(k) for _, k in path[:cut + 1])


def _short(error: ValidationError) -> str:
    first = error.errors()[0]
    return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"


def _once(job_id: str, what: str, **fields: Any) -> None:
    if (job_id, what) in _reported:
        return
    _reported.add((job_id, what))
    log.warning(f"store.row_{what}", job_id=job_id, **fields)
