"""``GET /openapi.json``: OpenAPI 3.1, generated from the shapes of :mod:`alallo.api`.

Schemas come from pydantic's JSON Schema (:meth:`pydantic.TypeAdapter.json_schemas`,
whose 2020-12 dialect is OpenAPI 3.1's): the request body of a job is
:class:`alallo.JobSpec` itself, the answers are the TypedDicts of
:mod:`alallo.api`, the same the server builds (:mod:`alallo.runtime._views`) and the
clients return. What is not a model (paths, parameters, statuses)
is the table :data:`OPERATIONS`, one row per route of :data:`gateway.app.ROUTES`;
a test checks that the two agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import TypeAdapter
from starlette.requests import Request
from starlette.responses import JSONResponse

from alallo import JobSpec, api
from alallo.runtime import ChatRequest, TextRequest

__all__ = ["OPERATIONS", "Operation", "openapi_document", "openapi_json"]


@dataclass(frozen=True)
class Operation:
    """One documented route: what it takes and what it answers."""

    method: str
    path: str
    summary: str
    answer: type | str | None
    """A shape of :mod:`alallo.api` (JSON), a media type (``text/event-stream``, ``text/html``...), or None (204)."""
    body: type | str | None = None
    """A pydantic model (JSON body) or ``multipart/form-data``."""
    query: tuple[tuple[str, str], ...] = ()
    """``(name, JSON type)`` of the query parameters."""
    errors: tuple[int, ...] = (401, 404, 422)
    auth: bool = True
    extra: dict[int, str] = field(default_factory=dict)
    """Other success statuses and what they mean (e.g. 204 on a finished stream)."""
    streams: bool = False
    """The answer may also be ``text/event-stream`` (the body's ``stream: true``)."""


_PAGE = (("limit", "integer"), ("after", "string"))
_RESUME = (("lastEventID", "integer"), ("after", "integer"), ("access_token", "string"))

OPERATIONS: tuple[Operation, ...] = (
    Operation("get", "/", "The dashboard (Jobs tab)", "text/html", auth=False, errors=()),
    Operation("get", "/jobs/{job_id}", "The dashboard (a job's page)", "text/html",
              auth=False, errors=(),
              extra={404: "No such job in the caller's account (another account's included): "
                          "the page says 'Job not found'."}),
    Operation("get", "/signin/{token}", "Sign in to the dashboard with a one-time link",
              "text/html", auth=False, errors=(401,),
              extra={303: "Signed in: the session cookie is set; go to the Jobs tab."}),
    Operation("post", "/signout", "Sign out of the dashboard: end the cookie's session",
              "text/html", auth=False, errors=(),
              extra={303: "Signed out: the session has ended and its cookie is cleared."}),
    Operation("post", "/v1/dashboard/links", "A one-time sign-in link for the dashboard",
              api.DashboardLink, errors=(401,)),
    Operation("get", "/healthz", "Health", api.Health, auth=False, errors=()),
    Operation("get", "/metrics", "Prometheus metrics", "text/plain", auth=False, errors=()),
    Operation("get", "/openapi.json", "This document", "application/json", auth=False,
              errors=()),
    Operation("post", "/v1/files", "Upload a JSONL training file", api.FileObject,
              body="multipart/form-data", errors=(400, 401, 413, 422)),
    Operation("get", "/v1/files", "The account's files, newest first", api.FileList,
              query=_PAGE, errors=(401, 422)),
    Operation("get", "/v1/files/{file_id}", "A file", api.FileObject, errors=(401, 404)),
    Operation("delete", "/v1/files/{file_id}", "Delete a file", api.FileDeleted,
              errors=(401, 404, 409)),
    Operation("get", "/v1/files/{file_id}/content", "A file's bytes", "application/jsonl",
              errors=(401, 404)),
    Operation("post", "/v1/chat/completions",
              "A fine-tuned or base model's answer to a conversation (OpenAI's shape)",
              api.ChatCompletion, body=ChatRequest, streams=True,
              errors=(400, 401, 403, 404, 413, 422, 503)),
    Operation("post", "/v1/completions", "A fine-tuned or base model's continuation of a prompt",
              api.TextCompletion, body=TextRequest, streams=True,
              errors=(400, 401, 403, 404, 413, 422, 503)),
    Operation("get", "/v1/models", "The model catalogue, then the account's fine-tuned models",
              api.ModelList, errors=(401,)),
    Operation("get", "/v1/models/{model_id}/content",
              "A fine-tuned model as a tar.gz: the adapter, or merged into its base",
              "application/gzip", query=(("format", "string"),), errors=(401, 404, 422)),
    Operation("get", "/v1/models/{model_id}", "One of the account's fine-tuned models",
              api.Model, errors=(401, 404)),
    Operation("delete", "/v1/models/{model_id}", "Delete a fine-tuned model's files",
              api.ModelDeleted, errors=(401, 404)),
    Operation("get", "/v1/trainers", "The trainers a job may name", api.TrainerList,
              errors=(401,)),
    Operation("get", "/v1/capacity", "Nodes, devices, free and busy, and the queue",
              api.Capacity, errors=(401,)),
    Operation("post", "/v1/capacity/nodes/{node}/drain",
              "Drain a node: move its jobs (from their checkpoints), place no more (operator)",
              api.NodeDrain, errors=(401, 403, 404)),
    Operation("post", "/v1/capacity/nodes/{node}/undrain", "Place jobs on a node again (operator)",
              api.NodeDrain, errors=(401, 403, 404)),
    Operation("post", "/v1/fine_tuning/estimates", "Estimate time and price", api.Estimate,
              body=JobSpec, errors=(400, 401, 413, 422)),
    Operation("post", "/v1/fine_tuning/jobs", "Create a job", api.FineTuningJob, body=JobSpec,
              errors=(400, 401, 402, 413, 422)),
    Operation("get", "/v1/fine_tuning/jobs", "The account's jobs, newest first", api.JobList,
              query=_PAGE, errors=(401, 422)),
    Operation("get", "/v1/fine_tuning/stream", "Every job of the account, live (SSE)",
              "text/event-stream", query=_RESUME, errors=(401, 422)),
    Operation("get", "/v1/fine_tuning/jobs/{job_id}", "A job", api.FineTuningJob,
              errors=(401, 404)),
    Operation("post", "/v1/fine_tuning/jobs/{job_id}/cancel", "Cancel a job", api.FineTuningJob,
              errors=(401, 404, 409)),
    Operation("get", "/v1/fine_tuning/jobs/{job_id}/events", "A job's events, oldest first",
              api.JobEventList, query=_PAGE),
    Operation("get", "/v1/fine_tuning/jobs/{job_id}/checkpoints",
              "A job's saved checkpoints, newest first", api.CheckpointList, query=_PAGE),
    Operation("get", "/v1/fine_tuning/jobs/{job_id}/log", "A job's training log", api.LogPage,
              query=(("after", "integer"), ("limit", "integer"), ("attempt", "integer"))),
    Operation("get", "/v1/fine_tuning/jobs/{job_id}/metrics",
              "A job's metrics series, one row per step past after (a step)", api.MetricsList,
              query=(("after", "integer"), ("limit", "integer"))),
    Operation("get", "/v1/fine_tuning/jobs/{job_id}/stream", "A job, live (SSE)",
              "text/event-stream", query=_RESUME,
              extra={204: "The job is finished and everything up to Last-Event-ID was sent."}),
)
"""Every HTTP route (the WebSocket ``/v1/ws`` is outside OpenAPI; see docs/api.md)."""


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the API."""
    shapes = {op.answer for op in OPERATIONS if isinstance(op.answer, type)}
    shapes |= {op.body for op in OPERATIONS if isinstance(op.body, type)}
    shapes.add(api.ErrorBody)
    refs, defs = TypeAdapter.json_schemas(
        [(shape, _mode(shape), TypeAdapter(shape))
         for shape in sorted(shapes, key=lambda shape: shape.__name__)],
        ref_template="#/components/schemas/{model}")

    def ref(shape: type) -> dict[str, Any]:
        return refs[(shape, _mode(shape))]

    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method] = _operation(op, ref)
    return {
        "openapi": "3.1.0",
        "info": {"title": "alallo", "version": "1",
                 "description": "Fine-tuning jobs, watched live. See docs/api.md."},
        "paths": paths,
        "components": {
            "schemas": dict(defs.get("$defs", {})),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _mode(shape: type) -> Literal["validation", "serialization"]:
    """A request body is described as pydantic validates it; an answer as it is sent."""
    return "validation" if shape in (JobSpec, ChatRequest, TextRequest) else "serialization"


def _operation(op: Operation, ref: Any) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    if isinstance(op.answer, type):
        content = {"application/json": {"schema": ref(op.answer)}}
        if op.streams:
            content["text/event-stream"] = {"schema": {"type": "string"}}
    else:
        content = {str(op.answer): {"schema": {"type": "string"}}}
    responses["200"] = {"description": "OK", "content": content}
    for status, text in op.extra.items():
        responses[str(status)] = {"description": text}
    for status in op.errors:
        responses[str(status)] = {"description": "Error",
                                  "content": {"application/json":
                                              {"schema": ref(api.ErrorBody)}}}
    parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                  for name in re.findall(r"{(\w+)}", op.path)]
    parameters += [{"name": name, "in": "query", "required": False, "schema": {"type": kind}}
                   for name, kind in op.query]
    operation: dict[str, Any] = {
        "summary": op.summary,
        "operationId": f"{op.method}_{op.path}".strip("/").replace("/", "_")
                       .replace("{", "").replace("}", "") or op.method,
        "parameters": parameters,
        "responses": responses,
    }
    if op.auth:
        operation["security"] = [{"bearer": []}]
    if isinstance(op.body, type):
        operation["requestBody"] = {"required": True, "content": {
            "application/json": {"schema": ref(op.body)}}}
    elif op.body == "multipart/form-data":
        operation["requestBody"] = {"required": True, "content": {"multipart/form-data": {
            "schema": {"type": "object", "required": ["file"], "properties": {
                "file": {"type": "string", "contentMediaType": "application/octet-stream"},
                "purpose": {"type": "string", "enum": ["fine-tune"]}}}}}}
    return operation


async def openapi_json(request: Request) -> JSONResponse:
    """``GET /openapi.json``: the document of :func:`openapi_document`."""
    document = getattr(request.app.state, "openapi", None)
    if document is None:
        document = request.app.state.openapi = openapi_document()
    return JSONResponse(document)
