"""A synchronous Python client for alallo's HTTP API (API.md).

Every method returns the JSON object of API.md as a plain ``dict``, so the
client never lags behind the server's fields. Failures are
:class:`ApiError` (the server said no) or :class:`ClientError` (no key, no
server); see :mod:`alallo._client_errors` for the tree.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Required, TypedDict, Unpack

import httpx
from httpx_sse import ServerSentEvent, SSEError, connect_sse

from alallo._client_errors import AlalloClientError as AlalloClientError
from alallo._client_errors import ApiError as ApiError
from alallo._client_errors import ClientError as ClientError
from alallo._keys import read_key_file
from alallo._status import JobStatus
from alallo._types import FileId, JobId, Seq
from alallo.settings import DEFAULT_DATA_DIR

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_URL",
    "AlalloClientError",
    "ApiError",
    "Client",
    "ClientError",
    "HyperparameterFields",
    "JobSpecFields",
    "StreamItem",
]

DEFAULT_URL = "http://127.0.0.1:8000"
"""Where the client looks for the server when neither an argument nor ``ALALLO_URL`` says."""
DEFAULT_TIMEOUT_S = 30.0
"""Seconds to wait for the server to connect, answer or accept a request body."""
STREAM_READ_TIMEOUT_S = 60.0
"""Longest silence accepted on a stream: the server sends a keep-alive every 15 s."""
STREAM_RECONNECT_ATTEMPTS = 10
"""Reconnections in a row, without an item in between, before a stream gives up."""
STREAM_RECONNECT_DELAY_S = 0.5
"""First wait before reconnecting, unless the server's ``retry:`` says otherwise
(alallo's says 2 s); it doubles on each failure in a row."""
STREAM_RECONNECT_MAX_DELAY_S = 5.0
"""Longest wait between two reconnections; all attempts span 40 to 50 s, enough
for a server restart (JOURNEYS.md, "Bad day")."""
EVENTS_PAGE_SIZE = 100
LOG_PAGE_SIZE = 1000

_JsonObject = dict[str, Any]


class HyperparameterFields(TypedDict, total=False):
    """Training settings of a job spec; the server fills in what is left out (or None)."""

    n_epochs: int | None
    """Passes over the training file (when ``max_steps`` is not given)."""
    max_steps: int | None
    """Optimizer steps to train; wins over ``n_epochs``."""
    batch_size: int | None
    """Examples per step."""
    learning_rate: float | None
    """The optimizer's learning rate."""
    lora_rank: int | None
    """Rank of the LoRA matrices (``adapter="lora"`` only)."""


class JobSpecFields(TypedDict, total=False):
    """What :meth:`Client.create_job` and :meth:`Client.estimate` accept (API.md, Jobs).

    Only the keys given are sent: a key given as None is left out, so callers
    such as the command line can pass every option they have.
    """

    model: Required[str]
    """A catalogue id from :meth:`Client.list_models`, e.g. ``alallo/tiny-gpt2``."""
    training_file: FileId | None
    """An uploaded file's id (``file-…``); required to create a job."""
    validation_file: FileId | None
    """An uploaded file to evaluate on."""
    name: str | None
    """A name to show in the Jobs tab."""
    suffix: str | None
    """Added to the fine-tuned model's name."""
    adapter: Literal["lora", "full"] | None
    """Train a LoRA adapter or all weights."""
    precision: Literal["16-bit", "4-bit"] | None
    """Weights' precision while training."""
    goal: Literal["lowest_cost", "fastest_finish"] | None
    """Which plan the scheduler picks."""
    hyperparameters: HyperparameterFields | None
    """Training settings; see :class:`HyperparameterFields`."""
    integrations: list[_JsonObject] | None
    """E.g. ``[{"type": "wandb", "wandb": {"project": ..., "api_key": ...}}]``."""
    seed: int | None
    """Random seed of the training run."""
    trainer: str | _JsonObject | None
    """``"trl"``, ``"simulated"`` or ``{"command": [...]}``."""


@dataclass(frozen=True)
class StreamItem:
    """One item of a job's stream (:meth:`Client.stream_job`)."""

    kind: str
    """``"job"``, ``"event"`` or ``"log"``; a kind added later passes through as is."""
    seq: Seq
    """The job's sequence number of this item (the SSE ``id``); -1 if the server sent none."""
    data: _JsonObject
    """The job object, the event object or the log line ``{"n", "at", "text"}``."""


class Client:
    """A connection to one alallo server, on behalf of one account.

    Use it as a context manager, or call :meth:`close`::

        with Client() as client:
            job = client.create_job(model="alallo/tiny-gpt2", training_file=file_id)

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
            accept up to :data:`STREAM_READ_TIMEOUT_S` of silence instead.
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
        url = (base_url or os.environ.get("ALALLO_URL") or DEFAULT_URL).rstrip("/")
        self.base_url = url.removesuffix("/v1")
        self._data_dir = Path(os.environ.get("ALALLO_DATA_DIR") or DEFAULT_DATA_DIR)
        self._api_key = api_key or _find_api_key(self._data_dir)
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
    ) -> _JsonObject:
        """Upload a JSONL training file; the server checks every line.

        Returns:
            The file object: ``id``, ``filename``, ``line_count``, ``format``, ...

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
            return self._request("POST", "/v1/files", files=files, data={"purpose": purpose})

    def list_files(self) -> _JsonObject:
        """The account's files, as a list object (``data``, ``has_more``)."""
        return self._request("GET", "/v1/files")

    def get_file(self, file_id: FileId) -> _JsonObject:
        """One file object. Raises :class:`ApiError` 404 if the account has no such file."""
        return self._request("GET", f"/v1/files/{file_id}")

    def delete_file(self, file_id: FileId) -> _JsonObject:
        """Delete a file. Raises :class:`ApiError` 409 while a live job uses it."""
        return self._request("DELETE", f"/v1/files/{file_id}")

    # -- models and estimates --------------------------------------------------

    def list_models(self) -> _JsonObject:
        """The model catalogue: ``id``, ``parameters``, ``adapters``, ``runnable_here``, ..."""
        return self._request("GET", "/v1/models")

    def capacity(self) -> _JsonObject:
        """The capacity pool: ``nodes`` (devices, free, busy by job), ``queue_length``, ``queue``."""
        return self._request("GET", "/v1/capacity")

    def drain_node(self, node: str, *, on: bool = True) -> _JsonObject:
        """Drain a node (operator): its jobs move, no new ones land there; ``on=False`` undoes it."""
        action = "drain" if on else "undrain"
        return self._request("POST", f"/v1/capacity/nodes/{node}/{action}")

    def estimate(self, **spec: Unpack[JobSpecFields]) -> _JsonObject:
        """Estimate time and price of a job without creating it.

        Args:
            **spec: The job spec (:class:`JobSpecFields`); ``training_file`` is optional here.

        Returns:
            ``available`` and ``reason``, ``time`` (``text`` like ``"40 min to 1.3 h"``),
            ``price``, ``capacity_free`` and ``note``, ``plan``, ``allowed_to_proceed``.
        """
        return self._request("POST", "/v1/fine_tuning/estimates", json=_clean_spec(spec))

    # -- jobs ------------------------------------------------------------------

    def create_job(self, **spec: Unpack[JobSpecFields]) -> _JsonObject:
        """Create a fine-tuning job; it starts ``queued`` with the message ``Starting``.

        Args:
            **spec: The job spec (:class:`JobSpecFields`); ``model`` and ``training_file``
                are required, everything else has a server default.

        Returns:
            The job object.

        Raises:
            ApiError: 422 with ``param`` naming a bad field, 402 if the balance
                cannot cover the job, 404 for an unknown file.
        """
        return self._request("POST", "/v1/fine_tuning/jobs", json=_clean_spec(spec))

    def get_job(self, job_id: JobId) -> _JsonObject:
        """The job object: status, message, progress, time left, price, ..."""
        return self._request("GET", f"/v1/fine_tuning/jobs/{job_id}")

    def list_jobs(self, *, limit: int = 20, after: JobId | None = None) -> _JsonObject:
        """One page of the account's jobs, newest first; ``after`` is the last id seen."""
        return self._request("GET", "/v1/fine_tuning/jobs", params=_page(limit, after))

    def cancel_job(self, job_id: JobId) -> _JsonObject:
        """Cancel a job; returns it ``cancelling`` (or already ``cancelled``).

        Raises:
            ApiError: 409 if the job has finished; the message says so.
        """
        return self._request("POST", f"/v1/fine_tuning/jobs/{job_id}/cancel")

    def list_events(
        self, job_id: JobId, *, after: Seq | None = None, limit: int = EVENTS_PAGE_SIZE
    ) -> _JsonObject:
        """One page of a job's events, oldest first; ``after`` is the last event's ``seq``."""
        return self._request(
            "GET", f"/v1/fine_tuning/jobs/{job_id}/events", params=_page(limit, after)
        )

    def iter_events(self, job_id: JobId) -> Iterator[_JsonObject]:
        """All of a job's events, oldest first, fetching page after page."""
        after: Seq | None = None
        while True:
            page = self.list_events(job_id, after=after)
            events: list[_JsonObject] = page["data"]
            yield from events
            if not page.get("has_more") or not events:
                return
            after = int(events[-1]["seq"])

    def read_log(
        self, job_id: JobId, *, after: int | None = None, limit: int = LOG_PAGE_SIZE
    ) -> _JsonObject:
        """One page of the training log: ``data`` holds ``{"n", "at", "text"}`` lines.

        ``after`` is the ``n`` of the last line seen (a line's ``n`` is its place
        in the job's sequence, shared with events). A job that has not started
        training has an empty log.
        """
        return self._request(
            "GET", f"/v1/fine_tuning/jobs/{job_id}/log", params=_page(limit, after)
        )

    def iter_log(self, job_id: JobId) -> Iterator[_JsonObject]:
        """Every line of the training log so far, oldest first."""
        after: Seq | None = None
        while True:
            page = self.read_log(job_id, after=after)
            lines: list[_JsonObject] = page["data"]
            yield from lines
            if not page.get("has_more") or not lines:
                return
            after = int(lines[-1]["n"])

    def stream_job(
        self, job_id: JobId, *, last_event_id: Seq | None = None
    ) -> Iterator[StreamItem]:
        """Follow a job live: every change of the job, each event and each log line.

        Reads ``GET /v1/fine_tuning/jobs/{id}/stream`` (Server-Sent Events). When
        the connection drops, or the body ends before the job reached a final
        status (the server's ``done`` frame), it reconnects with ``Last-Event-ID`` set to the last item seen,
        so nothing is missed or repeated. If the body ends cleanly and the job
        turns out to be final already (a resume after its last item), the job
        object is yielded once more and the stream ends. Between attempts it waits
        :data:`STREAM_RECONNECT_DELAY_S` (or the server's ``retry:``), doubling
        up to :data:`STREAM_RECONNECT_MAX_DELAY_S`, and
        gives up after :data:`STREAM_RECONNECT_ATTEMPTS` failures in a row. The
        loop is ours because retry libraries retry a call, not a half-consumed
        stream, and a clean end before the final status is no exception.

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
        last = last_event_id
        failures = 0
        received = final = False
        delay = STREAM_RECONNECT_DELAY_S
        while True:
            cause: Exception | None = None
            try:
                for sse in self._open_stream(job_id, last):
                    if sse.retry is not None:
                        delay = sse.retry / 1000
                    if sse.id.isdigit():
                        last = int(sse.id)
                    if sse.event == "done":  # the server's last frame of a finished job
                        final = True
                        break
                    if not sse.data:
                        continue  # WHATWG HTML 9.2.6: an event without data is not dispatched
                    item = _stream_item(sse)
                    final = final or (item.kind == "job" and _is_final(item.data))
                    failures, received = 0, True
                    yield item
            except httpx.TransportError as exc:
                if isinstance(exc, httpx.ConnectError) and not received:
                    # No server at all: say so now rather than after every attempt.
                    raise _transport_error(self.base_url, exc) from exc
                cause = exc
            if final:  # the final job object is the last item the server sends
                return
            if cause is None:
                # A clean end before the final job object: when resuming past
                # it, the server has nothing left to send; look instead.
                job = self._final_job_or_none(job_id)
                if job is not None:
                    yield StreamItem("job", -1 if last is None else last, job)
                    return
            failures += 1
            if failures > STREAM_RECONNECT_ATTEMPTS:
                raise ClientError(
                    f"lost the stream of {job_id} at {self.base_url} and could not "
                    f"reconnect after {STREAM_RECONNECT_ATTEMPTS} attempts"
                ) from cause
            time.sleep(min(delay * 2 ** (failures - 1), STREAM_RECONNECT_MAX_DELAY_S))

    def _final_job_or_none(self, job_id: JobId) -> _JsonObject | None:
        try:
            job = self.get_job(job_id)
        except ClientError:
            return None
        return job if _is_final(job) else None

    # -- operations --------------------------------------------------------------

    def dashboard_link(self) -> str:
        """A one-time URL that signs a browser in to the dashboard as this client's account.

        It works once, within 10 minutes; the browser then keeps a session cookie.
        """
        return self.base_url + str(self._request("POST", "/v1/dashboard/links")["path"])

    def healthz(self) -> _JsonObject:
        """The server's health answer; needs no API key."""
        return self._request("GET", "/healthz", auth=False)

    # -- plumbing ----------------------------------------------------------------

    def _headers(self, auth: bool) -> dict[str, str]:
        if not auth:
            return {}
        if self._api_key is None:
            self._api_key = _find_api_key(self._data_dir)
        if self._api_key is None:
            raise ClientError(
                "no API key: pass --api-key, set ALALLO_API_KEY, or start the server "
                f"with `alallo serve`, which writes one to {self._data_dir / 'api-key'}"
            )
        return {"Authorization": f"Bearer {self._api_key}"}

    def _request(self, method: str, path: str, *, auth: bool = True, **kwargs: Any) -> _JsonObject:
        headers = self._headers(auth)
        try:
            response = self._http.request(method, path, headers=headers, **kwargs)
        except httpx.TransportError as exc:
            raise _transport_error(self.base_url, exc) from exc
        _raise_for_status(response)
        if not response.content:
            return {}
        try:
            body = response.json()
        except ValueError as exc:
            raise ClientError(f"{method} {path} answered something that is not JSON") from exc
        if not isinstance(body, dict):
            raise ClientError(f"{method} {path} answered JSON that is not an object")
        return body

    def _open_stream(self, job_id: JobId, last: Seq | None) -> Iterator[ServerSentEvent]:
        headers = self._headers(True)
        if last is not None:
            headers["Last-Event-ID"] = str(last)
        timeout = httpx.Timeout(self._timeout, read=max(self._timeout, STREAM_READ_TIMEOUT_S))
        path = f"/v1/fine_tuning/jobs/{job_id}/stream"
        with connect_sse(self._http, "GET", path, headers=headers, timeout=timeout) as source:
            if source.response.is_error:
                source.response.read()
                _raise_for_status(source.response)
            if source.response.status_code == 204:  # resumed past the end of a finished job
                return
            try:
                yield from source.iter_sse()
            except SSEError as exc:
                raise ClientError(f"{path} did not answer an event stream: {exc}") from exc


def _transport_error(base_url: str, exc: httpx.TransportError) -> ClientError:
    if isinstance(exc, httpx.ConnectError):
        return ClientError(
            f"cannot reach alallo at {base_url}: is the server running? "
            "start it with `alallo serve`"
        )
    if isinstance(exc, httpx.TimeoutException):
        return ClientError(f"alallo at {base_url} did not answer in time")
    return ClientError(f"talking to alallo at {base_url} failed: {exc}")


def _find_api_key(data_dir: Path) -> str | None:
    return os.environ.get("ALALLO_API_KEY") or read_key_file(data_dir / "api-key")


def _raise_for_status(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        error = response.json()["error"]
        code, message, param = error["code"], error["message"], error.get("param")
    except (ValueError, KeyError, TypeError):
        # Not alallo's error body (a proxy, or a path this server lacks): say where.
        text = response.text.strip()[:200] or response.reason_phrase
        request = response.request
        code, message = (
            f"http_{response.status_code}",
            f"{text} ({request.method} {request.url.path})",
        )
        param = None
    raise ApiError(response.status_code, str(code), str(message), param)


def _page(limit: int, after: str | int | None) -> dict[str, str | int]:
    params: dict[str, str | int] = {"limit": limit}
    if after is not None:
        params["after"] = after
    return params


def _clean_spec(spec: JobSpecFields) -> _JsonObject:
    body: _JsonObject = {key: value for key, value in spec.items() if value is not None}
    if "hyperparameters" in body:
        given = {k: v for k, v in body.pop("hyperparameters").items() if v is not None}
        if given:
            body["hyperparameters"] = given
    return body


def _stream_item(sse: ServerSentEvent) -> StreamItem:
    seq = int(sse.id) if sse.id.isdigit() else -1
    try:
        data = json.loads(sse.data)
    except ValueError:
        data = {"text": sse.data}
    if not isinstance(data, dict):
        data = {"value": data}
    return StreamItem(kind=sse.event, seq=seq, data=data)


def _is_final(job: _JsonObject) -> bool:
    try:
        return JobStatus(job.get("status")).is_final
    except ValueError:
        return False
