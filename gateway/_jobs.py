"""``/v1/fine_tuning/jobs``: create, list, get, cancel, events, checkpoints, log, metrics;
``/v1/capacity``."""

from __future__ import annotations

import time
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from alallo import LOCAL_ACCOUNT, InvalidRequest
from alallo.runtime import list_checkpoints, list_job_events, views

from ._auth import account_of, runtime_of
from ._body import json_object, query_int
from ._errors import Forbidden
from ._job_filters import metadata_filter
from ._job_json import JobJson

__all__ = [
    "cancel_job", "capacity", "create_estimate", "create_job", "drain_node", "get_job",
    "job_checkpoints", "job_events", "job_log", "job_metrics", "list_jobs", "list_trainers",
    "pause_job", "resume_job", "undrain_node",
]

MAX_PAGE = 1000
EventTypeName = Literal["message", "metrics"]


async def create_job(request: Request) -> JSONResponse:
    """``POST /v1/fine_tuning/jobs`` → the job, ``queued`` with message ``Starting``."""
    account = await account_of(request)
    body = await json_object(request)
    job = await runtime_of(request).create_job(account, body)
    return JSONResponse(views.job_view(job, now=time.time()))


async def create_estimate(request: Request) -> JSONResponse:
    """``POST /v1/fine_tuning/estimates`` with a job spec → time and price ranges."""
    account = await account_of(request)
    body = await json_object(request)
    return JSONResponse(await runtime_of(request).estimate(account, body))


async def list_jobs(request: Request) -> JSONResponse:
    """``GET /v1/fine_tuning/jobs?limit=&after=&metadata[KEY]=VALUE`` → newest first; only
    the jobs whose metadata holds each pair given (:mod:`gateway._job_filters`)."""
    account = await account_of(request)
    limit = query_int(request, "limit", 20, low=1, high=MAX_PAGE)
    jobs, more = await runtime_of(request).list_jobs(
        account, limit=limit, after=request.query_params.get("after") or None,
        metadata=metadata_filter(request))
    now = time.time()
    return JSONResponse(views.page([views.job_view(j, now=now) for j in jobs], more))


async def get_job(request: Request) -> Response:
    """``GET /v1/fine_tuning/jobs/{job_id}``: the bytes of :func:`views.job_view`, rendered
    once per state of the job (:mod:`gateway._job_json`)."""
    account = await account_of(request)
    job = await runtime_of(request).get_job(account, request.path_params["job_id"])
    job_json: JobJson = request.app.state.job_json
    return job_json.response(job, now=time.time())


async def cancel_job(request: Request) -> JSONResponse:
    """``POST /v1/fine_tuning/jobs/{job_id}/cancel``; 409 for a finished job."""
    account = await account_of(request)
    job = await runtime_of(request).cancel_job(account, request.path_params["job_id"])
    return JSONResponse(views.job_view(job, now=time.time()))


async def pause_job(request: Request) -> JSONResponse:
    """``POST /v1/fine_tuning/jobs/{job_id}/pause`` (OpenAI's ``jobs.pause``): the job
    ``paused`` once its trainer saved a checkpoint and stopped (``running``, ``Pausing: ...``
    if that takes longer than 30 s); 409 for a finished job or
    one being cancelled."""
    account = await account_of(request)
    job = await runtime_of(request).jobs.pause_job(account, request.path_params["job_id"])
    return JSONResponse(views.job_view(job, now=time.time()))


async def resume_job(request: Request) -> JSONResponse:
    """``POST /v1/fine_tuning/jobs/{job_id}/resume`` (OpenAI's ``jobs.resume``): the job
    ``queued`` again, to continue from its checkpoint; 409 for a job that is not paused."""
    account = await account_of(request)
    job = await runtime_of(request).jobs.resume_job(account, request.path_params["job_id"])
    return JSONResponse(views.job_view(job, now=time.time()))


async def job_events(request: Request) -> JSONResponse:
    """``GET /v1/fine_tuning/jobs/{job_id}/events?after=&limit=&order=&type=``: OpenAI's
    list, newest first, ``after`` an event id (:func:`alallo.runtime.list_job_events`);
    alallo's ``order=asc`` reads oldest first, ``type`` keeps ``message`` or ``metrics``."""
    account = await account_of(request)
    limit = query_int(request, "limit", 20, low=1, high=MAX_PAGE)
    events, more = await list_job_events(
        runtime_of(request), account, request.path_params["job_id"],
        after=request.query_params.get("after") or None, limit=limit,
        newest_first=_choice(request, "order", ("desc", "asc")) != "asc",
        types=_event_types(request))
    return JSONResponse(views.page(events, more))


def _event_types(request: Request) -> tuple[EventTypeName, ...]:
    wanted = _choice(request, "type", ("message", "metrics"))
    return ("message", "metrics") if wanted is None else (wanted,)


def _choice(request: Request, name: str, values: tuple[str, ...]) -> Any:
    """A query parameter that is one of ``values``; None when absent or empty.

    Raises:
        InvalidRequest: another value (422, ``param=name``).
    """
    raw = request.query_params.get(name) or None
    if raw is not None and raw not in values:
        raise InvalidRequest(f"{name} must be one of {', '.join(values)}, got {raw[:40]!r}",
                             param=name)
    return raw


async def job_checkpoints(request: Request) -> JSONResponse:
    """``GET /v1/fine_tuning/jobs/{job_id}/checkpoints?after=&limit=``, newest first.

    OpenAI's list shape (``first_id``, ``last_id``: the page's ends, null when
    empty); ``after`` is the last checkpoint id of the previous page.
    """
    account = await account_of(request)
    limit = query_int(request, "limit", 10, low=1, high=MAX_PAGE)
    checkpoints, more = await list_checkpoints(
        runtime_of(request), account, request.path_params["job_id"],
        after=request.query_params.get("after") or None, limit=limit)
    data = [views.checkpoint_view(c) for c in checkpoints]
    return JSONResponse({"object": "list", "data": data, "has_more": more,
                         "first_id": data[0]["id"] if data else None,
                         "last_id": data[-1]["id"] if data else None})


async def job_log(request: Request) -> JSONResponse:
    """``GET /v1/fine_tuning/jobs/{job_id}/log?after=&limit=&attempt=``."""
    account = await account_of(request)
    after = query_int(request, "after", 0, high=2**62)
    limit = query_int(request, "limit", 1000, low=1, high=10_000)
    attempt = query_int(request, "attempt", 0, high=10_000) or None
    lines, more = await runtime_of(request).read_log(
        account, request.path_params["job_id"], after=after, limit=limit, attempt=attempt)
    data = [views.log_line_view(line) for line in lines]
    return JSONResponse({"object": "list", "data": data, "lines": data, "has_more": more})


async def job_metrics(request: Request) -> JSONResponse:
    """``GET /v1/fine_tuning/jobs/{job_id}/metrics?after=&limit=``: the metrics series, one
    row per step past ``after`` (a step), in step order."""
    account = await account_of(request)
    after = query_int(request, "after", 0, high=2**62)
    limit = query_int(request, "limit", 1000, low=1, high=10_000)
    rows = await runtime_of(request).list_metrics(account, request.path_params["job_id"],
                                                  after=after)
    return JSONResponse(views.page([views.metrics_row_view(r) for r in rows[:limit]],
                                   len(rows) > limit))


async def capacity(request: Request) -> JSONResponse:
    """``GET /v1/capacity`` → nodes, devices, free and busy, and the queue.

    Other accounts' job ids are not shown: their devices count under
    ``busy["others"]`` and their place in line only in ``queue_length``.
    """
    account = await account_of(request)
    return JSONResponse(await runtime_of(request).capacity(account))


async def drain_node(request: Request) -> JSONResponse:
    """``POST /v1/capacity/nodes/{node}/drain`` (operator): move its jobs, place no more."""
    return await _set_drain(request, on=True)


async def undrain_node(request: Request) -> JSONResponse:
    """``POST /v1/capacity/nodes/{node}/undrain`` (operator): place jobs there again."""
    return await _set_drain(request, on=False)


async def _set_drain(request: Request, *, on: bool) -> JSONResponse:
    account = await account_of(request)
    if account != LOCAL_ACCOUNT:
        raise Forbidden("only the operator's account may drain nodes")
    runtime = runtime_of(request)
    moved = await runtime.drain_node(request.path_params["node"], on=on)
    return JSONResponse({"node": request.path_params["node"], "draining": on, "moved": moved})


async def list_trainers(request: Request) -> JSONResponse:
    """``GET /v1/trainers`` → the trainers a job may name, built-in ones first."""
    await account_of(request)
    trainers = runtime_of(request).list_trainers()
    return JSONResponse(views.page([views.trainer_view(t) for t in trainers], False))

