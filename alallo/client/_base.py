"""What :class:`alallo.client.Client` and :class:`alallo.client.AsyncClient` share.

Everything here is free of I/O: the job spec's fields, stream items, the
settings of reconnection, how answers become results or errors, and
:class:`_Follow`, the reconnection rules of ``watch`` as a small state
machine, so that the two clients run the same rules and differ only in how
they wait (``time.sleep`` or ``anyio.sleep``) and read (``httpx.Client`` or
``httpx.AsyncClient``).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Required, TypedDict, TypeVar

import httpx
from httpx_sse import ServerSentEvent

from alallo._keys import DEFAULT_DATA_DIR, read_key_file
from alallo._status import JobStatus
from alallo._types import FileId, Seq
from alallo._errors import ClientError, api_error
from alallo.api import Page

__all__ = [
    "CHECKPOINTS_PAGE_SIZE",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_URL",
    "EVENTS_PAGE_SIZE",
    "FILES_PAGE_SIZE",
    "LOG_PAGE_SIZE",
    "STREAM_READ_TIMEOUT_S",
    "STREAM_RECONNECT_ATTEMPTS",
    "STREAM_RECONNECT_DELAY_S",
    "STREAM_RECONNECT_MAX_DELAY_S",
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
"""Events fetched per request by ``iter_events``."""
CHECKPOINTS_PAGE_SIZE = 100
"""Checkpoints fetched per request by ``iter_checkpoints``."""
FILES_PAGE_SIZE = 100
"""Files fetched per request by ``iter_files``."""
LOG_PAGE_SIZE = 1000
"""Log lines fetched per request by ``iter_log``."""

JsonObject = dict[str, Any]


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
    learning_rate_multiplier: float | Literal["auto"] | None
    """OpenAI's way: the default learning rate times this (``"auto"``: 1)."""
    lora_rank: int | None
    """Rank of the LoRA matrices (``adapter="lora"`` only)."""


class JobSpecFields(TypedDict, total=False):
    """What ``create_job`` and ``estimate`` accept (API.md, Jobs).

    Only the keys given are sent: a key given as None is left out, so callers
    such as the command line can pass every option they have.
    """

    model: Required[str]
    """A catalogue id from ``list_models``, e.g. ``alallo/tiny-gpt2``."""
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
    integrations: list[JsonObject] | None
    """E.g. ``[{"type": "wandb", "wandb": {"project": ..., "api_key": ...}}]``."""
    seed: int | None
    """Random seed of the training run."""
    trainer: str | JsonObject | None
    """``"trl"``, ``"simulated"`` or ``{"command": [...]}``."""


@dataclass(frozen=True)
class StreamItem:
    """One item of a job's stream (``watch``)."""

    kind: str
    """``"job"``, ``"event"`` or ``"log"``; a kind added later passes through as is."""
    seq: Seq
    """The job's sequence number of this item (the SSE ``id``); -1 if the server sent none."""
    data: JsonObject
    """By ``kind``: the job (shaped as :class:`~alallo.FineTuningJob`), the event
    (:class:`~alallo.JobEvent`) or the log line (:class:`~alallo.TrainingLogLine`)."""


class _Follow:
    """Where a followed stream stands, and what to do after each connection.

    The rules (both clients' ``watch``): resume after the last ``id`` seen;
    stop at the server's ``done`` frame or a final job object; after a clean
    end without either, look at the job once (a resume past its end gets
    nothing more) and stop if it is final; otherwise wait and reconnect, the
    wait doubling from the server's ``retry:`` (or
    :data:`STREAM_RECONNECT_DELAY_S`) up to :data:`STREAM_RECONNECT_MAX_DELAY_S`;
    give up after :data:`STREAM_RECONNECT_ATTEMPTS` failures in a row. A
    refused connection before any item means no server: fail at once. The
    loop is ours because retry libraries retry a call, not a half-consumed
    stream, and a clean end before the final status is no exception.
    """

    def __init__(self, base_url: str, job_id: str, last: Seq | None) -> None:
        self.base_url = base_url
        self.job_id = job_id
        self.last = last
        self.final = False
        self.ended = False  # the server's done frame came
        self._failures = 0
        self._received = False
        self._delay = STREAM_RECONNECT_DELAY_S

    def take(self, sse: ServerSentEvent) -> StreamItem | None:
        """The item an SSE frame carries, or None (a comment, ``done``: then ``ended``)."""
        if sse.retry is not None:
            self._delay = sse.retry / 1000
        if sse.id.isdigit():
            self.last = int(sse.id)
        if sse.event == "done":  # the server's last frame of a finished job
            self.final = self.ended = True
            return None
        if not sse.data:
            return None  # WHATWG HTML 9.2.6: an event without data is not dispatched
        item = stream_item(sse)
        self.final = self.final or (item.kind == "job" and is_final(item.data))
        self._failures, self._received = 0, True
        return item

    def lost(self, exc: httpx.TransportError) -> Exception:
        """Note a dropped connection; raise at once if there was never a server."""
        if isinstance(exc, httpx.ConnectError) and not self._received:
            raise transport_error(self.base_url, exc) from exc
        return exc

    def closing_item(self, job: Mapping[str, Any]) -> StreamItem:
        """The final job, looked up after a clean end, as the stream's last item."""
        return StreamItem("job", -1 if self.last is None else self.last, dict(job))

    def wait_s(self, cause: Exception | None) -> float:
        """Seconds to wait before the next attempt.

        Raises:
            ClientError: Every attempt failed.
        """
        self._failures += 1
        if self._failures > STREAM_RECONNECT_ATTEMPTS:
            raise ClientError(
                f"lost the stream of {self.job_id} at {self.base_url} and could not "
                f"reconnect after {STREAM_RECONNECT_ATTEMPTS} attempts"
            ) from cause
        return min(self._delay * 2.0 ** (self._failures - 1), STREAM_RECONNECT_MAX_DELAY_S)


def base_url_of(base_url: str | None) -> str:
    url = (base_url or os.environ.get("ALALLO_URL") or DEFAULT_URL).rstrip("/")
    return url.removesuffix("/v1")


def data_dir() -> Path:

    return Path(os.environ.get("ALALLO_DATA_DIR") or DEFAULT_DATA_DIR)


def find_api_key(data_dir: Path) -> str | None:
    return os.environ.get("ALALLO_API_KEY") or read_key_file(data_dir / "api-key")


def missing_key(data_dir: Path) -> ClientError:
    return ClientError(
        "no API key: pass --api-key, set ALALLO_API_KEY, or start the server "
        f"with `alallo serve`, which writes one to {data_dir / 'api-key'}"
    )


def stream_timeout(timeout: float) -> httpx.Timeout:
    return httpx.Timeout(timeout, read=max(timeout, STREAM_READ_TIMEOUT_S))


def transport_error(base_url: str, exc: httpx.TransportError) -> ClientError:
    if isinstance(exc, httpx.ConnectError):
        return ClientError(
            f"cannot reach alallo at {base_url}: is the server running? "
            "start it with `alallo serve`"
        )
    if isinstance(exc, httpx.TimeoutException):
        return ClientError(f"alallo at {base_url} did not answer in time")
    return ClientError(f"talking to alallo at {base_url} failed: {exc}")


def raise_for_status(response: httpx.Response) -> None:
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
    raise api_error(response.status_code, str(code), str(message), param)


def json_body(response: httpx.Response, method: str, path: str) -> JsonObject:
    raise_for_status(response)
    if not response.content:
        return {}
    try:
        body = response.json()
    except ValueError as exc:
        raise ClientError(f"{method} {path} answered something that is not JSON") from exc
    if not isinstance(body, dict):
        raise ClientError(f"{method} {path} answered JSON that is not an object")
    return body


def page(limit: int, after: str | int | None) -> dict[str, str | int]:
    params: dict[str, str | int] = {"limit": limit}
    if after is not None:
        params["after"] = after
    return params


def clean_spec(spec: JobSpecFields) -> JsonObject:
    body: JsonObject = {key: value for key, value in spec.items() if value is not None}
    if "hyperparameters" in body:
        given = {k: v for k, v in body.pop("hyperparameters").items() if v is not None}
        if given:
            body["hyperparameters"] = given
    return body


def stream_item(sse: ServerSentEvent) -> StreamItem:
    seq = int(sse.id) if sse.id.isdigit() else -1
    try:
        data = json.loads(sse.data)
    except ValueError:
        data = {"text": sse.data}
    if not isinstance(data, dict):
        data = {"value": data}
    return StreamItem(kind=sse.event, seq=seq, data=data)


def is_final(job: Mapping[str, Any]) -> bool:
    try:
        return JobStatus(job.get("status")).is_final
    except ValueError:
        return False


_Item = TypeVar("_Item")


def paginate(fetch: Callable[[Any], Page[_Item]],
             cursor: Callable[[_Item], Any]) -> Iterator[_Item]:
    """Every item of a list, page after page: ``fetch(after)`` gets one page (``after``
    None for the first), ``cursor(item)`` is what the next page starts after; it stops
    at a page with ``has_more`` false (or empty)."""
    after = None
    while True:
        page = fetch(after)
        items = page["data"]
        yield from items
        if not page.get("has_more") or not items:
            return
        after = cursor(items[-1])


async def apaginate(fetch: Callable[[Any], Awaitable[Page[_Item]]],
                    cursor: Callable[[_Item], Any]) -> AsyncGenerator[_Item, None]:
    """:func:`paginate` for an async ``fetch``."""
    after = None
    while True:
        page = await fetch(after)
        items = page["data"]
        for item in items:
            yield item
        if not page.get("has_more") or not items:
            return
        after = cursor(items[-1])
