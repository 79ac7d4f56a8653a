"""The blocking client, :class:`Client`: the calls of :mod:`alallo.client._calls`, run on
``httpx.Client`` (:mod:`alallo.client` says how both clients are built)."""

from __future__ import annotations

import os
from collections.abc import Iterator
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
from alallo.client._drivers import SyncDriver
from alallo.client._graders import SyncGraders
from alallo.client._permissions import SyncPermissions
from alallo.client._spec import JobSpecFields
from alallo.client._stream import StreamItem

__all__ = ["Client"]


class Client(SyncGraders, SyncPermissions):
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

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S,
                 transport: httpx.BaseTransport | None = None) -> None:
        self._calls = Calls(base_url, api_key, timeout)
        self.base_url = self._calls.base_url
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)
        self._driver = SyncDriver(self._http)

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections; the client cannot be used afterwards."""
        self._http.close()

    # -- files ---------------------------------------------------------------

    def upload_file(self, path: str | os.PathLike[str], *, purpose: str = "fine-tune",
                    expires_after_s: int | None = None) -> api.FileObject:
        """Upload a JSONL training file, streamed; the server checks every line. With
        ``expires_after_s`` (3600 to 30 days), it is deleted that long after its upload.

        Returns:
            The :class:`~alallo.FileObject` (a plain dict): ``id``, ``filename``,
            ``line_count``, ``format``, ...

        Raises:
            InvalidRequest: 422 naming the first bad line (``line 7: ...``), 413 if too big.
            ClientError: The local file cannot be read, or the server is unreachable.
        """
        return self._driver.run(self._calls.upload_file(path, purpose, expires_after_s))

    def list_files(self, *, limit: int | None = None, after: FileId | None = None,
                   purpose: str | None = None, order: str | None = None) -> api.FileList:
        """One page of the account's files, newest first (``order="asc"``: oldest first),
        only those of ``purpose`` if given; ``after`` is the last file id seen. Without
        ``limit``, the server's page (up to 10,000)."""
        return self._driver.run(self._calls.list_files(limit, after, purpose, order))

    def iter_files(self, *, page_size: int = FILES_PAGE_SIZE) -> Iterator[api.FileObject]:
        """Every file of the account, newest first, fetching page after page."""
        return self._driver.drive(self._calls.iter_files(page_size))

    def get_file(self, file_id: FileId) -> api.FileObject:
        """One file object. Raises :class:`~alallo.NotFound` if the account has no such file."""
        return self._driver.run(self._calls.get_file(file_id))

    def file_content(self, file_id: FileId) -> bytes:
        """A file's bytes: an uploaded file as it was sent, or a job's metrics CSV (its
        ``result_files``). Raises :class:`~alallo.NotFound` if the account has no such file."""
        return self._driver.run(self._calls.file_content(file_id))

    def delete_file(self, file_id: FileId) -> api.FileDeleted:
        """Delete a file. Raises :class:`~alallo.Conflict` (409) while a live job uses it."""
        return self._driver.run(self._calls.delete_file(file_id))

    # -- models, capacity and estimates ----------------------------------------

    def list_models(self) -> api.ModelList:
        """The model catalogue: ``id``, ``parameters``, ``adapters``, ``runnable_here``, ..."""
        return self._driver.run(self._calls.list_models())

    def delete_model(self, model: str) -> api.ModelDeleted:
        """Delete one of the account's fine-tuned models (its files; the job stays).

        Raises:
            NotFound: the account has no such model.
        """
        return self._driver.run(self._calls.delete_model(model))

    def get_model(self, model: str) -> api.Model:
        """One model: of the catalogue (``alallo/tiny-gpt2``), or one of the account's
        fine-tuned (``ft:…``) or checkpoint models (``ft:…:ckpt-step-N``). Raises
        :class:`~alallo.NotFound` for any other."""
        return self._driver.run(self._calls.get_model(model))

    def download_model(self, model: str, directory: str | os.PathLike[str], *,
                       merged: bool = False,
                       progress: Progress | None = None) -> Path:
        """Download a fine-tuned model's archive (tar.gz: the adapter, or ``merged`` into
        its base) into ``directory``, resuming a partial file left by an earlier try
        (``Range``). ``progress(bytes_so_far, total_or_None)`` is called as chunks arrive.

        Returns:
            The archive's path, ``<directory>/<job id>-<adapter|merged>.tar.gz``.

        Raises:
            NotFound: the account has no such model.
        """
        download = ModelDownload.into(model, directory, merged)
        with self._http.stream("GET", download.url, params=download.params,
                               headers=download.headers(self._calls.auth_headers())) as response:
            return download.save(response, progress)

    def list_trainers(self) -> api.TrainerList:
        """The trainers a job may name: ``name``, ``description``, ``built_in``."""
        return self._driver.run(self._calls.list_trainers())

    def capacity(self) -> api.Capacity:
        """The capacity pool: ``nodes`` (devices, free, busy by job), ``queue_length``, ``queue``."""
        return self._driver.run(self._calls.capacity())

    def drain_node(self, node: str, *, on: bool = True) -> api.NodeDrain:
        """Drain a node (operator): its jobs move, no new ones land there; ``on=False`` undoes it."""
        return self._driver.run(self._calls.drain_node(node, on))

    def estimate(self, **spec: Unpack[JobSpecFields]) -> api.Estimate:
        """Estimate time and price of a job without creating it.

        Args:
            **spec: The job spec (:class:`JobSpecFields`), as for :meth:`create_job`.

        Returns:
            An :class:`~alallo.Estimate` (a plain dict): ``available`` and ``reason``,
            ``time`` (``text`` like ``"40 min to 1.3 h"``), ``price``, ``capacity_free``
            and ``note``, ``plan``, ``allowed_to_proceed``.
        """
        return self._driver.run(self._calls.estimate(spec))

    def together_estimate(self, **request: Any) -> api.TogetherPriceEstimate:
        """Together's price estimate (``training_file``, ``model``, ``n_epochs``,
        ``n_evals``, ``training_type``...), answered from :meth:`estimate`."""
        return self._driver.run(self._calls.together_estimate(request))

    # -- jobs ------------------------------------------------------------------

    def create_job(self, **spec: Unpack[JobSpecFields]) -> api.FineTuningJob:
        """Create a fine-tuning job; it starts ``queued`` with the message ``Starting``.

        Args:
            **spec: The job spec (:class:`JobSpecFields`); ``model`` and ``training_file``
                are required, everything else has a server default.
                ``method="reinforcement"`` also needs ``grader``, OpenAI's grader as a
                dict; its hyperparameters (``compute_multiplier``, ``eval_interval``,
                ``eval_samples``, ``max_completion_tokens``) go in ``hyperparameters``.

        Returns:
            The job, a :class:`~alallo.FineTuningJob` (a plain dict).

        Raises:
            ApiError: :class:`~alallo.InvalidRequest` (422) with ``param`` naming a bad
                field, 402 if the balance cannot cover the job, :class:`~alallo.NotFound`
                for an unknown file.
        """
        return self._driver.run(self._calls.create_job(spec))

    def get_job(self, job_id: JobId) -> api.FineTuningJob:
        """The job object: status, message, progress, time left, price, ..."""
        return self._driver.run(self._calls.get_job(job_id))

    def list_jobs(self, *, limit: int = 20, after: JobId | None = None,
                  metadata: dict[str, str] | None = None) -> api.JobList:
        """One page of the account's jobs, newest first; ``after`` is the last id seen;
        with ``metadata``, only the jobs whose metadata holds each pair."""
        return self._driver.run(self._calls.list_jobs(limit, after, metadata))

    def iter_jobs(self, *, page_size: int = JOBS_PAGE_SIZE) -> Iterator[api.FineTuningJob]:
        """Every job of the account, newest first, fetching page after page."""
        return self._driver.drive(self._calls.iter_jobs(page_size))

    def cancel_job(self, job_id: JobId) -> api.FineTuningJob:
        """Cancel a job; returns it ``cancelling`` (or already ``cancelled``).

        Raises:
            InvalidTransition: 409 if the job has finished; the message says so.
        """
        return self._driver.run(self._calls.cancel_job(job_id))

    def pause_job(self, job_id: JobId) -> api.FineTuningJob:
        """Pause a job: it saves a checkpoint, stops and frees its capacity, and costs
        nothing until resumed. Returns it ``paused`` (message ``Paused at step N. Resume it
        ...``), or ``running`` with ``Pausing: saving a checkpoint`` when its trainer takes
        over 30 s to save; a queued job pauses at once. Idempotent.

        Raises:
            InvalidTransition: 409 if the job has finished or is being cancelled.
        """
        return self._driver.run(self._calls.pause_job(job_id))

    def resume_job(self, job_id: JobId) -> api.FineTuningJob:
        """Resume a paused job: it is ``queued`` again and continues from its checkpoint.

        Raises:
            InvalidTransition: 409 if the job is not paused (live, still pausing, finished).
        """
        return self._driver.run(self._calls.resume_job(job_id))

    def list_events(self, job_id: JobId, *, after: Seq | None = None,
                    limit: int = EVENTS_PAGE_SIZE) -> api.JobEventList:
        """One page of a job's ``message`` events, oldest first; ``after`` is the last event's
        ``seq``. Each event's kind (``JOB_START``...) is its ``alallo_type``; the server's own
        default order (OpenAI's: newest first, with ``metrics`` events) is the ``openai``
        package's ``fine_tuning.jobs.list_events``."""
        return self._driver.run(self._calls.list_events(job_id, after, limit))

    def iter_events(self, job_id: JobId) -> Iterator[api.JobEvent]:
        """All of a job's ``message`` events, oldest first, fetching page after page."""
        return self._driver.drive(self._calls.iter_events(job_id))

    def list_checkpoints(self, job_id: JobId, *, after: str | None = None,
                         limit: int = CHECKPOINTS_PAGE_SIZE) -> api.CheckpointList:
        """One page of a job's saved checkpoints, newest first.

        ``after`` is the ``id`` (``ftckpt-…``) of the last checkpoint seen. Each
        holds ``step_number``, ``fine_tuned_model_checkpoint`` (its model's id,
        ``ft:…:ckpt-step-N``) and ``metrics`` (``step``, ``train_loss``). A job that saved
        none has an empty list.
        """
        return self._driver.run(self._calls.list_checkpoints(job_id, after, limit))

    def iter_checkpoints(self, job_id: JobId, *,
                         page_size: int = CHECKPOINTS_PAGE_SIZE) -> Iterator[api.Checkpoint]:
        """Every checkpoint a job saved, newest first, fetching page after page."""
        return self._driver.drive(self._calls.iter_checkpoints(job_id, page_size))

    def list_metrics(self, job_id: JobId, *, after: int | None = None,
                     limit: int = METRICS_PAGE_SIZE) -> api.MetricsList:
        """A job's metrics series: one row per step past ``after`` (a step), in step order.

        Each row has ``step``, ``epoch``, ``train_loss``, ``train_mean_token_accuracy``,
        ``learning_rate``, ``grad_norm``, ``tokens_per_s``, ``valid_loss``,
        ``valid_mean_token_accuracy``, ``full_valid_loss``,
        ``full_valid_mean_token_accuracy``, DPO's ``reward_accuracy`` and ``reward_margin``,
        reinforcement's ``reward``, ``reward_std``, ``valid_reward`` and ``scores`` (each
        grader's mean score, by name): None where not measured at that step.
        """
        return self._driver.run(self._calls.list_metrics(job_id, after, limit))

    def read_log(self, job_id: JobId, *, after: int | None = None,
                 limit: int = LOG_PAGE_SIZE) -> api.LogPage:
        """One page of the training log: ``data`` holds ``{"n", "at", "text"}`` lines.

        ``after`` is the ``n`` of the last line seen (a line's ``n`` is its place
        in the job's sequence, shared with events). A job that has not started
        training has an empty log.
        """
        return self._driver.run(self._calls.read_log(job_id, after, limit))

    def iter_log(self, job_id: JobId) -> Iterator[api.TrainingLogLine]:
        """Every line of the training log so far, oldest first."""
        return self._driver.drive(self._calls.iter_log(job_id))

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
        failures in a row (``alallo.client._stream.Follow`` has the rules).

        Args:
            job_id: The job to follow.
            last_event_id: Resume after this sequence number; None starts from
                what the server sends first.

        Yields:
            :class:`StreamItem` in sequence order; kinds other than ``job``,
            ``event`` and ``log`` pass through unchanged.

        Raises:
            ApiError: The server refused the stream (:class:`~alallo.NotFound` for an
                unknown job).
            ClientError: The server stayed unreachable through every attempt.
        """
        return self._driver.drive(self._calls.watch(job_id, last_event_id))

    # -- the account ------------------------------------------------------------

    def account(self) -> api.Account:
        """The client's account (``GET /v1/account``): ``id``, ``name``, ``created_at``,
        ``balance``, ``billing_limit``, ``available`` (balance plus billing limit: what new
        charges may still take), ``spend`` (``charged``: net of refunds, ``refunded``,
        ``gross``) and ``currency``, to the nano-dollar.

        Raises:
            Unauthorized: the server does not know the key, or it was revoked (401).
            ClientError: no key was given or found, or no server answers.
        """
        return self._driver.run(self._calls.account())

    # -- operations --------------------------------------------------------------

    def dashboard_link(self) -> str:
        """A one-time URL that signs a browser in to the dashboard as this client's account.

        It works once, within 10 minutes; the browser then keeps a session cookie.
        """
        return self._driver.run(self._calls.dashboard_link())

    def chat_completion(self, model: str, messages: list[dict[str, str]],
                        **params: Any) -> api.ChatCompletion:
        """One answer of a model (``POST /v1/chat/completions``, not streamed): ``messages``
        as OpenAI's (``[{"role": "user", "content": "Hi"}]``), ``params`` its other fields
        (``max_tokens``, ``temperature``, ``stop`` ...). Raises :class:`~alallo.InvalidRequest`
        (422) naming the field for a bad one, :class:`~alallo.NotFound` for no such model."""
        return self._driver.run(self._calls.chat_completion(model, messages, params))

    def healthz(self) -> api.Health:
        """The server's health answer; needs no API key."""
        return self._driver.run(self._calls.healthz())

