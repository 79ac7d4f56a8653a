"""The fine-tuning domain, pure: what a job is, what can happen to it, what it costs and how
long it takes. No I/O, no actors, no clock (times come in the inputs), no settings (limits
come in the inputs): DESIGN.md rule 2. Everything else of alallo builds on this wing.

- :mod:`~alallo.jobs._spec`: the job spec a user sends (:class:`JobSpec`, its trainers).
- :mod:`~alallo.jobs._job`: :class:`Job` and the records it makes (:class:`Event`,
  :class:`LogLine`), data only; :mod:`~alallo.jobs._plan`: :class:`Plan`, the device types.
- :mod:`~alallo.jobs._inputs` and :mod:`~alallo.jobs._lifecycle` (``lifecycle`` here): the
  state machine, ``lifecycle.apply(job, input) -> Transition``.
- :mod:`~alallo.jobs._billing`, :mod:`~alallo.jobs._estimate`, :mod:`~alallo.jobs._timeleft`,
  :mod:`~alallo.jobs._timetext`: who pays what, estimates, time left and its text.
- :mod:`~alallo.jobs._training_file`: the JSONL check of an uploaded training file.
"""

from __future__ import annotations

from alallo.jobs import _lifecycle as lifecycle
from alallo.jobs._billing import LedgerEntry, billing_limit_detail
from alallo.jobs._estimate import estimate_price, estimate_time
from alallo.jobs._job import Event, Job, JobError, LogLine, Progress, SavedCheckpoint
from alallo.jobs._plan import DEVICE_TYPES, DeviceType, Plan
from alallo.jobs._spec import CommandTrainer, JobSpec, NamedTrainer, SimulatedTrainer
from alallo.jobs._timeleft import time_left
from alallo.jobs._timetext import TimeRange
from alallo.jobs._training_file import check_jsonl

__all__ = ["DEVICE_TYPES", "CommandTrainer", "DeviceType", "Event", "Job", "JobError", "JobSpec",
           "LedgerEntry", "LogLine", "NamedTrainer", "Plan", "Progress", "SavedCheckpoint",
           "SimulatedTrainer", "TimeRange", "billing_limit_detail", "check_jsonl",
           "estimate_price", "estimate_time", "lifecycle", "time_left"]
