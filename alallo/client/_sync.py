"""The blocking client, :class:`Client` (:mod:`alallo.client` says how both clients are built)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Unpack, cast

import httpx
from httpx_sse import ServerSentEvent, SSEError, connect_sse

from alallo._types import FileId, JobId, Seq
from alallo.client import _base as base
from alallo.client._base import (
    CHECKPOINTS_PAGE_SIZE,
    DEFAULT_TIMEOUT_S,
    EVENTS_PAGE_SIZE,
    FILES_PAGE_SIZE,
    LOG_PAGE_SIZE,
    JobSpecFields,
    StreamItem,
)
from alallo._errors import ClientError
from alallo.api import (
    Capacity,
    Checkpoint,
    CheckpointList,
    Estimate,
    FileDeleted,
    FileList,
    FileObject,
    FineTuningJob,
    Health,
    JobEvent,
    JobEventList,
    JobList,
    LogPage,
    ModelList,
    NodeDrain,
    TrainerList,
    TrainingLogLine,
)

__all__ = ["Client"]

class Client:
    """A connection to one alallo server, on behalf of one account (blocking calls).

    Use it as a context manager, or call :meth:`close`::

        with Client() as client:
            job = client.create_job(model="alallo/tiny-gpt2", training_file=file_id)
            for item in client.watch(job["id"]):
                print(item.kind, item.data)

    Results are typed (:class:`~alallo.FineTuningJob`, :class:`~alallo.FileObject`,
    :class:`~alallo.Page` of them...) but are plain dicts at runtime.
    :class:`AsyncClient` has the same methods, to ``await``.

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:8000`` (a trailing
            ``/v1`` is accepted). Defaults to ``ALALLO_URL``, then
            :data:`DEFAULT_URL`.
        api_key: The account's key. Defaults to ``ALALLO_API_KEY``, then the
            file ``api-key`` that ``alallo serve`` writes in its data directory
            (``ALALLO_DATA_DIR``, default ``./.alallo``). A missing key is
            reported by the first call that needs one, so :meth:`healthz`
            works without it and a key written after construction is found.
        timeout: Seconds to wait for a connection or an answer. Streams
            accept up to ``STREAM_READ_TIMEOUT_S`` (60 s) of silence instead.
        transport: An HTTPX transport, e.g. ``httpx.MockTransport`` in tests.

    Attributes:
        base_url: The server this client talks to, without a trailing ``/v1``.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base.base_url_of(base_url)
        self._data_dir = base.data_dir()
        self._api_key = api_key or base.find_api_key(self._data_dir)
        self._timeout = timeout
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections; the client cannot be used afterwards."""
        self._http.close()

    # -- files ---------------------------------------------------------------

    def upload_file(
        self, path: str | os.PathLike[str], *, purpose: str = "fine-tune"
    ) -> FileObject:
        """Upload a JSONL training file; the server checks every line.

        Returns:
            The :class:`~alallo.FileObject` (a plain dict): ``id``, ``filename``,
            ``line_count``, ``format``, ...

        Raises:
            ApiError: 422 naming the first bad line (``line 7: ...``), 413 if too big.
            ClientError: The local file cannot be read, or the server is unreachable.
        """
        path = Path(path)
        try:
            data = path.open("rb")
        except OSError as exc:
            raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from exc
        with data:  # streamed: a file may be far larger than memory should hold
            files = {"file": (path.name, data, "application/jsonl")}
            answer = self._request("POST", "/v1/files", files=files, data={"purpose": purpose})
            return cast(FileObject, answer)

    def list_files(self, *, limit: int | None = None, after: FileId | None = None) -> FileList:
        """One page of the account's files, newest first, as a list object (``data``,
        ``has_more``); ``after`` is the last file id seen. Without ``limit``, the
        server's page (up to 10,000)."""
        params = base.page(limit, after) if limit is not None else (
            {"after": after} if after is not None else {})
        return cast(FileList, self._request("GET", "/v1/files", params=params))

    def iter_files(self, *, page_size: int = FILES_PAGE_SIZE) -> Iterator[FileObject]:
        """Every file of the account, newest first, fetching page after page."""
        return base.paginate(
            lambda after: self.list_files(limit=page_size, after=after),
            lambda item: str(item["id"]))

    def get_file(self, file_id: FileId) -> FileObject:
        """One file object. Raises :class:`ApiError` 404 if the account has no such file."""
        return cast(FileObject, self._request("GET", f"/v1/files/{file_id}"))

    def delete_file(self, file_id: FileId) -> FileDeleted:
        """Delete a file. Raises :class:`ApiError` 409 while a live job uses it."""
        return cast(FileDeleted, self._request("DELETE", f"/v1/files/{file_id}"))

    # -- models, capacity and estimates ----------------------------------------

    def list_models(self) -> ModelList:
        """The model catalogue: ``id``, ``parameters``, ``adapters``, ``runnable_here``, ..."""
        return cast(ModelList, self._request("GET", "/v1/models"))

    def list_trainers(self) -> TrainerList:
        """The trainers a job may name: ``name``, ``description``, ``built_in``."""
        return cast(TrainerList, self._request("GET", "/v1/trainers"))

    def capacity(self) -> Capacity:
        """The capacity pool: ``nodes`` (devices, free, busy by job), ``queue_length``, ``queue``."""
        return cast(Capacity, self._request("GET", "/v1/capacity"))

    def drain_node(self, node: str, *, on: bool = True) -> NodeDrain:
        """Drain a node (operator): its jobs move, no new ones land there; ``on=False`` undoes it."""
        action = "drain" if on else "undrain"
        return cast(NodeDrain, self._request("POST", f"/v1/capacity/nodes/{node}/{action}"))

    def estimate(self, **spec: Unpack[JobSpecFields]) -> Estimate:
        """Estimate time and price of a job without creating it.

        Args:
            **spec: The job spec (:class:`JobSpecFields`), as for :meth:`create_job`.

        Returns:
            An :class:`~alallo.Estimate` (a plain dict): ``available`` and ``reason``,
            ``time`` (``text`` like ``"40 min to 1.3 h"``), ``price``, ``capacity_free``
            and ``note``, ``plan``, ``allowed_to_proceed``.
        """
        return cast(Estimate, self._request("POST", "/v1/fine_tuning/estimates",
                                            json=base.clean_spec(spec)))

    # -- jobs ------------------------------------------------------------------

    def create_job(self, **spec: Unpack[JobSpecFields]) -> FineTuningJob:
        """Create a fine-tuning job; it starts ``queued`` with the message ``Starting``.

        Args:
            **spec: The job spec (:class:`JobSpecFields`); ``model`` and ``training_file``
                are required, everything else has a server default.

        Returns:
            The job, a :class:`~alallo.FineTuningJob` (a plain dict).

        Raises:
            ApiError: 422 with ``param`` naming a bad field, 402 if the balance
                cannot cover the job, 404 for an unknown file.
        """
        return cast(FineTuningJob, self._request("POST", "/v1/fine_tuning/jobs",
                                                 json=base.clean_spec(spec)))

    def get_job(self, job_id: JobId) -> FineTuningJob:
        """The job object: status, message, progress, time left, price, ..."""
        return cast(FineTuningJob, self._request("GET", f"/v1/fine_tuning/jobs/{job_id}"))

    def list_jobs(self, *, limit: int = 20, after: JobId | None = None) -> JobList:
        """One page of the account's jobs, newest first; ``after`` is the last id seen."""
        return cast(JobList, self._request("GET", "/v1/fine_tuning/jobs",
                                           params=base.page(limit, after)))

    def iter_jobs(self, *, page_size: int = 100) -> Iterator[FineTuningJob]:
        """Every job of the account, newest first, fetching page after page."""
        return base.paginate(
            lambda after: self.list_jobs(limit=page_size, after=after),
            lambda item: str(item["id"]))

    def cancel_job(self, job_id: JobId) -> FineTuningJob:
        """Cancel a job; returns it ``cancelling`` (or already ``cancelled``).

        Raises:
            ApiError: 409 if the job has finished; the message says so.
        """
        return cast(FineTuningJob, self._request("POST", f"/v1/fine_tuning/jobs/{job_id}/cancel"))

    def list_events(
        self, job_id: JobId, *, after: Seq | None = None, limit: int = EVENTS_PAGE_SIZE
    ) -> JobEventList:
        """One page of a job's events, oldest first; ``after`` is the last event's ``seq``."""
        return cast(JobEventList, self._request(
            "GET", f"/v1/fine_tuning/jobs/{job_id}/events", params=base.page(limit, after)
        ))

    def iter_events(self, job_id: JobId) -> Iterator[JobEvent]:
        """All of a job's events, oldest first, fetching page after page."""
        return base.paginate(
            lambda after: self.list_events(job_id, after=after),
            lambda item: int(item["seq"]))

    def list_checkpoints(
        self, job_id: JobId, *, after: str | None = None, limit: int = CHECKPOINTS_PAGE_SIZE
    ) -> CheckpointList:
        """One page of a job's saved checkpoints, newest first.

        ``after`` is the ``id`` (``ftckpt-…``) of the last checkpoint seen. Each
        holds ``step_number``, ``fine_tuned_model_checkpoint`` (where it was
        saved) and ``metrics`` (``step``, ``train_loss``). A job that saved
        none has an empty list.
        """
        return cast(CheckpointList, self._request(
            "GET", f"/v1/fine_tuning/jobs/{job_id}/checkpoints", params=base.page(limit, after)
        ))

    def iter_checkpoints(
        self, job_id: JobId, *, page_size: int = CHECKPOINTS_PAGE_SIZE
    ) -> Iterator[Checkpoint]:
        """Every checkpoint a job saved, newest first, fetching page after page."""
        return base.paginate(
            lambda after: self.list_checkpoints(job_id, after=after, limit=page_size),
            lambda item: str(item["id"]))

    def read_log(
        self, job_id: JobId, *, after: int | None = None, limit: int = LOG_PAGE_SIZE
    ) -> LogPage:
        """One page of the training log: ``data`` holds ``{"n", "at", "text"}`` lines.

        ``after`` is the ``n`` of the last line seen (a line's ``n`` is its place
        in the job's sequence, shared with events). A job that has not started
        training has an empty log.
        """
        return cast(LogPage, self._request(
            "GET", f"/v1/fine_tuning/jobs/{job_id}/log", params=base.page(limit, after)
        ))

    def iter_log(self, job_id: JobId) -> Iterator[TrainingLogLine]:
        """Every line of the training log so far, oldest first."""
        return base.paginate(
            lambda after: self.read_log(job_id, after=after),
            lambda item: int(item["n"]))

    def watch(self, job_id: JobId, *, last_event_id: Seq | None = None) -> Iterator[StreamItem]:
        """Follow a job live, reconnecting by itself: every change of the job, event and log line.

        Reads ``GET /v1/fine_tuning/jobs/{id}/stream`` (Server-Sent Events). When
        the connection drops, or the body ends before the job reached a final
        status (the server's ``done`` frame), it reconnects with
        ``Last-Event-ID`` set to the last item seen, so nothing is missed or
        repeated. If the body ends cleanly and the job turns out to be final
        already (a resume after its last item), the job object is yielded once
        more and the stream ends. Between attempts it waits 0.5 s (or the
        server's ``retry:``), doubling up to 5 s, and gives up after 10
        failures in a row (``alallo.client._base._Follow`` has the rules).

        Args:
            job_id: The job to follow.
            last_event_id: Resume after this sequence number; None starts from
                what the server sends first.

        Yields:
            :class:`StreamItem` in sequence order; kinds other than ``job``,
            ``event`` and ``log`` pass through unchanged.

        Raises:
            ApiError: The server refused the stream (404 for an unknown job).
            ClientError: The server stayed unreachable through every attempt.
        """
        follow = base._Follow(self.base_url, job_id, last_event_id)
        while True:
            cause: Exception | None = None
            try:
                for sse in self._open_stream(job_id, follow.last):
                    item = follow.take(sse)
                    if follow.ended:
                        break
                    if item is not None:
                        yield item
            except httpx.TransportError as exc:
                cause = follow.lost(exc)
            if follow.final:  # the final job object is the last item the server sends
                return
            if cause is None:
                # A clean end before the final job object: when resuming past
                # it, the server has nothing left to send; look instead.
                job = self._final_job_or_none(job_id)
                if job is not None:
                    yield follow.closing_item(job)
                    return
            time.sleep(follow.wait_s(cause))

    def _final_job_or_none(self, job_id: JobId) -> FineTuningJob | None:
        try:
            job = self.get_job(job_id)
        except ClientError:
            return None
        return job if base.is_final(job) else None

    # -- operations --------------------------------------------------------------

    def dashboard_link(self) -> str:
        """A one-time URL that signs a browser in to the dashboard as this client's account.

        It works once, within 10 minutes; the browser then keeps a session cookie.
        """
        return self.base_url + str(self._request("POST", "/v1/dashboard/links")["path"])

    def healthz(self) -> Health:
        """The server's health answer; needs no API key."""
        return cast(Health, self._request("GET", "/healthz", auth=False))

    # -- plumbing ----------------------------------------------------------------

    def _headers(self, auth: bool) -> dict[str, str]:
        if not auth:
            return {}
        if self._api_key is None:
            self._api_key = base.find_api_key(self._data_dir)
        if self._api_key is None:
            raise base.missing_key(self._data_dir)
        return {"Authorization": f"Bearer {self._api_key}"}

    def _request(self, method: str, path: str, *, auth: bool = True, **kwargs: Any) -> Any:
        # The answer's JSON object (a dict); Any because each public method names its shape.
        headers = self._headers(auth)
        try:
            response = self._http.request(method, path, headers=headers, **kwargs)
        except httpx.TransportError as exc:
            raise base.transport_error(self.base_url, exc) from exc
        return base.json_body(response, method, path)

    def _open_stream(self, job_id: JobId, last: Seq | None) -> Iterator[ServerSentEvent]:
        headers = self._headers(True)
        if last is not None:
            headers["Last-Event-ID"] = str(last)
        path = f"/v1/fine_tuning/jobs/{job_id}/stream"
        with connect_sse(self._http, "GET", path, headers=headers,
                         timeout=base.stream_timeout(self._timeout)) as source:
            if source.response.is_error:
                source.response.read()
                base.raise_for_status(source.response)
            if source.response.status_code == 204:  # resumed past the end of a finished job
                return
            try:
                yield from source.iter_sse()
            except SSEError as exc:
                raise ClientError(f"{path} did not answer an event stream: {exc}") from exc
