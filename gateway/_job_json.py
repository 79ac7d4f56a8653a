"""A job's JSON answer as bytes, rendered once per state of the job.

``GET /v1/fine_tuning/jobs/{id}`` is what clients poll. Building the job's
view (:func:`alallo.runtime.views.job_view`: some forty values, two time
ranges with their texts, the spec's parts dumped by pydantic) and encoding
it took more server CPU than the rest of the request's own work
(docs/performance.md, "API requests"). A :class:`~alallo.Job` is frozen:
every change is a new object. So every value but the clock ones
(:data:`~alallo.runtime.views.JOB_CLOCK_KEYS`: ``time_left`` and
``estimated_finish`` move with ``now``) is encoded once per job object and
kept, as the text between the clock values; each answer encodes only those
(:func:`~alallo.runtime.views.job_clock_view`) and joins. The bytes are
exactly what ``JSONResponse(job_view(job, now=now))`` writes (Starlette's
``json.dumps`` options: no spaces, ``ensure_ascii=False``, ``allow_nan=False``),
so the answer does not change, only its cost.

The entries are bounded (:data:`JOB_JSON_SIZE`, least recently used first).
A job read from the store on every request (one this process does not own)
is a new object each time: it is rendered whole and replaces its entry.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from starlette.responses import Response

from alallo import Job
from alallo.runtime import views

__all__ = ["JOB_JSON_SIZE", "JobJson"]

JOB_JSON_SIZE = 20_000
"""Jobs whose rendered JSON is kept at most (as many as the runtime keeps live jobs)."""

_CLOCK_KEYS = frozenset(views.JOB_CLOCK_KEYS)


# The options of starlette.responses.JSONResponse.render (the same bytes), in one encoder:
# json.dumps with options builds a new one per call.
_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, indent=None,
                          separators=(",", ":")).encode


class _Rendered:
    """One job object's JSON around its clock values: ``pieces[0] clock[0] pieces[1] ...``."""

    __slots__ = ("holes", "job", "pieces")

    def __init__(self, job: Job, view: dict[str, Any]) -> None:
        self.job = job
        texts: list[str] = ["{"]
        self.holes: list[str] = []
        run: dict[str, Any] = {}
        comma = ""  # before every member but the first
        for key, value in view.items():
            if key in _CLOCK_KEYS:
                if run:
                    texts[-1] += comma + _dumps(run)[1:-1]
                    run, comma = {}, ","
                texts[-1] += comma + _dumps(key) + ":"
                self.holes.append(key)
                texts.append("")
                comma = ","
            else:
                run[key] = value
        if run:
            texts[-1] += comma + _dumps(run)[1:-1]
        texts[-1] += "}"
        self.pieces = [text.encode() for text in texts]

    def join(self, clock: dict[str, Any]) -> bytes:
        pieces = self.pieces
        out = [pieces[0]]
        for i, key in enumerate(self.holes, 1):
            out.append(_dumps(clock[key]).encode())
            out.append(pieces[i])
        return b"".join(out)


class JobJson:
    """Job -> its API JSON (bytes), kept per job object until the job changes.

    Args:
        size: jobs kept at most; the least recently used go first.
    """

    def __init__(self, *, size: int = JOB_JSON_SIZE) -> None:
        self.size = size
        self._entries: OrderedDict[str, _Rendered] = OrderedDict()

    def render(self, job: Job, *, now: float) -> bytes:
        """``job_view(job, now=now)`` as ``JSONResponse`` encodes it.

        Raises:
            ValueError: a value JSON cannot hold (NaN), as ``JSONResponse`` would.
        """
        entry = self._entries.get(job.id)
        if entry is not None and entry.job is job:
            self._entries.move_to_end(job.id)
            return entry.join(views.job_clock_view(job, now=now))
        view: dict[str, Any] = dict(views.job_view(job, now=now))
        entry = _Rendered(job, view)
        self._entries[job.id] = entry
        self._entries.move_to_end(job.id)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return entry.join(view)

    def response(self, job: Job, *, now: float) -> Response:
        """The job's answer: 200, ``application/json``, the bytes of :meth:`render`."""
        return Response(self.render(job, now=now), media_type="application/json")

    def __len__(self) -> int:
        return len(self._entries)
