"""alallo: fine-tuning jobs as Trio actors, watched live.

The embedding API is :class:`Runtime` with :class:`Settings`; the HTTP
clients are :class:`Client` and :class:`AsyncClient` (from
:mod:`alallo.client`), whose results are typed by the TypedDicts of
:mod:`alallo.api` (:class:`FineTuningJob`, :class:`FileObject`,
:class:`Page`...); the command line is ``alallo``. Every error is an
:class:`AlalloError`, one tree for the runtime and the clients
(:mod:`alallo._errors`): a refusal is an :class:`ApiError` of the same class
embedded or over HTTP (:class:`NotFound`, :class:`InvalidRequest`...).

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
    from ._errors import ApiError as ApiError
    from ._errors import ClientError as ClientError
    from ._errors import Conflict as Conflict
    from ._errors import Forbidden as Forbidden
    from ._errors import InvalidFile as InvalidFile
    from ._errors import InvalidRequest as InvalidRequest
    from ._errors import InvalidTransition as InvalidTransition
    from ._errors import NotFound as NotFound
    from ._errors import SettingError as SettingError
    from ._errors import Unauthorized as Unauthorized
    from ._errors import Unavailable as Unavailable
    from ._status import EventType as EventType
    from ._status import JobStatus as JobStatus
    from ._status import Message as Message
    from .api import Account as Account
    from .api import AccountSpend as AccountSpend
    from .api import AssistantMessage as AssistantMessage
    from .api import Capacity as Capacity
    from .api import CapacityNode as CapacityNode
    from .api import ChatChoice as ChatChoice
    from .api import ChatChunkChoice as ChatChunkChoice
    from .api import ChatCompletion as ChatCompletion
    from .api import ChatCompletionChunk as ChatCompletionChunk
    from .api import Checkpoint as Checkpoint
    from .api import CheckpointList as CheckpointList
    from .api import CheckpointMetrics as CheckpointMetrics
    from .api import CheckpointPermission as CheckpointPermission
    from .api import CheckpointPermissionDeleted as CheckpointPermissionDeleted
    from .api import GraderRun as GraderRun
    from .api import GraderRunErrors as GraderRunErrors
    from .api import GraderRunMetadata as GraderRunMetadata
    from .api import GraderValidated as GraderValidated
    from .api import CheckpointPermissionList as CheckpointPermissionList
    from .api import ChunkDelta as ChunkDelta
    from .api import DashboardLink as DashboardLink
    from .api import ErrorDetail as ErrorDetail
    from .api import Estimate as Estimate
    from .api import EstimatePlan as EstimatePlan
    from .api import EstimatePrice as EstimatePrice
    from .api import FileDeleted as FileDeleted
    from .api import FileList as FileList
    from .api import FileObject as FileObject
    from .api import FineTuningJob as FineTuningJob
    from .api import Health as Health
    from .api import JobError as JobError
    from .api import JobEvent as JobEvent
    from .api import JobEventList as JobEventList
    from .api import JobList as JobList
    from .api import JobMethod as JobMethod
    from .api import JobMethodSettings as JobMethodSettings
    from .api import JobMetrics as JobMetrics
    from .api import LatestCheckpoint as LatestCheckpoint
    from .api import LogPage as LogPage
    from .api import MethodHyperparameters as MethodHyperparameters
    from .api import MetricsList as MetricsList
    from .api import MetricsReport as MetricsReport
    from .api import Model as Model
    from .api import ModelDeleted as ModelDeleted
    from .api import ModelList as ModelList
    from .api import NodeDrain as NodeDrain
    from .api import Page as Page
    from .api import Price as Price
    from .api import PriceRange as PriceRange
    from .api import Progress as Progress
    from .api import StreamDone as StreamDone
    from .api import StreamError as StreamError
    from .api import TextChoice as TextChoice
    from .api import TextChunkChoice as TextChunkChoice
    from .api import TextCompletion as TextCompletion
    from .api import TextCompletionChunk as TextCompletionChunk
    from .api import TimeRange as TimeRange
    from .api import TogetherPriceEstimate as TogetherPriceEstimate
    from .api import Trainer as Trainer
    from .api import TrainerList as TrainerList
    from .api import TrainingLogLine as TrainingLogLine
    from .api import Usage as Usage
    from .client import Client as Client
    from .client._async import AsyncClient as AsyncClient
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
    "ApiError": "._errors",
    "AsyncClient": ".client",
    "Capacity": ".api",
    "Account": ".api",
    "AccountSpend": ".api",
    "AssistantMessage": ".api",
    "ChatChoice": ".api",
    "ChatCompletion": ".api",
    "TextChoice": ".api",
    "TextCompletion": ".api",
    "Usage": ".api",
    "CapacityNode": ".api",
    "ChatChunkChoice": ".api",
    "ChatCompletionChunk": ".api",
    "Checkpoint": ".api",
    "CheckpointList": ".api",
    "CheckpointMetrics": ".api",
    "CheckpointPermission": ".api",
    "CheckpointPermissionDeleted": ".api",
    "GraderRun": ".api",
    "GraderRunErrors": ".api",
    "GraderRunMetadata": ".api",
    "GraderValidated": ".api",
    "CheckpointPermissionList": ".api",
    "ChunkDelta": ".api",
    "Client": ".client",
    "ClientError": "._errors",
    "Conflict": "._errors",
    "DashboardLink": ".api",
    "ErrorDetail": ".api",
    "Estimate": ".api",
    "EstimatePlan": ".api",
    "EstimatePrice": ".api",
    "Event": ".jobs",
    "EventType": "._status",
    "FileDeleted": ".api",
    "ModelDeleted": ".api",
    "FileList": ".api",
    "FileObject": ".api",
    "FineTuningJob": ".api",
    "Forbidden": "._errors",
    "Health": ".api",
    "InvalidFile": "._errors",
    "InvalidRequest": "._errors",
    "InvalidTransition": "._errors",
    "Job": ".jobs",
    "JobError": ".api",
    "JobEvent": ".api",
    "JobEventList": ".api",
    "JobList": ".api",
    "JobMethod": ".api",
    "JobMethodSettings": ".api",
    "MethodHyperparameters": ".api",
    "JobMetrics": ".api",
    "JobSpec": ".jobs",
    "JobStatus": "._status",
    "LatestCheckpoint": ".api",
    "LogLine": ".jobs",
    "LogPage": ".api",
    "MetricsList": ".api",
    "MetricsReport": ".api",
    "Message": "._status",
    "Model": ".api",
    "ModelList": ".api",
    "NodeDrain": ".api",
    "NotFound": "._errors",
    "Page": ".api",
    "Price": ".api",
    "PriceRange": ".api",
    "Progress": ".api",
    "StreamDone": ".api",
    "StreamError": ".api",
    "TextChunkChoice": ".api",
    "TextCompletionChunk": ".api",
    "Runtime": ".runtime",
    "SettingError": "._errors",
    "Settings": ".settings",
    "TimeRange": ".api",
    "TogetherPriceEstimate": ".api",
    "Trainer": ".api",
    "TrainerList": ".api",
    "TrainingLogLine": ".api",
    "Unauthorized": "._errors",
    "Unavailable": "._errors",
}

__all__ = [
    "Account",
    "AccountSpend",
    "AlalloError",
    "ApiError",
    "AssistantMessage",
    "AsyncClient",
    "Capacity",
    "CapacityNode",
    "ChatChoice",
    "ChatChunkChoice",
    "ChatCompletion",
    "ChatCompletionChunk",
    "Checkpoint",
    "CheckpointList",
    "CheckpointMetrics",
    "CheckpointPermission",
    "CheckpointPermissionDeleted",
    "CheckpointPermissionList",
    "ChunkDelta",
    "Client",
    "ClientError",
    "Conflict",
    "DashboardLink",
    "ErrorDetail",
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
    "GraderRun",
    "GraderRunErrors",
    "GraderRunMetadata",
    "GraderValidated",
    "Health",
    "InvalidFile",
    "InvalidRequest",
    "InvalidTransition",
    "Job",
    "JobError",
    "JobEvent",
    "JobEventList",
    "JobList",
    "JobMethod",
    "JobMethodSettings",
    "JobMetrics",
    "JobSpec",
    "JobStatus",
    "LOCAL_ACCOUNT",
    "LatestCheckpoint",
    "LogLine",
    "LogPage",
    "Message",
    "MethodHyperparameters",
    "MetricsList",
    "MetricsReport",
    "Model",
    "ModelDeleted",
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
    "StreamDone",
    "StreamError",
    "TextChoice",
    "TextChunkChoice",
    "TextCompletion",
    "TextCompletionChunk",
    "TimeRange",
    "TogetherPriceEstimate",
    "Trainer",
    "TrainerList",
    "TrainingLogLine",
    "Unauthorized",
    "Unavailable",
    "Usage",
]


__getattr__, __dir__ = lazy_names(
    __name__, {name: (module, name) for name, module in _ORIGINS.items()}, __all__)
