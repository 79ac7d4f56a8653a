"""What the server and its clients agree on: the JSON shape of every answer (API.md in code).

Imports nothing of alallo, so :mod:`alallo.client` uses it without the server; the server
builds its answers as these types (:mod:`alallo.runtime._views`) and ``/openapi.json`` is
generated from them (:mod:`gateway._openapi`).
"""

from __future__ import annotations

from ._job_shapes import (
    Checkpoint,
    CheckpointList,
    CheckpointMetrics,
    FineTuningJob,
    JobEvent,
    JobEventList,
    JobList,
    JobStatusName,
    LatestCheckpoint,
    LogPage,
    Price,
    PriceRange,
    Progress,
    TrainingLogLine,
)
from ._shapes import (
    Capacity,
    CapacityNode,
    DashboardLink,
    ErrorBody,
    Estimate,
    EstimatePlan,
    EstimatePrice,
    FileDeleted,
    FileList,
    FileObject,
    Health,
    JobError,
    Model,
    ModelDeleted,
    ModelList,
    NodeDrain,
    Page,
    TimeRange,
    Trainer,
    TrainerList,
)

__all__ = [
    "Capacity",
    "CapacityNode",
    "Checkpoint",
    "CheckpointList",
    "CheckpointMetrics",
    "DashboardLink",
    "ErrorBody",
    "Estimate",
    "EstimatePlan",
    "EstimatePrice",
    "FileDeleted",
    "ModelDeleted",
    "FileList",
    "FileObject",
    "FineTuningJob",
    "Health",
    "JobError",
    "JobEvent",
    "JobEventList",
    "JobList",
    "JobStatusName",
    "LatestCheckpoint",
    "LogPage",
    "Model",
    "ModelList",
    "NodeDrain",
    "Page",
    "Price",
    "PriceRange",
    "Progress",
    "TimeRange",
    "Trainer",
    "TrainerList",
    "TrainingLogLine",
]
