"""The fine-tuning domain, pure: what a job is, what can happen to it, what it costs and how
long it takes. No I/O, no actors, no clock (times come in the inputs), no settings (limits
come in the inputs): DESIGN.md rule 2. Everything else of alallo builds on this wing.

- :mod:`~alallo.jobs._spec`: the job spec a user sends (:class:`JobSpec`, its trainers);
  :mod:`~alallo.jobs._hyperparameters`: its training settings, and how each model of a
  request is checked; :mod:`~alallo.jobs._method_forms`: OpenAI's ``method`` and
  Together's ``training_method`` in it.
- :mod:`~alallo.jobs._job`: :class:`Job` and the records it makes (:class:`Event`,
  :class:`LogLine`), data only; :mod:`~alallo.jobs._metrics`: :class:`MetricsPoint`, the
  metrics series and its CSV; :mod:`~alallo.jobs._plan`: :class:`Plan`, the device types.
- :mod:`~alallo.jobs._inputs` and :mod:`~alallo.jobs._lifecycle` (``lifecycle`` here): the
  state machine, ``lifecycle.apply(job, input) -> Transition``; :mod:`~alallo.jobs._pausing`:
  its pause and resume.
- :mod:`~alallo.jobs._billing`, :mod:`~alallo.jobs._estimate`, :mod:`~alallo.jobs._timeleft`,
  :mod:`~alallo.jobs._timetext`: who pays what, estimates, time left and its text.
- :mod:`~alallo.jobs._training_file`: the JSONL check of an uploaded training file.

Names load on first use (PEP 562), so importing one module of the wing does not
import the rest of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alallo._lazy import lazy_names

if TYPE_CHECKING:
    from . import _lifecycle as lifecycle
    from ._billing import LedgerEntry as LedgerEntry
    from ._billing import billing_limit_detail as billing_limit_detail
    from ._estimate import PRICE_DIGITS as PRICE_DIGITS
    from ._estimate import estimate_price as estimate_price
    from ._estimate import estimate_time as estimate_time
    from ._job import CHECKPOINT_EVERY as CHECKPOINT_EVERY
    from ._job import DEFAULT_BATCH_SIZE as DEFAULT_BATCH_SIZE
    from ._job import DEFAULT_COMPLETION_TOKENS as DEFAULT_COMPLETION_TOKENS
    from ._job import DPO_BETA as DPO_BETA
    from ._job import Event as Event
    from ._job import Job as Job
    from ._job import JobError as JobError
    from ._job import LogLine as LogLine
    from ._job import Progress as Progress
    from ._job import SavedCheckpoint as SavedCheckpoint
    from ._job import StartingWeights as StartingWeights
    from ._job import group_size as group_size
    from ._metadata import METADATA_MAX_KEY_CHARS as METADATA_MAX_KEY_CHARS
    from ._metadata import METADATA_MAX_KEYS as METADATA_MAX_KEYS
    from ._metadata import METADATA_MAX_VALUE_CHARS as METADATA_MAX_VALUE_CHARS
    from ._metadata import check_metadata as check_metadata
    from ._metrics import MetricsPoint as MetricsPoint
    from ._metrics import metrics_csv as metrics_csv
    from ._metrics import series as series
    from ._plan import DEVICE_TYPES as DEVICE_TYPES
    from ._plan import DeviceType as DeviceType
    from ._plan import Plan as Plan
    from ._spec import FAILURE_SWITCHES as FAILURE_SWITCHES
    from ._spec import CommandTrainer as CommandTrainer
    from ._spec import EarlyStopping as EarlyStopping
    from ._spec import JobSpec as JobSpec
    from ._spec import NamedTrainer as NamedTrainer
    from ._spec import SimulatedTrainer as SimulatedTrainer
    from ._timeleft import time_left as time_left
    from ._timetext import TimeRange as TimeRange
    from ._training_file import PREFERENCE_FORMATS as PREFERENCE_FORMATS
    from ._training_file import check_jsonl as check_jsonl

_ORIGINS: dict[str, tuple[str, str | None]] = {
    "CHECKPOINT_EVERY": ("._job", "CHECKPOINT_EVERY"),
    "DEFAULT_BATCH_SIZE": ("._job", "DEFAULT_BATCH_SIZE"),
    "DEFAULT_COMPLETION_TOKENS": ("._job", "DEFAULT_COMPLETION_TOKENS"),
    "group_size": ("._job", "group_size"),
    "DPO_BETA": ("._job", "DPO_BETA"),
    "CommandTrainer": ("._spec", "CommandTrainer"),
    "DEVICE_TYPES": ("._plan", "DEVICE_TYPES"),
    "DeviceType": ("._plan", "DeviceType"),
    "EarlyStopping": ("._spec", "EarlyStopping"),
    "FAILURE_SWITCHES": ("._spec", "FAILURE_SWITCHES"),
    "MetricsPoint": ("._metrics", "MetricsPoint"),
    "metrics_csv": ("._metrics", "metrics_csv"),
    "series": ("._metrics", "series"),
    "Event": ("._job", "Event"),
    "Job": ("._job", "Job"),
    "JobError": ("._job", "JobError"),
    "JobSpec": ("._spec", "JobSpec"),
    "LedgerEntry": ("._billing", "LedgerEntry"),
    "LogLine": ("._job", "LogLine"),
    "NamedTrainer": ("._spec", "NamedTrainer"),
    "Plan": ("._plan", "Plan"),
    "Progress": ("._job", "Progress"),
    "SavedCheckpoint": ("._job", "SavedCheckpoint"),
    "StartingWeights": ("._job", "StartingWeights"),
    "SimulatedTrainer": ("._spec", "SimulatedTrainer"),
    "TimeRange": ("._timetext", "TimeRange"),
    "billing_limit_detail": ("._billing", "billing_limit_detail"),
    "check_jsonl": ("._training_file", "check_jsonl"),
    "check_metadata": ("._metadata", "check_metadata"),
    "METADATA_MAX_KEYS": ("._metadata", "METADATA_MAX_KEYS"),
    "METADATA_MAX_KEY_CHARS": ("._metadata", "METADATA_MAX_KEY_CHARS"),
    "METADATA_MAX_VALUE_CHARS": ("._metadata", "METADATA_MAX_VALUE_CHARS"),
    "PREFERENCE_FORMATS": ("._training_file", "PREFERENCE_FORMATS"),
    "estimate_price": ("._estimate", "estimate_price"),
    "PRICE_DIGITS": ("._estimate", "PRICE_DIGITS"),
    "estimate_time": ("._estimate", "estimate_time"),
    "lifecycle": ("._lifecycle", None),
    "time_left": ("._timeleft", "time_left"),
}
"""Each public name: the module it comes from, and its name there (None: the module)."""


__all__ = ["CHECKPOINT_EVERY", "DEFAULT_BATCH_SIZE", "DEFAULT_COMPLETION_TOKENS", "DEVICE_TYPES", "DPO_BETA", "FAILURE_SWITCHES", "PREFERENCE_FORMATS",
           "METADATA_MAX_KEYS", "METADATA_MAX_KEY_CHARS", "METADATA_MAX_VALUE_CHARS",
           "PRICE_DIGITS",
           "CommandTrainer", "DeviceType",
           "EarlyStopping", "Event", "Job", "JobError", "JobSpec", "LedgerEntry", "LogLine",
           "MetricsPoint", "NamedTrainer", "Plan", "Progress", "SavedCheckpoint",
           "SimulatedTrainer", "StartingWeights", "TimeRange", "billing_limit_detail",
           "check_jsonl", "check_metadata", "estimate_price", "estimate_time", "group_size", "lifecycle", "metrics_csv",
           "series", "time_left"]

__getattr__, __dir__ = lazy_names(__name__, _ORIGINS, __all__)
