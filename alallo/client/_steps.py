"""The steps of a call, free of I/O: what :class:`~alallo.client.Client` and
:class:`~alallo.client.AsyncClient` are asked to do for it.

Each call of API.md is written once (:mod:`alallo.client._calls`) as a
generator that yields steps and is sent what each came to: an :data:`Op`
ends with its result (``get_job``), a :data:`Feed` gives items as it goes
(``iter_events``, ``watch``). A client drives one with its own HTTPX client,
blocking or async: it performs :class:`Send`, :class:`Connect`,
:class:`NextFrame` and :class:`Wait`, passes on each :class:`Give`, and
throws an ``httpx.TransportError`` met on the way (``httpx_sse.SSEError``,
an answer that is no event stream, is one) into the generator, which
decides what it means. So the paging, the
errors and the reconnection rules of ``watch`` are the same for both
clients, and only sending and waiting differ ("sans-I/O", as h11 and
httpcore's state machines are written).

A stream lasts from its :class:`Connect` to the next step that is not a
:class:`NextFrame` or a :class:`Give`, or to the end of the generator: the
driver closes it then.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

import httpx

__all__ = ["Connect", "Feed", "Give", "NextFrame", "Op", "Send", "Step", "Wait", "returning"]

T = TypeVar("T")


@dataclass(frozen=True)
class Send:
    """Send a request; come back with the whole answer (an ``httpx.Response``, read)."""

    method: str
    path: str
    headers: Mapping[str, str]
    params: Mapping[str, str | int] | None = None
    json: Any = None
    files: Any = None
    """As HTTPX takes them: ``{"file": (name, open_file, content_type)}``."""
    data: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Connect:
    """Open an event stream with a GET; come back with the answer, its body read only if
    it is an error (the stream stays open for :class:`NextFrame`)."""

    path: str
    headers: Mapping[str, str]
    timeout: httpx.Timeout


@dataclass(frozen=True)
class NextFrame:
    """Read the open stream's next frame; come back with the ``ServerSentEvent``, or None
    at the end of the body."""


@dataclass(frozen=True)
class Wait:
    """Sleep, the blocking way or the async one; come back with None."""

    seconds: float


@dataclass(frozen=True)
class Give(Generic[T]):
    """An item for the caller (a page's entry, a stream's item); come back with None."""

    item: T


Step: TypeAlias = Send | Connect | NextFrame | Wait
"""What a driver performs."""
Op: TypeAlias = Generator[Step, Any, T]
"""A call that ends with one result."""
Feed: TypeAlias = Generator[Step | Give[T], Any, None]
"""A call that gives items as it goes."""


def returning(op: Op[T]) -> Feed[T]:
    """``op`` as a feed whose one item is its result: a driver of feeds runs both."""
    yield Give((yield from op))
