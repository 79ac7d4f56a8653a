"""``GET /openapi.json``: OpenAPI 3.1, generated from the shapes of :mod:`alallo.api`.

Schemas come from pydantic's JSON Schema (:meth:`pydantic.TypeAdapter.json_schemas`,
whose 2020-12 dialect is OpenAPI 3.1's): the request body of a job is
:class:`alallo.JobSpec` itself, the answers are the TypedDicts of
:mod:`alallo.api`, the same the server builds (:mod:`alallo.runtime._views`) and the
clients return. What is not a model (paths, parameters, statuses)
is the table :data:`OPERATIONS`, one row per route of :data:`gateway.app.ROUTES`;
a test checks that the two agree.

The document says exactly what the server takes and answers: schemathesis, with every
check, finds nothing off it (``tests/gateway/test_openapi.py``; ``schemathesis.toml`` lists
the refusals no schema can state, such as a training file that does not exist). So each
query parameter carries its bounds, and ``allowEmptyValue`` where an empty value means
"not given"; the limits that are the server's settings (``inference_max_tokens``,
``max_steps_limit``) are written in from them (:func:`openapi_document`); and an event
stream's ``schema`` is that of one event, as the SSE parsers of OpenAPI tools read it
before OpenAPI 3.2 (:mod:`gateway._openapi_events`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import TypeAdapter
from starlette.requests import Request
from starlette.responses import JSONResponse

from alallo import JobSpec, Settings, api
from alallo.runtime import MAX_PERMISSIONS_PAGE, ShareRequest
from alallo.serving import ChatRequest, TextRequest
from alallo.runtime import TogetherEstimateRequest
from alallo.trainers.graders import GraderRunRequest, GraderValidateRequest

from ._files import MAX_FILES_PAGE, UPLOAD_FORM
from ._job_filters import METADATA_DOC, METADATA_SCHEMA
from ._jobs import MAX_PAGE
from ._openapi_events import EVENT_SHAPES, event_schema
from ._sessions import SESSION_COOKIE
from ._sse import MAX_RESUME_POINT

__all__ = ["OPERATIONS", "Operation", "Param", "openapi_document", "openapi_json"]


@dataclass(frozen=True)
class Param:
    """A query or header parameter: its JSON Schema and what it means."""

    name: str
    schema: dict[str, Any]
    description: str
    where: Literal["query", "header"] = "query"
    empty: bool = False
    """An empty value (``?limit=``) is taken as none given (``allowEmptyValue``)."""
    style: str | None = None
    """OpenAPI's serialization of an object, e.g. ``deepObject`` (``?metadata[k]=v``)."""


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
    params: tuple[Param, ...] = ()
    errors: tuple[int, ...] = (400, 401, 404)
    auth: bool = True
    extra: dict[int, str] = field(default_factory=dict)
    """Other success statuses and what they mean (e.g. 204 on a finished stream)."""
    streams: bool = False
    """The answer may also be ``text/event-stream`` (the body's ``stream: true``)."""
    events: str | None = None
    """The events of a ``text/event-stream`` answer: a key of :data:`EVENT_SHAPES`."""


def _integer(low: int, high: int, default: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "minimum": low, "maximum": high}
    return schema if default is None else {**schema, "default": default}


def _limit(high: int, default: int) -> Param:
    return Param("limit", _integer(1, high, default),
                 f"Items per page, 1 to {high}; {default} if not given.", empty=True)


def _after_id(what: str, refusal: str) -> Param:
    return Param("after", {"type": "string"},
                 f"The last {what} id of the previous page; {refusal}.", empty=True)


def _after_number(what: str) -> Param:
    return Param("after", _integer(0, 2**62, 0),
                 f"Only what comes after this {what}; 0 if not given.", empty=True)


def _decimals_up_to(top: int) -> str:
    """A pattern of the decimals from 0 to ``top`` as the server writes them (no sign, no
    leading zero): a header's schema is a string's, and its bound can only be a pattern."""
    text, branches = str(top), ["0"]
    if len(text) > 1:
        branches.append(f"[1-9][0-9]{{0,{len(text) - 2}}}")
    for i, digit in enumerate(text):
        low = 1 if i == 0 else 0
        if int(digit) > low:
            branches.append(f"{text[:i]}[{low}-{int(digit) - 1}][0-9]{{{len(text) - i - 1}}}")
    return "^(" + "|".join([*branches, text]) + ")$"


_RESUME_POINT = _integer(0, MAX_RESUME_POINT - 1)
_RESUME = (
    Param("Last-Event-ID", {"type": "string",
                            "pattern": f"^$|{_decimals_up_to(MAX_RESUME_POINT - 1)}"},
          "Where to resume: the id of the last event read (a browser's EventSource sends it "
          "when it reconnects), below 2**62; wins over the query's. Empty: none.",
          where="header"),
    Param("lastEventID", _RESUME_POINT, "Where to resume on a first connection (Mercure's "
          "name); wins over after.", empty=True),
    Param("after", _RESUME_POINT, "Where to resume on a first connection.", empty=True),
)
_EVENTS_AFTER = Param(
    "after", {"anyOf": [_integer(0, 2**62, 0),
                        {"type": "string", "pattern": "^ft-[0-9a-f]+-event-[0-9]+$"}]},
    "The last event id of the previous page (``<job id>-event-<seq>``, as the openai "
    "package pages) or its seq: newest first, the events before it; with order=asc, those "
    "after it. From the newest (the oldest) if not given.", empty=True)
_EVENTS_ORDER = Param(
    "order", {"type": "string", "enum": ["desc", "asc"]},
    "alallo's: desc (OpenAI's, the default) lists newest first; asc oldest first, as a log.",
    empty=True)
_EVENTS_TYPE = Param(
    "type", {"type": "string", "enum": ["message", "metrics"]},
    "alallo's: only message events (alallo_type says their kind) or only metrics events; "
    "both if not given.", empty=True)

_METADATA_FILTER = Param("metadata", METADATA_SCHEMA, METADATA_DOC, style="deepObject")

OPERATIONS: tuple[Operation, ...] = (
    Operation("get", "/", "The dashboard (Jobs tab)", "text/html", auth=False, errors=(400,)),
    Operation("get", "/jobs/{job_id}", "The dashboard (a job's page)", "text/html",
              auth=False, errors=(400,),
              extra={404: "No such job in the caller's account (another account's included): "
                          "the page says 'Job not found'."}),
    Operation("get", "/signin/{token}", "Sign in to the dashboard with a one-time link",
              "text/html", auth=False, errors=(400, 401),
              extra={303: "Signed in: the session cookie is set; go to the Jobs tab."}),
    Operation("post", "/signout", "Sign out of the dashboard: end the cookie's session",
              "text/html", auth=False, errors=(400,),
              extra={303: "Signed out: the session has ended and its cookie is cleared."}),
    Operation("post", "/v1/dashboard/links", "A one-time sign-in link for the dashboard",
              api.DashboardLink, errors=(400, 401)),
    Operation("get", "/healthz", "Health", api.Health, auth=False, errors=(400,)),
    Operation("get", "/metrics", "Prometheus metrics", "text/plain", auth=False, errors=(400,)),
    Operation("get", "/openapi.json", "This document", "application/json", auth=False,
              errors=(400,)),
    Operation("post", "/v1/files", "Upload a JSONL training file", api.FileObject,
              body="multipart/form-data", errors=(400, 401, 413)),
    Operation("get", "/v1/files", "The account's files that have not expired, newest first",
              api.FileList,
              params=(_limit(MAX_FILES_PAGE, MAX_FILES_PAGE),
                      _after_id("file", "one the account has no file of answers 400"),
                      Param("purpose", {"type": "string"}, "Only the files of this purpose.",
                            empty=True),
                      Param("order", {"enum": ["asc", "desc"], "default": "desc"},
                            "By creation: newest first (desc), oldest first (asc).", empty=True)),
              errors=(400, 401)),
    Operation("get", "/v1/files/{file_id}", "A file", api.FileObject),
    Operation("delete", "/v1/files/{file_id}", "Delete a file", api.FileDeleted,
              errors=(400, 401, 404, 409)),
    Operation("get", "/v1/files/{file_id}/content", "A file's bytes", "application/jsonl"),
    Operation("post", "/v1/chat/completions",
              "A fine-tuned or base model's answer to a conversation (OpenAI's shape)",
              api.ChatCompletion, body=ChatRequest, streams=True, events="chat",
              errors=(400, 401, 403, 404, 413, 503)),
    Operation("post", "/v1/completions", "A fine-tuned or base model's continuation of a prompt",
              api.TextCompletion, body=TextRequest, streams=True, events="text",
              errors=(400, 401, 403, 404, 413, 503)),
    Operation("get", "/v1/models", "The model catalogue, then the account's fine-tuned models",
              api.ModelList, errors=(400, 401)),
    Operation("get", "/v1/models/{model_id}/content",
              "A fine-tuned model as a tar.gz: the adapter, or merged into its base",
              "application/gzip",
              params=(Param("format", {"enum": ["adapter", "merged"], "default": "adapter"},
                            "adapter: the LoRA adapter's files; merged: the whole model, the "
                            "adapter merged into its base."),),
              extra={206: "The part a Range header asked for (RFC 9110)."},
              errors=(400, 401, 404, 416)),
    Operation("get", "/v1/models/{model_id:model}",
              "A model: of the catalogue (its id may hold a /), one of the account's "
              "fine-tuned models (ft:…) or checkpoint models (ft:…:ckpt-step-N)", api.Model),
    Operation("delete", "/v1/models/{model_id:model}",
              "Delete a fine-tuned or checkpoint model's files", api.ModelDeleted,
              errors=(400, 401, 404, 409)),
    Operation("post", "/v1/fine_tuning/checkpoints/{checkpoint}/permissions",
              "Share a checkpoint model with other accounts (OpenAI's project_ids)",
              api.CheckpointPermissionList, body=ShareRequest),
    Operation("get", "/v1/fine_tuning/checkpoints/{checkpoint}/permissions",
              "A checkpoint model's permissions", api.CheckpointPermissionList,
              params=(Param("project_id", {"type": "string"},
                            "Only the permission of this account.", empty=True),
                      _after_id("permission", "another string answers 400"),
                      _limit(MAX_PERMISSIONS_PAGE, 10),
                      Param("order", {"enum": ["ascending", "descending"],
                                      "default": "descending"},
                            "By creation: newest first (descending) or oldest first.",
                            empty=True))),
    Operation("delete", "/v1/fine_tuning/checkpoints/{checkpoint}/permissions/{permission_id}",
              "Revoke a permission: the account it names can no longer use the checkpoint",
              api.CheckpointPermissionDeleted),
    Operation("post", "/v1/fine_tuning/alpha/graders/validate", "Check a grader (OpenAI's)",
              api.GraderValidated, body=GraderValidateRequest, errors=(400, 401)),
    Operation("post", "/v1/fine_tuning/alpha/graders/run", "A grader's score of a sample, as "
              "a job's trainer would use it (OpenAI's)", api.GraderRun, body=GraderRunRequest,
              errors=(400, 401)),
    Operation("get", "/v1/trainers", "The trainers a job may name", api.TrainerList,
              errors=(400, 401)),
    Operation("get", "/v1/account",
              "The caller's account: balance, billing limit, what it may spend and has spent",
              api.Account, errors=(400, 401)),
    Operation("get", "/v1/capacity", "Nodes, devices, free and busy, and the queue",
              api.Capacity, errors=(400, 401)),
    Operation("post", "/v1/capacity/nodes/{node}/drain",
              "Drain a node: move its jobs (from their checkpoints), place no more (operator)",
              api.NodeDrain, errors=(400, 401, 403, 404)),
    Operation("post", "/v1/capacity/nodes/{node}/undrain", "Place jobs on a node again (operator)",
              api.NodeDrain, errors=(400, 401, 403, 404)),
    Operation("post", "/v1/fine_tuning/estimates", "Estimate time and price", api.Estimate,
              body=JobSpec, errors=(400, 401, 403, 413)),
    Operation("post", "/v1/fine-tunes/estimate-price",
              "Together's price estimate of a job, from alallo's", api.TogetherPriceEstimate,
              body=TogetherEstimateRequest, errors=(400, 401, 403, 413)),
    Operation("post", "/v1/fine_tuning/jobs", "Create a job", api.FineTuningJob, body=JobSpec,
              errors=(400, 401, 402, 403, 413)),
    Operation("get", "/v1/fine_tuning/jobs", "The account's jobs, newest first", api.JobList,
              params=(_limit(MAX_PAGE, 20),
                      _after_id("job", "from the first job if the account has no such job"),
                      _METADATA_FILTER),
              errors=(400, 401)),
    Operation("get", "/v1/fine_tuning/stream", "Every job of the account, live (SSE)",
              "text/event-stream", params=_RESUME, events="account", errors=(400, 401, 429)),
    Operation("get", "/v1/fine_tuning/jobs/{job_id}", "A job", api.FineTuningJob),
    Operation("post", "/v1/fine_tuning/jobs/{job_id}/cancel", "Cancel a job", api.FineTuningJob,
              errors=(400, 401, 404, 409)),
    Operation("post", "/v1/fine_tuning/jobs/{job_id}/pause",
              "Pause a job: it saves a checkpoint and frees its capacity", api.FineTuningJob,
              errors=(400, 401, 404, 409)),
    Operation("post", "/v1/fine_tuning/jobs/{job_id}/resume",
              "Resume a paused job from its checkpoint", api.FineTuningJob,
              errors=(400, 401, 404, 409)),
    Operation("get", "/v1/fine_tuning/jobs/{job_id}/events",
              "A job's events (messages and metrics), newest first", api.JobEventList,
              params=(_limit(MAX_PAGE, 20), _EVENTS_AFTER, _EVENTS_ORDER, _EVENTS_TYPE)),
    Operation("get", "/v1/fine_tuning/jobs/{job_id}/checkpoints",
              "A job's saved checkpoints, newest first", api.CheckpointList,
              params=(_limit(MAX_PAGE, 10),
                      _after_id("checkpoint", "another string answers 400"))),
    Operation("get", "/v1/fine_tuning/jobs/{job_id}/log", "A job's training log", api.LogPage,
              params=(_after_number("line's n"), _limit(10_000, 1000),
                      Param("attempt", _integer(0, 10_000, 0),
                            "The attempt whose lines to read; 0 (or not given): the current "
                            "one.", empty=True))),
    Operation("get", "/v1/fine_tuning/jobs/{job_id}/metrics",
              "A job's metrics series, one row per step past after (a step)", api.MetricsList,
              params=(_after_number("step"), _limit(10_000, 1000))),
    Operation("get", "/v1/fine_tuning/jobs/{job_id}/stream", "A job, live (SSE)",
              "text/event-stream", params=_RESUME, events="job", errors=(400, 401, 404, 429),
              extra={204: "The job is finished and everything up to Last-Event-ID was sent."}),
)
"""Every HTTP route (the WebSocket ``/v1/ws`` is outside OpenAPI; see docs/api.md).

Every route may answer 400 to a query parameter given twice (:mod:`gateway._query`), and
every one that reads the database 503 when it cannot (``store_unavailable``)."""

_REQUEST_BODIES = (JobSpec, ChatRequest, TextRequest, ShareRequest, TogetherEstimateRequest)
_CONVERTOR = re.compile(r"{(\w+)(?::\w+)?}")
"""A path parameter, with Starlette's convertor if any (``{model_id:model}``): the document
names the parameter alone."""


def openapi_document(settings: Settings | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the API; with ``settings``, the limits that are the
    server's (``inference_max_tokens``, ``max_steps_limit``) written in."""
    shapes = {op.answer for op in OPERATIONS if isinstance(op.answer, type)}
    shapes |= {op.body for op in OPERATIONS if isinstance(op.body, type)}
    shapes |= {shape for kinds in EVENT_SHAPES.values() for shape in kinds.values()}
    shapes |= {api.ErrorBody, api.StreamError}
    refs, defs = TypeAdapter.json_schemas(
        [(shape, _mode(shape), TypeAdapter(shape))
         for shape in sorted(shapes, key=lambda shape: shape.__name__)],
        ref_template="#/components/schemas/{model}")
    schemas: dict[str, Any] = dict(defs.get("$defs", {}))
    if settings is not None:
        _server_limits(schemas, settings)

    def ref(shape: type) -> dict[str, Any]:
        return refs[(shape, _mode(shape))]

    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(_CONVERTOR.sub(r"{\1}", op.path), {})[op.method] = _operation(op, ref)
    return {
        "openapi": "3.1.0",
        "info": {"title": "alallo", "version": "1",
                 "description": "Fine-tuning jobs, watched live. See docs/api.md."},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "access_token": {"type": "apiKey", "in": "query", "name": "access_token",
                                 "description": "The API key, for an EventSource or a "
                                                "WebSocket, which cannot set headers."},
                "session": {"type": "apiKey", "in": "cookie", "name": SESSION_COOKIE,
                            "description": "The dashboard's session (see /signin)."},
            },
        },
    }


def _server_limits(schemas: dict[str, Any], settings: Settings) -> None:
    """Bounds that are this server's settings: a completion's tokens, a job's steps."""
    for name in ("ChatRequest", "TextRequest"):
        for key in ("max_tokens", "max_completion_tokens"):
            if key in schemas[name]["properties"]:
                schemas[name]["properties"][key]["anyOf"][0]["maximum"] = \
                    settings.inference_max_tokens
    schemas["Hyperparameters"]["properties"]["max_steps"]["anyOf"][0]["maximum"] = \
        settings.max_steps_limit


def _mode(shape: type) -> Literal["validation", "serialization"]:
    """A request body is described as pydantic validates it; an answer as it is sent."""
    return "validation" if shape in _REQUEST_BODIES else "serialization"


def _content(op: Operation, ref: Any) -> dict[str, Any]:
    if op.events is not None:
        events = {"schema": event_schema(op.events, ref)}
        if not isinstance(op.answer, type):
            return {"text/event-stream": events}
        return {"application/json": {"schema": ref(op.answer)}, "text/event-stream": events}
    if isinstance(op.answer, type):
        return {"application/json": {"schema": ref(op.answer)}}
    if op.answer == "application/json":  # this document
        return {"application/json": {"schema": {"type": "object"}}}
    return {str(op.answer): {"schema": {"type": "string"}}}


def _operation(op: Operation, ref: Any) -> dict[str, Any]:
    responses: dict[str, Any] = {"200": {"description": "OK", "content": _content(op, ref)}}
    for status, text in op.extra.items():
        responses[str(status)] = {"description": text}
    errors = (*op.errors, 503) if op.auth else op.errors
    for status in sorted(set(errors)):
        responses[str(status)] = {"description": "Error",
                                  "content": {"application/json":
                                              {"schema": ref(api.ErrorBody)}}}
    parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                  for name in _CONVERTOR.findall(op.path)]
    for param in op.params:
        parameters.append({"name": param.name, "in": param.where, "required": False,
                           "description": param.description, "schema": param.schema,
                           **({"allowEmptyValue": True} if param.empty else {}),
                           **({"style": param.style, "explode": True} if param.style else {})})
    path = _CONVERTOR.sub(r"{\1}", op.path)
    operation: dict[str, Any] = {
        "summary": op.summary,
        "operationId": f"{op.method}_{path}".strip("/").replace("/", "_")
                       .replace("{", "").replace("}", "") or op.method,
        "parameters": parameters,
        "responses": responses,
    }
    if op.auth:
        operation["security"] = [{"bearer": []}, {"access_token": []}, {"session": []}]
    if isinstance(op.body, type):
        operation["requestBody"] = {"required": True, "content": {
            "application/json": {"schema": ref(op.body)}}}
    elif op.body == "multipart/form-data":
        operation["requestBody"] = {"required": True, "content": {"multipart/form-data": {
            "schema": UPLOAD_FORM}}}
    return operation


async def openapi_json(request: Request) -> JSONResponse:
    """``GET /openapi.json``: the document of :func:`openapi_document`, with the server's
    limits."""
    document = getattr(request.app.state, "openapi", None)
    if document is None:
        document = request.app.state.openapi = openapi_document(
            request.app.state.runtime.settings)
    return JSONResponse(document)
