"""alallo: fine-tuning jobs as Trio actors, watched live.

The embedding API is :class:`Runtime` with :class:`Settings`; the HTTP
clients are :class:`Client` and :class:`AsyncClient` (from
:mod:`alallo.client`), whose results are typed by the TypedDicts of
:mod:`alallo._client_types` (:class:`FineTuningJob`, :class:`FileObject`,
:class:`Page`...); the command line is ``alallo``.

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
    from ._client_types import Capacity as Capacity
    from ._client_types import CapacityNode as CapacityNode
    from ._client_types import Checkpoint as Checkpoint
    from ._client_types import CheckpointList as CheckpointList
    from ._client_types import CheckpointMetrics as CheckpointMetrics
    from ._client_types import DashboardLink as DashboardLink
    from ._client_types import Estimate as Estimate
    from ._client_types import EstimatePlan as EstimatePlan
    from ._client_types import EstimatePrice as EstimatePrice
    from ._client_types import FileDeleted as FileDeleted
    from ._client_types import FileList as FileList
    from ._client_types import FileObject as FileObject
    from ._client_types import FineTuningJob as FineTuningJob
    from ._client_types import Health as Health
    from ._client_types import JobError as JobError
    from ._client_types import JobEvent as JobEvent
    from ._client_types import JobEventList as JobEventList
    from ._client_types import JobList as JobList
    from ._client_types import LatestCheckpoint as LatestCheckpoint
    from ._client_types import LogPage as LogPage
    from ._client_types import Model as Model
    from ._client_types import ModelList as ModelList
    from ._client_types import NodeDrain as NodeDrain
    from ._client_types import Page as Page
    from ._client_types import Price as Price
    from ._client_types import PriceRange as PriceRange
    from ._client_types import Progress as Progress
    from ._client_types import TimeRange as TimeRange
    from ._client_types import Trainer as Trainer
    from ._client_types import TrainerList as TrainerList
    from ._client_types import TrainingLogLine as TrainingLogLine
    from ._errors import AlalloError as AlalloError
    from ._errors import Conflict as Conflict
    from ._errors import Forbidden as Forbidden
    from ._errors import InvalidFile as InvalidFile
    from ._errors import InvalidRequest as InvalidRequest
    from ._errors import InvalidTransition as InvalidTransition
    from ._errors import NotFound as NotFound
    from ._errors import SettingError as SettingError
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
    "Capacity": "._client_types",
    "CapacityNode": "._client_types",
    "Checkpoint": "._client_types",
    "CheckpointList": "._client_types",
    "CheckpointMetrics": "._client_types",
    "Client": ".client",
    "Conflict": "._errors",
    "DashboardLink": "._client_types",
    "Estimate": "._client_types",
    "EstimatePlan": "._client_types",
    "EstimatePrice": "._client_types",
    "Event": "._job",
    "EventType": "._status",
    "FileDeleted": "._client_types",
    "FileList": "._client_types",
    "FileObject": "._client_types",
    "FineTuningJob": "._client_types",
    "Forbidden": "._errors",
    "Health": "._client_types",
    "InvalidFile": "._errors",
    "InvalidRequest": "._errors",
    "InvalidTransition": "._errors",
    "Job": "._job",
    "JobError": "._client_types",
    "JobEvent": "._client_types",
    "JobEventList": "._client_types",
    "JobList": "._client_types",
    "JobSpec": "._spec",
    "JobStatus": "._status",
    "LatestCheckpoint": "._client_types",
    "LogLine": "._job",
    "LogPage": "._client_types",
    "Message": "._status",
    "Model": "._client_types",
    "ModelList": "._client_types",
    "NodeDrain": "._client_types",
    "NotFound": "._errors",
    "Page": "._client_types",
    "Price": "._client_types",
    "PriceRange": "._client_types",
    "Progress": "._client_types",
    "Runtime": "._runtime",
    "SettingError": "._errors",
    "Settings": ".settings",
    "TimeRange": "._client_types",
    "Trainer": "._client_types",
    "TrainerList": "._client_types",
    "TrainingLogLine": "._client_types",
    "Unauthorized": "._errors",
}

__all__ = [
    "AlalloError",
    "AsyncClient",
    "Capacity",
    "CapacityNode",
    "Checkpoint",
    "CheckpointList",
    "CheckpointMetrics",
    "Client",
    "Conflict",
    "DashboardLink",
    "Estimate",
    "EstimatePlan",
    "EstimatePrice",
    "Event",
    "EventType",
    "FileDeleted",
    "FileList",
    "FileObject",
    "FineTuningJob",
    "Forbidden",
    "Health",
    "InvalidFile",
    "InvalidRequest",
    "InvalidTransition",
    "Job",
    "JobError",
    "JobEvent",
    "JobEventList",
    "JobList",
    "JobSpec",
    "JobStatus",
    "LOCAL_ACCOUNT",
    "LatestCheckpoint",
    "LogLine",
    "LogPage",
    "Message",
    "Model",
    "ModelList",
    "NodeDrain",
    "NotFound",
    "Page",
    "Price",
    "PriceRange",
    "Progress",
    "Runtime",
    "SettingError",
    "Settings",
    "TimeRange",
    "Trainer",
    "TrainerList",
    "TrainingLogLine",
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
