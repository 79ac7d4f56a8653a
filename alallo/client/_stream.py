"""A job's stream as ``watch`` reads it: its items, and the rules of following it.

:class:`Follow` keeps where a followed stream stands and decides, after each
connection, whether to stop, look at the job, or wait and reconnect; the
loop that asks it is ``Calls.watch`` (:mod:`alallo.client._calls`), run by
both clients.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import ServerSentEvent

from alallo._errors import ClientError
from alallo._status import JobStatus
from alallo._types import Seq
from alallo.client._answers import transport_error

__all__ = [
    "STREAM_READ_TIMEOUT_S",
    "STREAM_RECONNECT_ATTEMPTS",
    "STREAM_RECONNECT_DELAY_S",
    "STREAM_RECONNECT_MAX_DELAY_S",
    "Follow",
    "StreamItem",
    "is_final",
]

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


@dataclass(frozen=True)
class StreamItem:
    """One item of a job's stream (``watch``)."""

    kind: str
    """``"job"``, ``"event"`` or ``"log"``; a kind added later passes through as is."""
    seq: Seq
    """The job's sequence number of this item (the SSE ``id``); -1 if the server sent none."""
    data: dict[str, Any]
    """By ``kind``: the job (shaped as :class:`~alallo.FineTuningJob`), the event
    (:class:`~alallo.JobEvent`) or the log line (:class:`~alallo.TrainingLogLine`)."""


class Follow:
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
        item = _stream_item(sse)
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


def is_final(job: Mapping[str, Any]) -> bool:
    """Whether a job object's status is final (an unknown status is not)."""
    try:
        return JobStatus(job.get("status")).is_final
    except ValueError:
        return False


def _stream_item(sse: ServerSentEvent) -> StreamItem:
    seq = int(sse.id) if sse.id.isdigit() else -1
    try:
        data = json.loads(sse.data)
    except ValueError:
        data = {"text": sse.data}
    if not isinstance(data, dict):
        data = {"value": data}
    return StreamItem(kind=sse.event, seq=seq, data=data)
