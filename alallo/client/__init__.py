"""Python clients for alallo's HTTP API (API.md): :class:`Client` and :class:`AsyncClient`.

Every method returns the JSON object of API.md, typed as one of the
:class:`typing.TypedDict` of :mod:`alallo.api` (``FineTuningJob``,
``FileObject``, ``JobEvent``, ``Checkpoint``, ``TrainingLogLine``,
``Estimate``, ...; all exported from :mod:`alallo`), so an editor completes
its keys and a type checker catches a misspelt one. At runtime each result
is still the plain ``dict`` the JSON made: code that treated results as
dicts keeps working, and a field the server adds before the types name it
is there to read.

Failures are :class:`ApiError` (the server said no), raised as the class of
:mod:`alallo` the answer names (a 404 is an :class:`alallo.NotFound`, the
same class the runtime raises embedded), or :class:`ClientError` (no key, no
server); both are :class:`alallo.AlalloError`, whose tree
:mod:`alallo._errors` draws. ``AlalloClientError``, the clients' root
before the one tree, is another name of :class:`alallo.AlalloError`.

The two clients have the same methods, one blocking, one ``async``. STYLE.md
asks for async code written once with a thin ``trio.run`` face; that cannot
hold a connection pool or a stream open between calls (each ``trio.run`` is
a new event loop), and :class:`AsyncClient` must also run under asyncio. So
each call is written once, free of I/O, as a generator of steps
(:mod:`alallo.client._calls`, :mod:`alallo.client._steps`): the request, what
the answer means, the pages of a list, the reconnection rules of ``watch``
(:mod:`alallo.client._stream`). Each client is a thin face that performs
those steps with its own HTTPX client, blocking or async.
"""

from __future__ import annotations

from alallo._errors import AlalloError, ApiError, ClientError
from alallo.client._async import AsyncClient
from alallo.client._calls import DEFAULT_TIMEOUT_S, DEFAULT_URL
from alallo.client._spec import HyperparameterFields, JobSpecFields
from alallo.client._stream import StreamItem
from alallo.client._sync import Client

AlalloClientError = AlalloError
"""The clients' root error: another name of :class:`alallo.AlalloError`, kept so that
``except AlalloClientError`` goes on catching every failed call."""

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_URL",
    "AlalloClientError",
    "ApiError",
    "AsyncClient",
    "Client",
    "ClientError",
    "HyperparameterFields",
    "JobSpecFields",
    "StreamItem",
]
