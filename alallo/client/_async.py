"""The async client: :class:`alallo.client.Client`'s methods, to ``await``, under Trio or asyncio."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from pathlib import Path
from types import TracebackType
from typing import Any, Unpack, cast

import anyio
import httpx
from httpx_sse import ServerSentEvent, SSEError, aconnect_sse

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

__all__ = ["AsyncClient"]

class AsyncClient:
    """A connection to one alallo server, on behalf of one account, for async code.

    The same methods as :class:`alallo.client.Client` (each documented
    there), as coroutines, with the same typed results (TypedDicts of
    :mod:`alallo.api`, plain dicts at runtime); the ``iter_*``
    methods and :meth:`watch` are async iterators. It runs on HTTPX's
    ``AsyncClient``, which runs on AnyIO, so it works under Trio and under
    asyncio alike::

        async with AsyncClient() as client:
            job = await client.create_job(model="alallo/tiny-gpt2", training_file=file_id)
            async for item in client.watch(job["id"]):
                print(item.kind, item.data)

    Leave an ``async for`` over :meth:`watch` early and its connection stays
    open until the iterator is collected; close it at once with
    ``contextlib.aclosing(client.watch(job_id))``.

    Args:
        base_url: As for :class:`~alallo.client.Client`.
        api_key: As for :class:`~alallo.client.Client`.
        timeout: As for :class:`~alallo.client.Client`.
        transport: An HTTPX async transport, e.g. ``httpx.MockTransport`` in tests.

    Attributes:
        base_url: The server this client talks to, without a trailing ``/v1``.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base.base_url_of(base_url)
        self._data_dir = base.data_dir()
        self._api_key = api_key or base.find_api_key(self._data_dir)
        self._timeout = timeout
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout,
                                       transport=transport)

    def __repr__(self) -> str:
        return f"AsyncClient({self.base_url!r})"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections; the client cannot be used afterwards."""
        await self._http.aclose()

    # -- files ---------------------------------------------------------------

    async def upload_file(
        self, path: str | os.PathLike[str], *, purpose: str = "fine-tune"
    ) -> FileObject:
        """Upload a JSONL training file (:meth:`Client.upload_file`).

        The file is streamed in 64 KiB reads (HTTPX reads upload files
        synchronously, a short block each), never held whole in memory.
        """
        path = Path(path)
        try:
            data = path.open("rb")
        except OSError as exc:
            raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from exc
        with data:
            files = {"file": (path.name, data, "application/jsonl")}
            return cast(FileObject, await self._request("POST", "/v1/files", files=files,
                                       data={"purpose": purpose}))

    async def list_files(self, *, limit: int | None = None,
                         after: FileId | None = None) -> FileList:
        """One page of the account's files, newest first (:meth:`Client.list_files`)."""
        params = base.page(limit, after) if limit is not None else (
            {"after": after} if after is not None else {})
        return cast(FileList, await self._request("GET", "/v1/files", params=params))

    def iter_files(
        self, *, page_size: int = FILES_PAGE_SIZE
    ) -> AsyncGenerator[FileObject, None]:
        """Every file of the account, newest first, page after page (:meth:`Client.iter_files`)."""
        return base.apaginate(
            lambda after: self.list_files(limit=page_size, after=after),
            lambda item: str(item["id"]))

    async def get_file(self, file_id: FileId) -> FileObject:
        """One file object (:meth:`Client.get_file`)."""
        return cast(FileObject, await self._request("GET", f"/v1/files/{file_id}"))

    async def delete_file(self, file_id: FileId) -> FileDeleted:
        """Delete a file (:meth:`Client.delete_file`)."""
        return cast(FileDeleted, await self._request("DELETE", f"/v1/files/{file_id}"))

    # -- models, capacity and estimates ----------------------------------------

    async def list_models(self) -> ModelList:
        """The model catalogue (:meth:`Client.list_models`)."""
        return cast(ModelList, await self._request("GET", "/v1/models"))

    async def list_trainers(self) -> TrainerList:
        """The trainers a job may name (:meth:`Client.list_trainers`)."""
        return cast(TrainerList, await self._request("GET", "/v1/trainers"))

    async def capacity(self) -> Capacity:
        """The capacity pool (:meth:`Client.capacity`)."""
        return cast(Capacity, await self._request("GET", "/v1/capacity"))

    async def drain_node(self, node: str, *, on: bool = True) -> NodeDrain:
        """Drain a node, or undo it (:meth:`Client.drain_node`)."""
        action = "drain" if on else "undrain"
        return cast(NodeDrain, await self._request("POST", f"/v1/capacity/nodes/{node}/{action}"))

    async def estimate(self, **spec: Unpack[JobSpecFields]) -> Estimate:
        """Estimate time and price of a job (:meth:`Client.estimate`)."""
        return cast(Estimate, await self._request("POST", "/v1/fine_tuning/estimates",
                                   json=base.clean_spec(spec)))

    # -- jobs ------------------------------------------------------------------

    async def create_job(self, **spec: Unpack[JobSpecFields]) -> FineTuningJob:
        """Create a fine-tuning job (:meth:`Client.create_job`)."""
        return cast(FineTuningJob, await self._request("POST", "/v1/fine_tuning/jobs",
                                                       json=base.clean_spec(spec)))

    async def get_job(self, job_id: JobId) -> FineTuningJob:
        """The job object (:meth:`Client.get_job`)."""
        return cast(FineTuningJob, await self._request("GET", f"/v1/fine_tuning/jobs/{job_id}"))

    async def list_jobs(self, *, limit: int = 20, after: JobId | None = None) -> JobList:
        """One page of the account's jobs, newest first (:meth:`Client.list_jobs`)."""
        return cast(JobList, await self._request("GET", "/v1/fine_tuning/jobs",
                                                 params=base.page(limit, after)))

    def iter_jobs(self, *, page_size: int = 100) -> AsyncGenerator[FineTuningJob, None]:
        """Every job of the account, newest first, page after page (:meth:`Client.iter_jobs`)."""
        return base.apaginate(
            lambda after: self.list_jobs(limit=page_size, after=after),
            lambda item: str(item["id"]))

    async def cancel_job(self, job_id: JobId) -> FineTuningJob:
        """Cancel a job (:meth:`Client.cancel_job`)."""
        return cast(FineTuningJob,
                    await self._request("POST", f"/v1/fine_tuning/jobs/{job_id}/cancel"))

    async def list_events(
        self, job_id: JobId, *, after: Seq | None = None, limit: int = EVENTS_PAGE_SIZE
    ) -> JobEventList:
        """One page of a job's events, oldest first (:meth:`Client.list_events`)."""
        return cast(JobEventList, await self._request(
            "GET", f"/v1/fine_tuning/jobs/{job_id}/events", params=base.page(limit, after)))

    def iter_events(self, job_id: JobId) -> AsyncGenerator[JobEvent, None]:
        """All of a job's events, oldest first, page after page (:meth:`Client.iter_events`)."""
        return base.apaginate(
            lambda after: self.list_events(job_id, after=after),
            lambda item: int(item["seq"]))

    async def list_checkpoints(
        self, job_id: JobId, *, after: str | None = None, limit: int = CHECKPOINTS_PAGE_SIZE
    ) -> CheckpointList:
        """One page of a job's checkpoints, newest first (:meth:`Client.list_checkpoints`)."""
        return cast(CheckpointList, await self._request(
            "GET", f"/v1/fine_tuning/jobs/{job_id}/checkpoints", params=base.page(limit, after)))

    def iter_checkpoints(
        self, job_id: JobId, *, page_size: int = CHECKPOINTS_PAGE_SIZE
    ) -> AsyncGenerator[Checkpoint, None]:
        """Every checkpoint of a job, newest first, page after page
        (:meth:`Client.iter_checkpoints`)."""
        return base.apaginate(
            lambda after: self.list_checkpoints(job_id, after=after, limit=page_size),
            lambda item: str(item["id"]))

    async def read_log(
        self, job_id: JobId, *, after: int | None = None, limit: int = LOG_PAGE_SIZE
    ) -> LogPage:
        """One page of the training log (:meth:`Client.read_log`)."""
        return cast(LogPage, await self._request(
            "GET", f"/v1/fine_tuning/jobs/{job_id}/log", params=base.page(limit, after)))

    def iter_log(self, job_id: JobId) -> AsyncGenerator[TrainingLogLine, None]:
        """Every line of the training log so far, oldest first (:meth:`Client.iter_log`)."""
        return base.apaginate(
            lambda after: self.read_log(job_id, after=after),
            lambda item: int(item["n"]))

    async def watch(self, job_id: JobId, *, last_event_id: Seq | None = None,
                    ) -> AsyncGenerator[StreamItem, None]:
        """Follow a job live, reconnecting by itself from the last id (:meth:`Client.watch`)."""
        follow = base._Follow(self.base_url, job_id, last_event_id)
        while True:
            cause: Exception | None = None
            try:
                async with self._open_stream(job_id, follow.last) as frames:
                    async for sse in frames:
                        item = follow.take(sse)
                        if follow.ended:
                            break
                        if item is not None:
                            yield item
            except httpx.TransportError as exc:
                cause = follow.lost(exc)
            if follow.final:
                return
            if cause is None:
                job = await self._final_job_or_none(job_id)
                if job is not None:
                    yield follow.closing_item(job)
                    return
            await anyio.sleep(follow.wait_s(cause))

    async def _final_job_or_none(self, job_id: JobId) -> FineTuningJob | None:
        try:
            job = await self.get_job(job_id)
        except ClientError:
            return None
        return job if base.is_final(job) else None

    # -- operations --------------------------------------------------------------

    async def dashboard_link(self) -> str:
        """A one-time dashboard sign-in URL (:meth:`Client.dashboard_link`)."""
        answer = await self._request("POST", "/v1/dashboard/links")
        return self.base_url + str(answer["path"])

    async def healthz(self) -> Health:
        """The server's health answer; needs no API key."""
        return cast(Health, await self._request("GET", "/healthz", auth=False))

    # -- plumbing ----------------------------------------------------------------

    def _headers(self, auth: bool) -> dict[str, str]:
        if not auth:
            return {}
        if self._api_key is None:
            self._api_key = base.find_api_key(self._data_dir)
        if self._api_key is None:
            raise base.missing_key(self._data_dir)
        return {"Authorization": f"Bearer {self._api_key}"}

    async def _request(self, method: str, path: str, *, auth: bool = True,
                       **kwargs: Any) -> Any:
        # The answer's JSON object (a dict); Any because each public method names its shape.
        headers = self._headers(auth)
        try:
            response = await self._http.request(method, path, headers=headers, **kwargs)
        except httpx.TransportError as exc:
            raise base.transport_error(self.base_url, exc) from exc
        return base.json_body(response, method, path)

    def _open_stream(self, job_id: JobId, last: Seq | None) -> _Frames:
        headers = self._headers(True)
        if last is not None:
            headers["Last-Event-ID"] = str(last)
        return _Frames(self._http, f"/v1/fine_tuning/jobs/{job_id}/stream", headers,
                       base.stream_timeout(self._timeout))


class _Frames:
    # The SSE frames of one connection, as an async context manager: an async
    # generator would leave the connection to the garbage collector when the
    # reader stops early, and Trio warns about that.
    def __init__(self, http: httpx.AsyncClient, path: str, headers: dict[str, str],
                 timeout: httpx.Timeout) -> None:
        self._connect = aconnect_sse(http, "GET", path, headers=headers, timeout=timeout)
        self._path = path
        self._events: AsyncGenerator[ServerSentEvent, None] | None = None

    async def __aenter__(self) -> _Frames:
        source = await self._connect.__aenter__()
        try:
            if source.response.is_error:
                await source.response.aread()
                base.raise_for_status(source.response)
            if source.response.status_code != 204:  # 204: resumed past the end of a finished job
                self._events = source.aiter_sse()
        except BaseException as exc:
            await self._connect.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._events is not None:
            await self._events.aclose()
        await self._connect.__aexit__(exc_type, exc, tb)

    def __aiter__(self) -> _Frames:
        return self

    async def __anext__(self) -> ServerSentEvent:
        if self._events is None:
            raise StopAsyncIteration
        try:
            return await self._events.__anext__()
        except SSEError as exc:
            raise ClientError(f"{self._path} did not answer an event stream: {exc}") from exc
