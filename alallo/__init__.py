"""alallo: fine-tuning jobs as Trio actors, watched live.

The embedding API is :class:`Runtime` with :class:`Settings`; the HTTP
clients are :class:`Client` and :class:`AsyncClient` (from
:mod:`alallo.client`), whose results are typed by the TypedDicts of
:mod:`alallo.client._types` (:class:`FineTuningJob`, :class:`FileObject`,
:class:`Page`...); the command line is ``alallo``.

The names below are loaded on first use (PEP 562): a trainer process
(``python -m alallo.trainers.simulated``) and every CLI command import this
package, and neither needs the runtime, SQLAlchemy or Starlette, so they
start in a fraction of the time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_names

if TYPE_CHECKING:
    from ._errors import AlalloError as AlalloError
    from ._errors import Conflict as Conflict
    from ._errors import Forbidden as Forbidden
    from ._errors import InvalidFile as InvalidFile
    from ._errors import InvalidRequest as InvalidRequest
    from ._errors import InvalidTransition as InvalidTransition
    from ._errors import NotFound as NotFound
    from ._errors import SettingError as SettingError
    from ._errors import Unauthorized as Unauthorized
    from ._status import EventType as EventType
    from ._status import JobStatus as JobStatus
    from ._status import Message as Message
    from .client import Client as Client
    from .client._async import AsyncClient as AsyncClient
    from .client._types import Capacity as Capacity
    from .client._types import CapacityNode as CapacityNode
    from .client._types import Checkpoint as Checkpoint
    from .client._types import CheckpointList as CheckpointList
    from .client._types import CheckpointMetrics as CheckpointMetrics
    from .client._types import DashboardLink as DashboardLink
    from .client._types import Estimate as Estimate
    from .client._types import EstimatePlan as EstimatePlan
    from .client._types import EstimatePrice as EstimatePrice
    from .client._types import FileDeleted as FileDeleted
    from .client._types import FileList as FileList
    from .client._types import FileObject as FileObject
    from .client._types import FineTuningJob as FineTuningJob
    from .client._types import Health as Health
    from .client._types import JobError as JobError
    from .client._types import JobEvent as JobEvent
    from .client._types import JobEventList as JobEventList
    from .client._types import JobList as JobList
    from .client._types import LatestCheckpoint as LatestCheckpoint
    from .client._types import LogPage as LogPage
    from .client._types import Model as Model
    from .client._types import ModelList as ModelList
    from .client._types import NodeDrain as NodeDrain
    from .client._types import Page as Page
    from .client._types import Price as Price
    from .client._types import PriceRange as PriceRange
    from .client._types import Progress as Progress
    from .client._types import TimeRange as TimeRange
    from .client._types import Trainer as Trainer
    from .client._types import TrainerList as TrainerList
    from .client._types import TrainingLogLine as TrainingLogLine
    from .jobs import Event as Event
    from .jobs import Job as Job
    from .jobs import JobSpec as JobSpec
    from .jobs import LogLine as LogLine
    from .runtime import LOCAL_ACCOUNT as LOCAL_ACCOUNT
    from .runtime import Runtime as Runtime
    from .settings import Settings as Settings

_ORIGINS = {
    "LOCAL_ACCOUNT": ".runtime",
    "AlalloError": "._errors",
    "AsyncClient": ".client",
    "Capacity": ".client._types",
    "CapacityNode": ".client._types",
    "Checkpoint": ".client._types",
    "CheckpointList": ".client._types",
    "CheckpointMetrics": ".client._types",
    "Client": ".client",
    "Conflict": "._errors",
    "DashboardLink": ".client._types",
    "Estimate": ".client._types",
    "EstimatePlan": ".client._types",
    "EstimatePrice": ".client._types",
    "Event": ".jobs",
    "EventType": "._status",
    "FileDeleted": ".client._types",
    "FileList": ".client._types",
    "FileObject": ".client._types",
    "FineTuningJob": ".client._types",
    "Forbidden": "._errors",
    "Health": ".client._types",
    "InvalidFile": "._errors",
    "InvalidRequest": "._errors",
    "InvalidTransition": "._errors",
    "Job": ".jobs",
    "JobError": ".client._types",
    "JobEvent": ".client._types",
    "JobEventList": ".client._types",
    "JobList": ".client._types",
    "JobSpec": ".jobs",
    "JobStatus": "._status",
    "LatestCheckpoint": ".client._types",
    "LogLine": ".jobs",
    "LogPage": ".client._types",
    "Message": "._status",
    "Model": ".client._types",
    "ModelList": ".client._types",
    "NodeDrain": ".client._types",
    "NotFound": "._errors",
    "Page": ".client._types",
    "Price": ".client._types",
    "PriceRange": ".client._types",
    "Progress": ".client._types",
    "Runtime": ".runtime",
    "SettingError": "._errors",
    "Settings": ".settings",
    "TimeRange": ".client._types",
    "Trainer": ".client._types",
    "TrainerList": ".client._types",
    "TrainingLogLine": ".client._types",
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


__getattr__, __dir__ = lazy_names(
    __name__, {name: (module, name) for name, module in _ORIGINS.items()}, __all__)
