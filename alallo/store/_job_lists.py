"""An account's jobs, listed (a part of :class:`alallo._store.Store`): newest first, paged
by job id, and filtered by their ``metadata`` as OpenAI's ``GET /fine_tuning/jobs`` is
(``metadata[key]=value``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

import sqlalchemy as sa
from pydantic_core import to_json

from ..jobs import Job
from ._schema import jobs
from ._tolerant import UnreadableRow, read_job

__all__ = ["JobLists", "NULL_METADATA"]

T = TypeVar("T")

NULL_METADATA: Mapping[str, str] = {}
"""The ``metadata`` filter that selects the jobs created without metadata (OpenAI's
``metadata=null``); compared by identity, unlike an empty filter (which selects all)."""

_SCAN = 200
"""Candidate rows read per query while a metadata filter keeps few of them."""


def _matches(job: Job, metadata: Mapping[str, str] | None) -> bool:
    if metadata is None or (not metadata and metadata is not NULL_METADATA):
        return True
    if metadata is NULL_METADATA:
        return not job.spec.metadata
    held = job.spec.metadata or {}
    return all(held.get(key) == value for key, value in metadata.items())


class JobLists:
    """Listing jobs; :class:`~alallo._store.Store` has these methods (in a worker thread;
    ``StoreUnavailable`` when the database fails)."""

    if TYPE_CHECKING:
        async def _read(self, fn: Callable[[sa.Connection], T]) -> T: ...

    async def list_jobs(self, account_id: str, *, limit: int, after: str | None = None,
                        metadata: Mapping[str, str] | None = None) -> tuple[list[Job], bool]:
        """The account's jobs, newest first, after the job ``after``; and whether more follow.

        Newest means created last: jobs created in the same second keep their order.
        ``metadata``: only jobs whose metadata holds each of its pairs (None or empty: all;
        :data:`NULL_METADATA`: those without). The job's stored state is searched for each
        pair as its JSON spells it (``"key":"value"``), and each row found is checked on
        the job itself; the rows are read :data:`_SCAN` at a time until the page is full.
        """
        needles = [to_json({key: value}).decode()[1:-1] for key, value in
                   (metadata or {}).items()]

        def run(c: sa.Connection) -> tuple[list[Job], bool]:
            query = sa.select(jobs.c.number, jobs.c.state).where(jobs.c.account_id == account_id)
            for needle in needles:
                query = query.where(jobs.c.state.contains(needle, autoescape=True))
            if after is not None:
                anchor = c.execute(sa.select(jobs.c.number)
                                   .where(jobs.c.id == after)).scalar_one_or_none()
                if anchor is not None:
                    query = query.where(jobs.c.number < anchor)
            query = query.order_by(jobs.c.number.desc())
            found: list[Job] = []
            scan = limit + 1 if not needles and metadata is not NULL_METADATA else _SCAN
            while True:
                rows = c.execute(query.limit(scan)).all()
                for _number, state in rows:
                    try:
                        job = read_job(state)
                    except UnreadableRow:
                        continue
                    if _matches(job, metadata):
                        found.append(job)
                        if len(found) > limit:
                            return found[:limit], True
                if len(rows) < scan:
                    return found, False
                query = query.where(jobs.c.number < rows[-1][0])
        return await self._read(run)
