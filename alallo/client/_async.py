"""The async client: :class:`alallo.client.Client`'s methods, to ``await``, under Trio or
asyncio; the calls of :mod:`alallo.client._calls`, run on ``httpx.AsyncClient``."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from pathlib import Path
from types import TracebackType
from typing import Any, Self, Unpack

import httpx

from alallo import api
from alallo._types import FileId, JobId, Seq
from alallo.client._calls import (
    CHECKPOINTS_PAGE_SIZE,
    DEFAULT_TIMEOUT_S,
    EVENTS_PAGE_SIZE,
    FILES_PAGE_SIZE,
    JOBS_PAGE_SIZE,
    LOG_PAGE_SIZE,
    METRICS_PAGE_SIZE,
    Calls,
)
from alallo.client._download import ModelDownload, Progress
from alallo.client._drivers import AsyncDriver
from alallo.client._graders import AsyncGraders
from alallo.client._permissions import AsyncPermissions
from alallo.client._spec import JobSpecFields
from alallo.client._stream import StreamItem

__all__ = ["AsyncClient"]


class AsyncClient(AsyncGraders, AsyncPermissions):
    """A connection to one alallo server, on behalf of one account, for async code.

    The same methods as :class:`alallo.client.Client` (each documented
    there), as coroutines, with the same typed results (TypedDicts of
    :mod:`alallo.api`, plain dicts at runtime) and errors; the ``iter_*``
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

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._calls = Calls(base_url, api_key, timeout)
        self.base_url = self._calls.base_url
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout,
                                       transport=transport)
        self._driver = AsyncDriver(self._http)

    def __repr__(self) -> str:
        return f"AsyncClient({self.base_url!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections; the client cannot be used afterwards."""
        await self._http.aclose()

    # -- files ---------------------------------------------------------------

    async def upload_file(self, path: str | os.PathLike[str], *, purpose: str = "fine-tune",
                          expires_after_s: int | None = None) -> api.FileObject:
        """Upload a JSONL training file (:meth:`Client.upload_file`).

        The file is streamed in 64 KiB reads (HTTPX reads upload files
        synchronously, a short block each), never held whole in memory.
        """
        return await self._driver.run(self._calls.upload_file(path, purpose, expires_after_s))

    async def list_files(self, *, limit: int | None = None, after: FileId | None = None,
                         purpose: str | None = None, order: str | None = None) -> api.FileList:
        """One page of the account's files, newest first (:meth:`Client.list_files`)."""
        return await self._driver.run(self._calls.list_files(limit, after, purpose, order))

    def iter_files(self, *, page_size: int = FILES_PAGE_SIZE,
                   ) -> AsyncGenerator[api.FileObject, None]:
        """Every file of the account, newest first, page after page (:meth:`Client.iter_files`)."""
        return self._driver.drive(self._calls.iter_files(page_size))

    async def get_file(self, file_id: FileId) -> api.FileObject:
        """One file object (:meth:`Client.get_file`)."""
        return await self._driver.run(self._calls.get_file(file_id))

    async def file_content(self, file_id: FileId) -> bytes:
        """A file's bytes (:meth:`Client.file_content`)."""
        return await self._driver.run(self._calls.file_content(file_id))

    async def delete_file(self, file_id: FileId) -> api.FileDeleted:
        """Delete a file (:meth:`Client.delete_file`)."""
        return await self._driver.run(self._calls.delete_file(file_id))

    # -- models, capacity and estimates ----------------------------------------

    async def list_models(self) -> api.ModelList:
        """The model catalogue (:meth:`Client.list_models`)."""
        return await self._driver.run(self._calls.list_models())

    async def delete_model(self, model: str) -> api.ModelDeleted:
        """Delete one of the account's fine-tuned models (:meth:`Client.delete_model`)."""
        return await self._driver.run(self._calls.delete_model(model))

    async def get_model(self, model: str) -> api.Model:
        """One model (:meth:`Client.get_model`)."""
        return await self._driver.run(self._calls.get_model(model))

    async def download_model(self, model: str, directory: str | os.PathLike[str], *,
                             merged: bool = False, progress: Progress | None = None) -> Path:
        """Download a fine-tuned model's archive, resumable (:meth:`Client.download_model`)."""
        download = ModelDownload.into(model, directory, merged)
        async with self._http.stream(
                "GET", download.url, params=download.params,
                headers=download.headers(self._calls.auth_headers())) as response:
            return await download.asave(response, progress)

    async def list_trainers(self) -> api.TrainerList:
        """The trainers a job may name (:meth:`Client.list_trainers`)."""
        return await self._driver.run(self._calls.list_trainers())

    async def capacity(self) -> api.Capacity:
        """The capacity pool (:meth:`Client.capacity`)."""
        return await self._driver.run(self._calls.capacity())

    async def drain_node(self, node: str, *, on: bool = True) -> api.NodeDrain:
        """Drain a node, or undo it (:meth:`Client.drain_node`)."""
        return await self._driver.run(self._calls.drain_node(node, on))

    async def estimate(self, **spec: Unpack[JobSpecFields]) -> api.Estimate:
        """Estimate time and price of a job (:meth:`Client.estimate`)."""
        return await self._driver.run(self._calls.estimate(spec))

    async def together_estimate(self, **request: Any) -> api.TogetherPriceEstimate:
        """Together's price estimate (:meth:`Client.together_estimate`)."""
        return await self._driver.run(self._calls.together_estimate(request))

    # -- jobs ------------------------------------------------------------------

    async def create_job(self, **spec: Unpack[JobSpecFields]) -> api.FineTuningJob:
        """Create a fine-tuning job (:meth:`Client.create_job`)."""
        return await self._driver.run(self._calls.create_job(spec))

    async def get_job(self, job_id: JobId) -> api.FineTuningJob:
        """The job object (:meth:`Client.get_job`)."""
        return await self._driver.run(self._calls.get_job(job_id))

    async def list_jobs(self, *, limit: int = 20, after: JobId | None = None,
                        metadata: dict[str, str] | None = None) -> api.JobList:
        """One page of the account's jobs, newest first (:meth:`Client.list_jobs`)."""
        return await self._driver.run(self._calls.list_jobs(limit, after, metadata))

    def iter_jobs(self, *, page_size: int = JOBS_PAGE_SIZE,
                  ) -> AsyncGenerator[api.FineTuningJob, None]:
        """Every job of the account, newest first, page after page (:meth:`Client.iter_jobs`)."""
        return self._driver.drive(self._calls.iter_jobs(page_size))

    async def cancel_job(self, job_id: JobId) -> api.FineTuningJob:
        """Cancel a job (:meth:`Client.cancel_job`)."""
        return await self._driver.run(self._calls.cancel_job(job_id))

    async def pause_job(self, job_id: JobId) -> api.FineTuningJob:
        """Pause a job (:meth:`Client.pause_job`)."""
        return await self._driver.run(self._calls.pause_job(job_id))

    async def resume_job(self, job_id: JobId) -> api.FineTuningJob:
        """Resume a paused job (:meth:`Client.resume_job`)."""
        return await self._driver.run(self._calls.resume_job(job_id))

    async def list_events(self, job_id: JobId, *, after: Seq | None = None,
                          limit: int = EVENTS_PAGE_SIZE) -> api.JobEventList:
        """One page of a job's ``message`` events, oldest first (:meth:`Client.list_events`)."""
        return await self._driver.run(self._calls.list_events(job_id, after, limit))

    def iter_events(self, job_id: JobId) -> AsyncGenerator[api.JobEvent, None]:
        """All of a job's ``message`` events, oldest first, page after page
        (:meth:`Client.iter_events`)."""
        return self._driver.drive(self._calls.iter_events(job_id))

    async def list_checkpoints(self, job_id: JobId, *, after: str | None = None,
                               limit: int = CHECKPOINTS_PAGE_SIZE) -> api.CheckpointList:
        """One page of a job's checkpoints, newest first (:meth:`Client.list_checkpoints`)."""
        return await self._driver.run(self._calls.list_checkpoints(job_id, after, limit))

    def iter_checkpoints(self, job_id: JobId, *, page_size: int = CHECKPOINTS_PAGE_SIZE,
                         ) -> AsyncGenerator[api.Checkpoint, None]:
        """Every checkpoint of a job, newest first, page after page
        (:meth:`Client.iter_checkpoints`)."""
        return self._driver.drive(self._calls.iter_checkpoints(job_id, page_size))

    async def list_metrics(self, job_id: JobId, *, after: int | None = None,
                           limit: int = METRICS_PAGE_SIZE) -> api.MetricsList:
        """A job's metrics series, one row per step past ``after`` (:meth:`Client.list_metrics`)."""
        return await self._driver.run(self._calls.list_metrics(job_id, after, limit))

    async def read_log(self, job_id: JobId, *, after: int | None = None,
                       limit: int = LOG_PAGE_SIZE) -> api.LogPage:
        """One page of the training log (:meth:`Client.read_log`)."""
        return await self._driver.run(self._calls.read_log(job_id, after, limit))

    def iter_log(self, job_id: JobId) -> AsyncGenerator[api.TrainingLogLine, None]:
        """Every line of the training log so far, oldest first (:meth:`Client.iter_log`)."""
        return self._driver.drive(self._calls.iter_log(job_id))

    def watch(self, job_id: JobId, *, last_event_id: Seq | None = None,
              ) -> AsyncGenerator[StreamItem, None]:
        """Follow a job live, reconnecting by itself from the last id (:meth:`Client.watch`)."""
        return self._driver.drive(self._calls.watch(job_id, last_event_id))

    # -- the account ------------------------------------------------------------

    async def account(self) -> api.Account:
        """The client's account: balance, billing limit and spend (:meth:`Client.account`)."""
        return await self._driver.run(self._calls.account())

    # -- operations --------------------------------------------------------------

    async def dashboard_link(self) -> str:
        """A one-time dashboard sign-in URL (:meth:`Client.dashboard_link`)."""
        return await self._driver.run(self._calls.dashboard_link())

    async def chat_completion(self, model: str, messages: list[dict[str, str]],
                              **params: Any) -> api.ChatCompletion:
        """One answer of a model (:meth:`Client.chat_completion`)."""
        return await self._driver.run(self._calls.chat_completion(model, messages, params))

    async def healthz(self) -> api.Health:
        """The server's health answer; needs no API key."""
        return await self._driver.run(self._calls.healthz())
