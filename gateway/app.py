"""The Starlette application: the HTTP face of a :class:`alallo.Runtime`."""

from __future__ import annotations

import trio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from alallo import Runtime

from . import _account, _completions, _files, _graders, _jobs, _models, _permissions, _together
from ._cors import CORS
from ._errors import EXCEPTION_HANDLERS
from ._job_json import JobJson
from ._limits import MAX_JSON_BODY_BYTES, MULTIPART_OVERHEAD_BYTES, BodyLimit
from ._metrics import Metrics, metrics
from ._openapi import openapi_json
from ._pages import STATIC, dashboard, job_page
from ._query import QueryOnce
from ._request_log import RequestLog
from ._sessions import Sessions
from ._signin import SignIn, create_link, sign_in, sign_out
from ._sse import account_stream, job_stream
from ._ws import websocket_stream

__all__ = ["ROUTES", "build_app", "cors"]


async def healthz(request: Request) -> JSONResponse:
    """``GET /healthz`` → ``{"status": "ok"}`` while the server can answer."""
    return JSONResponse({"status": "ok"})


ROUTES = [
    # Starlette tries the routes in this order, a regular expression each: the one that
    # clients poll comes first (behind 28 others, the misses were about an eighth of its
    # time in the app; docs/performance.md, "API requests"). No two routes match the same
    # path, so the order decides nothing else (a model's id may hold a "/", alallo/tiny-gpt2:
    # {model_id:model} takes it, and leaves .../content to its own route).
    Route("/v1/fine_tuning/jobs/{job_id}", _jobs.get_job, methods=["GET"]),
    Route("/", dashboard),
    Route("/jobs/{job_id}", job_page),
    Mount("/static", StaticFiles(directory=STATIC, follow_symlink=False), name="static"),
    Route("/signin/{token}", sign_in, methods=["GET"]),
    Route("/signout", sign_out, methods=["POST"]),
    Route("/v1/dashboard/links", create_link, methods=["POST"]),
    Route("/healthz", healthz),
    Route("/metrics", metrics, methods=["GET"]),
    Route("/openapi.json", openapi_json, methods=["GET"]),
    Route("/v1/files", _files.create_file, methods=["POST"]),
    Route("/v1/files", _files.list_files, methods=["GET"]),
    Route("/v1/files/{file_id}", _files.get_file, methods=["GET"]),
    Route("/v1/files/{file_id}", _files.delete_file, methods=["DELETE"]),
    Route("/v1/files/{file_id}/content", _files.file_content, methods=["GET"]),
    Route("/v1/chat/completions", _completions.chat_completions, methods=["POST"]),
    Route("/v1/completions", _completions.completions, methods=["POST"]),
    Route("/v1/models", _models.list_models, methods=["GET"]),
    Route("/v1/models/{model_id}/content", _models.model_content, methods=["GET"]),
    Route("/v1/models/{model_id:model}", _models.get_model, methods=["GET"]),
    Route("/v1/models/{model_id:model}", _models.delete_model, methods=["DELETE"]),
    Route("/v1/fine_tuning/checkpoints/{checkpoint}/permissions",
          _permissions.share_checkpoint, methods=["POST"]),
    Route("/v1/fine_tuning/checkpoints/{checkpoint}/permissions",
          _permissions.list_permissions, methods=["GET"]),
    Route("/v1/fine_tuning/checkpoints/{checkpoint}/permissions/{permission_id}",
          _permissions.delete_permission, methods=["DELETE"]),
    Route("/v1/fine_tuning/alpha/graders/validate", _graders.validate_grader, methods=["POST"]),
    Route("/v1/fine_tuning/alpha/graders/run", _graders.run_grader, methods=["POST"]),
    Route("/v1/trainers", _jobs.list_trainers, methods=["GET"]),
    Route("/v1/account", _account.get_account, methods=["GET"]),
    Route("/v1/capacity", _jobs.capacity, methods=["GET"]),
    Route("/v1/capacity/nodes/{node}/drain", _jobs.drain_node, methods=["POST"]),
    Route("/v1/capacity/nodes/{node}/undrain", _jobs.undrain_node, methods=["POST"]),
    Route("/v1/fine_tuning/estimates", _jobs.create_estimate, methods=["POST"]),
    Route("/v1/fine-tunes/estimate-price", _together.estimate_price, methods=["POST"]),
    Route("/v1/fine_tuning/jobs", _jobs.create_job, methods=["POST"]),
    Route("/v1/fine_tuning/jobs", _jobs.list_jobs, methods=["GET"]),
    Route("/v1/fine_tuning/stream", account_stream, methods=["GET"]),
    Route("/v1/fine_tuning/jobs/{job_id}/cancel", _jobs.cancel_job, methods=["POST"]),
    Route("/v1/fine_tuning/jobs/{job_id}/pause", _jobs.pause_job, methods=["POST"]),
    Route("/v1/fine_tuning/jobs/{job_id}/resume", _jobs.resume_job, methods=["POST"]),
    Route("/v1/fine_tuning/jobs/{job_id}/events", _jobs.job_events, methods=["GET"]),
    Route("/v1/fine_tuning/jobs/{job_id}/checkpoints", _jobs.job_checkpoints,
          methods=["GET"]),
    Route("/v1/fine_tuning/jobs/{job_id}/log", _jobs.job_log, methods=["GET"]),
    Route("/v1/fine_tuning/jobs/{job_id}/metrics", _jobs.job_metrics, methods=["GET"]),
    Route("/v1/fine_tuning/jobs/{job_id}/stream", job_stream, methods=["GET"]),
    WebSocketRoute("/v1/ws", websocket_stream),
]


CORS_HEADERS = ["Authorization", "Content-Type", "Last-Event-ID", "X-Request-ID"]
"""Request headers a page on another origin may send (preflight answers with these)."""
CORS_EXPOSED = ["Last-Event-ID", "X-Request-ID"]
"""Response headers such a page may read."""


def cors(origins: list[str]) -> Middleware:
    """Starlette's CORS middleware for ``Settings.cors_origins`` (preflight included; through
    :class:`gateway._cors.CORS`, quicker for requests that name no origin).

    Credentials are never allowed: a page elsewhere authenticates with
    ``Authorization: Bearer`` or ``?access_token=`` (``EventSource`` cannot set
    headers), and a browser never hands it the answer to a request that
    carried the dashboard's cookie (no ``Access-Control-Allow-Credentials``;
    the cookie is ``SameSite=Strict`` too). See the Fetch standard, "CORS
    protocol and credentials".
    """
    return Middleware(CORS, allow_origins=origins, allow_credentials=False,
                      allow_methods=["GET", "POST", "DELETE"], allow_headers=CORS_HEADERS,
                      expose_headers=CORS_EXPOSED, max_age=600)


def build_app(runtime: Runtime, *, sign_in: SignIn | None = None) -> Starlette:
    """The ASGI app serving ``runtime`` (which must be open while the app serves).

    ``app.state.stopping`` is a :class:`trio.Event`: set it to make open
    streams say goodbye and end (:func:`gateway.serve` sets it on shutdown).
    Request bodies over their limit answer 413 (:mod:`gateway._limits`), a repeated query
    parameter 422 (:mod:`gateway._query`), a method a path does not take 405 with ``Allow``
    (:func:`gateway._errors.allowed_methods`); each request
    gets an ``X-Request-ID`` and an access-log line (:mod:`gateway._request_log`).
    Pages on the origins of ``Settings.cors_origins`` may call it (:func:`cors`).
    ``sign_in`` holds the dashboard's one-time links (a fresh one if None);
    ``app.state.sessions`` the dashboard's sessions (:mod:`gateway._sessions`).
    """
    upload_limit = runtime.settings.max_upload_bytes + MULTIPART_OVERHEAD_BYTES

    def body_limit(scope: Scope) -> int:
        upload = scope["method"] == "POST" and scope["path"] == "/v1/files"
        return upload_limit if upload else MAX_JSON_BODY_BYTES

    app = Starlette(routes=ROUTES, exception_handlers=EXCEPTION_HANDLERS,
                    middleware=[Middleware(RequestLog),
                                cors(runtime.settings.cors_origins),
                                Middleware(BodyLimit, limit_for=body_limit),
                                Middleware(QueryOnce)])
    app.state.runtime = runtime
    app.state.stopping = trio.Event()
    app.state.metrics = Metrics(runtime)
    app.state.job_json = JobJson()
    app.state.sign_in = sign_in or SignIn()
    app.state.sessions = Sessions(runtime, max_age_s=runtime.settings.session_max_age_s)
    return app
