"""The engine: :class:`Runtime`, a façade over its parts (accounts, training files, planning,
jobs, streams, the starter and relocation), each job's actor with the narrow
:class:`~alallo.runtime._job_context.JobContext` it gets, the event bus, the views (domain objects as the API's JSON,
:mod:`alallo.runtime._views`), and what tells the operator. ``docs/architecture.md`` draws it.

Names load on first use (PEP 562), so importing one module of the wing does not
import the rest of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alallo._lazy import lazy_names

if TYPE_CHECKING:
    from . import _views as views
    from ._accounts import LOCAL_ACCOUNT as LOCAL_ACCOUNT
    from ._bus import EventBus as EventBus
    from ._bus import Item as Item
    from ._bus import Lagged as Lagged
    from ._checkpoint_list import list_checkpoints as list_checkpoints
    from ._checkpoint_models import MAX_PERMISSIONS_PAGE as MAX_PERMISSIONS_PAGE
    from ._checkpoint_models import ShareRequest as ShareRequest
    from ._event_list import list_job_events as list_job_events
    from ._graders import GraderRuns as GraderRuns
    from ._logging import configure_logging as configure_logging
    from ._model_ids import parse_model_id as parse_model_id
    from ._runtime import Runtime as Runtime
    from ._together import TogetherEstimateRequest as TogetherEstimateRequest
    from ._together import together_estimate as together_estimate

_ORIGINS: dict[str, tuple[str, str | None]] = {
    "EventBus": ("._bus", "EventBus"),
    "GraderRuns": ("._graders", "GraderRuns"),
    "Item": ("._bus", "Item"),
    "LOCAL_ACCOUNT": ("._accounts", "LOCAL_ACCOUNT"),
    "Lagged": ("._bus", "Lagged"),
    "MAX_PERMISSIONS_PAGE": ("._checkpoint_models", "MAX_PERMISSIONS_PAGE"),
    "Runtime": ("._runtime", "Runtime"),
    "ShareRequest": ("._checkpoint_models", "ShareRequest"),
    "configure_logging": ("._logging", "configure_logging"),
    "list_checkpoints": ("._checkpoint_list", "list_checkpoints"),
    "list_job_events": ("._event_list", "list_job_events"),
    "parse_model_id": ("._model_ids", "parse_model_id"),
    "TogetherEstimateRequest": ("._together", "TogetherEstimateRequest"),
    "together_estimate": ("._together", "together_estimate"),
    "views": ("._views", None),
}
"""Each public name: the module it comes from, and its name there (None: the module)."""


__all__ = ["LOCAL_ACCOUNT", "MAX_PERMISSIONS_PAGE", "EventBus", "GraderRuns",
           "Item", "Lagged", "Runtime", "ShareRequest", "TogetherEstimateRequest", "configure_logging", "list_checkpoints",
           "list_job_events", "parse_model_id", "together_estimate", "views"]

__getattr__, __dir__ = lazy_names(__name__, _ORIGINS, __all__)
