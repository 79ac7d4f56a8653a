"""alallo: fine-tuning jobs as Trio actors, watched live.

The embedding API is :class:`Runtime` with :class:`Settings`; the HTTP
clients are :class:`Client` and :class:`AsyncClient` (from
:mod:`alallo.client`); the command line is ``alallo``.

The names below are loaded on first use (PEP 562): a trainer process
(``python -m alallo.trainers.simulated``) and every CLI command import this
package, and neither needs the runtime, SQLAlchemy or Starlette, so they
start in a fraction of the time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._async_client import AsyncClient as AsyncClient
    from ._errors import AlalloError as AlalloError
    from ._errors import Conflict as Conflict
    from ._errors import InvalidFile as InvalidFile
    from ._errors import InvalidRequest as InvalidRequest
    from ._errors import InvalidTransition as InvalidTransition
    from ._errors import NotFound as NotFound
    from ._errors import Unauthorized as Unauthorized
    from ._job import Event as Event
    from ._job import Job as Job
    from ._job import LogLine as LogLine
    from ._runtime import LOCAL_ACCOUNT as LOCAL_ACCOUNT
    from ._runtime import Runtime as Runtime
    from ._spec import JobSpec as JobSpec
    from ._status import EventType as EventType
    from ._status import JobStatus as JobStatus
    from ._status import Message as Message
    from .client import Client as Client
    from .settings import Settings as Settings

_ORIGINS = {
    "LOCAL_ACCOUNT": "._runtime",
    "AlalloError": "._errors",
    "AsyncClient": ".client",
    "Client": ".client",
    "Conflict": "._errors",
    "Event": "._job",
    "EventType": "._status",
    "InvalidFile": "._errors",
    "InvalidRequest": "._errors",
    "InvalidTransition": "._errors",
    "Job": "._job",
    "JobSpec": "._spec",
    "JobStatus": "._status",
    "LogLine": "._job",
    "Message": "._status",
    "NotFound": "._errors",
    "Runtime": "._runtime",
    "Settings": ".settings",
    "Unauthorized": "._errors",
}

__all__ = [
    "AlalloError",
    "AsyncClient",
    "Client",
    "Conflict",
    "Event",
    "EventType",
    "InvalidFile",
    "InvalidRequest",
    "InvalidTransition",
    "Job",
    "JobSpec",
    "JobStatus",
    "LOCAL_ACCOUNT",
    "LogLine",
    "Message",
    "NotFound",
    "Runtime",
    "Settings",
    "Unauthorized",
]


def __getattr__(name: str) -> Any:
    origin = _ORIGINS.get(name)
    if origin is None:
        raise AttributeError(f"module 'alallo' has no attribute {name!r}")
    value = getattr(importlib.import_module(origin, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
