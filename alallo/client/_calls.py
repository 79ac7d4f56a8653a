"""Every call of API.md, described once, free of I/O: :class:`Calls`.

Each method returns the generator of steps (:mod:`alallo.client._steps`)
that makes one call: the request (method, path, query, body, key), what
the answer means (its result typed by :mod:`alallo.api`, or an error), the
pages of a list one after another, and ``watch``'s reconnections.
:class:`~alallo.client.Client` and :class:`~alallo.client.AsyncClient`
only run these steps, each with its own HTTPX client.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx
from httpx_sse import SSEError

from alallo._errors import ClientError
from alallo._keys import DEFAULT_DATA_DIR, read_key_file
from alallo._types import FileId, JobId, Seq
from alallo.api import (
    Account,
    Capacity,
    ChatCompletion,
    Checkpoint,
    CheckpointList,
    CheckpointPermissionDeleted,
    CheckpointPermissionList,
    Estimate,
    FileDeleted,
    FileList,
    FileObject,
    FineTuningJob,
    GraderRun,
    GraderValidated,
    Health,
    JobEvent,
    JobEventList,
    JobList,
    LogPage,
    MetricsList,
    Model,
    ModelDeleted,
    ModelList,
    NodeDrain,
    Page,
    TogetherPriceEstimate,
    TrainerList,
    TrainingLogLine,
)
from alallo.client._answers import (
    json_body,
    missing_key,
    raise_for_status,
    transport_error,
)
from alallo.client._spec import JobSpecFields, clean_spec
from alallo.client._steps import Connect, Feed, Give, NextFrame, Op, Send, Wait
from alallo.client._stream import STREAM_READ_TIMEOUT_S, Follow, StreamItem, is_final

__all__ = [
    "CHECKPOINTS_PAGE_SIZE",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_URL",
    "EVENTS_PAGE_SIZE",
    "FILES_PAGE_SIZE",
    "JOBS_PAGE_SIZE",
    "LOG_PAGE_SIZE",
    "METRICS_PAGE_SIZE",
    "Calls",
]

DEFAULT_URL = "http://127.0.0.1:8000"
"""Where the client looks for the server when neither an argument nor ``ALALLO_URL`` says."""
DEFAULT_TIMEOUT_S = 30.0
"""Seconds to wait for the server to connect, answer or accept a request body."""
EVENTS_PAGE_SIZE = 100
"""Events fetched per request by ``iter_events``."""
CHECKPOINTS_PAGE_SIZE = 100
"""Checkpoints fetched per request by ``iter_checkpoints``."""
FILES_PAGE_SIZE = 100
"""Files fetched per request by ``iter_files``."""
JOBS_PAGE_SIZE = 100
"""Jobs fetched per request by ``iter_jobs``."""
LOG_PAGE_SIZE = 1000
"""Log lines fetched per request by ``iter_log``."""
METRICS_PAGE_SIZE = 1000
"""Steps of the metrics series per request by ``list_metrics``."""

_Item = TypeVar("_Item")
_JOBS = "/v1/fine_tuning/jobs"
_PERMISSIONS = "/v1/fine_tuning/checkpoints"


class Calls:
    """The calls of one client: its server, its account's key, its timeout.

    Args:
        base_url: The server; defaults to ``ALALLO_URL``, then :data:`DEFAULT_URL`
            (a trailing ``/v1`` is dropped).
        api_key: The key; defaults to ``ALALLO_API_KEY``, then the file ``api-key``
            in ``ALALLO_DATA_DIR`` (default ``./.alallo``), looked up again by each
            call until found, so a key written after construction is found.
        timeout: Seconds to wait; a stream accepts :data:`STREAM_READ_TIMEOUT_S` of
            silence at least.
    """

    def __init__(self, base_url: str | None, api_key: str | None, timeout: float) -> None:
        url = (base_url or os.environ.get("ALALLO_URL") or DEFAULT_URL).rstrip("/")
        self.base_url = url.removesuffix("/v1")
        self._data_dir = Path(os.environ.get("ALALLO_DATA_DIR") or DEFAULT_DATA_DIR)
        self._api_key = api_key or self._found_key()
        self._stream_timeout = httpx.Timeout(timeout, read=max(timeout, STREAM_READ_TIMEOUT_S))

    # -- files ---------------------------------------------------------------

    def upload_file(self, path: str | os.PathLike[str], purpose: str,
                    expires_after_s: int | None = None) -> Op[FileObject]:
        path = Path(path)
        try:
            data = path.open("rb")
        except OSError as exc:
            raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from exc
        with data:  # streamed: a file may be far larger than memory should hold
            files = {"file": (path.name, data, "application/jsonl")}
            form = {"purpose": purpose} if expires_after_s is None else {  # as OpenAI's SDK
                "purpose": purpose, "expires_after[anchor]": "created_at",
                "expires_after[seconds]": str(expires_after_s)}
            answer: FileObject = yield from self._json("POST", "/v1/files", files=files,
                                                       data=form)
            return answer

    def list_files(self, limit: int | None, after: FileId | None, purpose: str | None = None,
                   order: str | None = None) -> Op[FileList]:
        params = {**_page(limit, after), **{name: value for name, value in (
            ("purpose", purpose), ("order", order)) if value is not None}}
        return self._json("GET", "/v1/files", params=params)

    def iter_files(self, page_size: int) -> Feed[FileObject]:
        return self._pages(lambda after: self.list_files(page_size, after),
                           lambda file: file["id"])

    def get_file(self, file_id: FileId) -> Op[FileObject]:
        return self._json("GET", f"/v1/files/{file_id}")

    def delete_file(self, file_id: FileId) -> Op[FileDeleted]:
        return self._json("DELETE", f"/v1/files/{file_id}")

    def file_content(self, file_id: FileId) -> Op[bytes]:
        path = f"/v1/files/{file_id}/content"
        try:
            response = yield Send("GET", path, self._headers(True), None, None, None, None)
        except httpx.TransportError as exc:
            raise transport_error(self.base_url, exc) from exc
        raise_for_status(response)
        return response.content

    # -- models, capacity and estimates ----------------------------------------

    def list_models(self) -> Op[ModelList]:
        return self._json("GET", "/v1/models")

    def delete_model(self, model: str) -> Op[ModelDeleted]:
        return self._json("DELETE", f"/v1/models/{model}")

    def get_model(self, model: str) -> Op[Model]:
        return self._json("GET", f"/v1/models/{model}")

    # -- checkpoint permissions -------------------------------------------------

    def share_checkpoint(self, checkpoint: str,
                         accounts: list[str]) -> Op[CheckpointPermissionList]:
        return self._json("POST", f"{_PERMISSIONS}/{checkpoint}/permissions",
                          json={"project_ids": list(accounts)})

    def list_checkpoint_permissions(self, checkpoint: str, account: str | None,
                                    after: str | None, limit: int | None, order: str | None,
                                    ) -> Op[CheckpointPermissionList]:
        params = {name: value for name, value in (
            ("project_id", account), ("after", after), ("limit", limit), ("order", order))
            if value is not None}
        return self._json("GET", f"{_PERMISSIONS}/{checkpoint}/permissions", params=params)

    def delete_checkpoint_permission(self, checkpoint: str, permission_id: str,
                                     ) -> Op[CheckpointPermissionDeleted]:
        return self._json("DELETE",
                          f"{_PERMISSIONS}/{checkpoint}/permissions/{permission_id}")

    def auth_headers(self) -> dict[str, str]:
        """The headers of an authenticated request (for a download read in chunks).

        Raises:
            Unauthorized: no API key was given or found.
        """
        return self._headers(True)

    def list_trainers(self) -> Op[TrainerList]:
        return self._json("GET", "/v1/trainers")

    def capacity(self) -> Op[Capacity]:
        return self._json("GET", "/v1/capacity")

    def drain_node(self, node: str, on: bool) -> Op[NodeDrain]:
        return self._json("POST", f"/v1/capacity/nodes/{node}/{'drain' if on else 'undrain'}")

    def estimate(self, spec: JobSpecFields) -> Op[Estimate]:
        return self._json("POST", "/v1/fine_tuning/estimates", json=clean_spec(spec))

    def together_estimate(self, request: dict[str, Any]) -> Op[TogetherPriceEstimate]:
        return self._json("POST", "/v1/fine-tunes/estimate-price", json=request)

    # -- jobs ------------------------------------------------------------------

    def create_job(self, spec: JobSpecFields) -> Op[FineTuningJob]:
        return self._json("POST", _JOBS, json=clean_spec(spec))

    def get_job(self, job_id: JobId) -> Op[FineTuningJob]:
        return self._json("GET", f"{_JOBS}/{job_id}")

    def list_jobs(self, limit: int, after: JobId | None,
                  metadata: dict[str, str] | None = None) -> Op[JobList]:
        # OpenAI's form of the filter: metadata[KEY]=VALUE
        return self._json("GET", _JOBS, params={**_page(limit, after), **{
            f"metadata[{key}]": value for key, value in (metadata or {}).items()}})

    def iter_jobs(self, page_size: int) -> Feed[FineTuningJob]:
        return self._pages(lambda after: self.list_jobs(page_size, after), lambda job: job["id"])

    def cancel_job(self, job_id: JobId) -> Op[FineTuningJob]:
        return self._json("POST", f"{_JOBS}/{job_id}/cancel")

    def pause_job(self, job_id: JobId) -> Op[FineTuningJob]:
        return self._json("POST", f"{_JOBS}/{job_id}/pause")

    def resume_job(self, job_id: JobId) -> Op[FineTuningJob]:
        return self._json("POST", f"{_JOBS}/{job_id}/resume")

    def list_events(self, job_id: JobId, after: Seq | None, limit: int) -> Op[JobEventList]:
        # alallo's order of a log: message events oldest first, after a seq (the server's
        # default is OpenAI's: messages and metrics, newest first, after an event id)
        return self._json("GET", f"{_JOBS}/{job_id}/events",
                          params={**_page(limit, after), "order": "asc", "type": "message"})

    def iter_events(self, job_id: JobId) -> Feed[JobEvent]:
        return self._pages(lambda after: self.list_events(job_id, after, EVENTS_PAGE_SIZE),
                           lambda event: event["seq"])

    def list_checkpoints(self, job_id: JobId, after: str | None,
                         limit: int) -> Op[CheckpointList]:
        return self._json("GET", f"{_JOBS}/{job_id}/checkpoints", params=_page(limit, after))

    def iter_checkpoints(self, job_id: JobId, page_size: int) -> Feed[Checkpoint]:
        return self._pages(lambda after: self.list_checkpoints(job_id, after, page_size),
                           lambda checkpoint: checkpoint["id"])

    def read_log(self, job_id: JobId, after: int | None, limit: int) -> Op[LogPage]:
        return self._json("GET", f"{_JOBS}/{job_id}/log", params=_page(limit, after))

    def list_metrics(self, job_id: JobId, after: int | None, limit: int) -> Op[MetricsList]:
        return self._json("GET", f"{_JOBS}/{job_id}/metrics", params=_page(limit, after))

    def iter_log(self, job_id: JobId) -> Feed[TrainingLogLine]:
        return self._pages(lambda after: self.read_log(job_id, after, LOG_PAGE_SIZE),
                           lambda line: line["n"])

    def watch(self, job_id: JobId, last_event_id: Seq | None) -> Feed[StreamItem]:
        """The rules are :class:`~alallo.client._stream.Follow`'s."""
        follow = Follow(self.base_url, job_id, last_event_id)
        path = f"{_JOBS}/{job_id}/stream"
        while True:
            cause: Exception | None = None
            try:
                response = yield Connect(path, self._stream_headers(follow.last),
                                         self._stream_timeout)
                raise_for_status(response)
                if response.status_code != 204:  # 204: resumed past the end of a finished job
                    while not follow.ended and (sse := (yield NextFrame())) is not None:
                        item = follow.take(sse)
                        if item is not None:
                            yield Give(item)
            except SSEError as exc:  # an httpx.TransportError, but the server's doing
                raise ClientError(f"{path} did not answer an event stream: {exc}") from exc
            except httpx.TransportError as exc:
                cause = follow.lost(exc)
            if follow.final:  # the final job object is the last item the server sends
                return
            if cause is None:
                # A clean end before the final job object: when resuming past it,
                # the server has nothing left to send; look instead.
                job = yield from self._final_job_or_none(job_id)
                if job is not None:
                    yield Give(follow.closing_item(job))
                    return
            yield Wait(follow.wait_s(cause))

    # -- the account ------------------------------------------------------------

    def account(self) -> Op[Account]:
        return self._json("GET", "/v1/account")

    # -- graders -----------------------------------------------------------------

    def validate_grader(self, grader: Mapping[str, Any]) -> Op[GraderValidated]:
        return self._json("POST", "/v1/fine_tuning/alpha/graders/validate",
                          json={"grader": grader})

    def run_grader(self, grader: Mapping[str, Any], model_sample: str,
                   item: Mapping[str, Any] | None) -> Op[GraderRun]:
        return self._json("POST", "/v1/fine_tuning/alpha/graders/run", json={
            "grader": grader, "model_sample": model_sample, "item": dict(item or {})})

    # -- operations --------------------------------------------------------------

    def dashboard_link(self) -> Op[str]:
        answer = yield from self._json("POST", "/v1/dashboard/links")
        return self.base_url + str(answer["path"])

    def chat_completion(self, model: str, messages: list[dict[str, str]],
                        params: Mapping[str, Any]) -> Op[ChatCompletion]:
        return self._json("POST", "/v1/chat/completions",
                          json={"model": model, "messages": messages, **params})

    def healthz(self) -> Op[Health]:
        return self._json("GET", "/healthz", auth=False)

    # -- plumbing ----------------------------------------------------------------

    def _found_key(self) -> str | None:
        return os.environ.get("ALALLO_API_KEY") or read_key_file(self._data_dir / "api-key")

    def _headers(self, auth: bool) -> dict[str, str]:
        if not auth:
            return {}
        if self._api_key is None:
            self._api_key = self._found_key()
        if self._api_key is None:
            raise missing_key(self._data_dir)
        return {"Authorization": f"Bearer {self._api_key}"}

    def _stream_headers(self, last: Seq | None) -> dict[str, str]:
        headers = {**self._headers(True), "Accept": "text/event-stream",
                   "Cache-Control": "no-store"}
        if last is not None:
            headers["Last-Event-ID"] = str(last)
        return headers

    def _json(self, method: str, path: str, *, auth: bool = True,
              params: Mapping[str, str | int] | None = None, json: Any = None,
              files: Any = None, data: Mapping[str, str] | None = None) -> Op[Any]:
        # The answer's JSON object; Any because each public call names its shape.
        request = Send(method, path, self._headers(auth), params, json, files, data)
        try:
            response = yield request
        except httpx.TransportError as exc:
            raise transport_error(self.base_url, exc) from exc
        return json_body(response, method, path)

    def _pages(self, fetch: Callable[[Any], Op[Page[_Item]]],
               cursor: Callable[[_Item], Any]) -> Feed[_Item]:
        # Every item of a list: fetch(after) is one page (after None for the first),
        # cursor(item) what the next starts after; a page without has_more is the last.
        after = None
        while True:
            page = yield from fetch(after)
            items = page["data"]
            for item in items:
                yield Give(item)
            if not page.get("has_more") or not items:
                return
            after = cursor(items[-1])

    def _final_job_or_none(self, job_id: JobId) -> Op[FineTuningJob | None]:
        try:
            job = yield from self.get_job(job_id)
        except ClientError:
            return None
        return job if is_final(job) else None


def _page(limit: int | None, after: str | int | None) -> dict[str, str | int]:
    return {name: value for name, value in (("limit", limit), ("after", after))
            if value is not None}
