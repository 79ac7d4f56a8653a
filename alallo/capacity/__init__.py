"""Where jobs can run: the capacity pool (nodes and their devices), the model catalogue, the
plans a job has on the pool (memory, devices, step time, price) and the scheduler actor
that owns the queue and grants placements.

- :mod:`~alallo.capacity._pool`: :class:`NodeSpec`, :class:`Pool`, placements.
- :mod:`~alallo.capacity._catalogue`: the models a job may name.
- :mod:`~alallo.capacity._hardware`: this machine's GPUs (NVML) and the local node.
- :mod:`~alallo.capacity._plans`: :func:`plan_options` and why a job cannot run.
- :mod:`~alallo.capacity._scheduler`: the :class:`Scheduler` actor and its messages.

Names load on first use (PEP 562), so importing one module of the wing does not
import the rest of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alallo._lazy import lazy_names

if TYPE_CHECKING:
    from ._catalogue import HUB_ID as HUB_ID
    from ._catalogue import TINY_GPT2 as TINY_GPT2
    from ._catalogue import TINY_LLAMA as TINY_LLAMA
    from ._catalogue import TINY_MODELS as TINY_MODELS
    from ._catalogue import Catalogue as Catalogue
    from ._catalogue import CatalogueModel as CatalogueModel
    from ._hardware import UNKNOWN_GPU_TFLOPS as UNKNOWN_GPU_TFLOPS
    from ._hardware import Gpu as Gpu
    from ._hardware import declared_problem as declared_problem
    from ._hardware import detect_gpus as detect_gpus
    from ._hardware import local_node as local_node
    from ._hub import find_on_hub as find_on_hub
    from ._hub import hub_reachable as hub_reachable
    from ._plans import PlanOptions as PlanOptions
    from ._plans import plan_options as plan_options
    from ._plans import tokens_per_example as tokens_per_example
    from ._pool import Node as Node
    from ._pool import NodeSpec as NodeSpec
    from ._pool import Placement as Placement
    from ._pool import Pool as Pool
    from ._scheduler import Acquire as Acquire
    from ._scheduler import Drain as Drain
    from ._scheduler import FollowNodes as FollowNodes
    from ._scheduler import Grant as Grant
    from ._scheduler import QueueSnapshot as QueueSnapshot
    from ._scheduler import Release as Release
    from ._scheduler import Scheduler as Scheduler
    from ._scheduler import SchedulerMessage as SchedulerMessage
    from ._scheduler import WaitEstimate as WaitEstimate

_ORIGINS: dict[str, tuple[str, str | None]] = {
    "Acquire": ("._scheduler", "Acquire"),
    "HUB_ID": ("._catalogue", "HUB_ID"),
    "Catalogue": ("._catalogue", "Catalogue"),
    "CatalogueModel": ("._catalogue", "CatalogueModel"),
    "Drain": ("._scheduler", "Drain"),
    "FollowNodes": ("._scheduler", "FollowNodes"),
    "Gpu": ("._hardware", "Gpu"),
    "UNKNOWN_GPU_TFLOPS": ("._hardware", "UNKNOWN_GPU_TFLOPS"),
    "Grant": ("._scheduler", "Grant"),
    "Node": ("._pool", "Node"),
    "NodeSpec": ("._pool", "NodeSpec"),
    "Placement": ("._pool", "Placement"),
    "PlanOptions": ("._plans", "PlanOptions"),
    "Pool": ("._pool", "Pool"),
    "QueueSnapshot": ("._scheduler", "QueueSnapshot"),
    "Release": ("._scheduler", "Release"),
    "Scheduler": ("._scheduler", "Scheduler"),
    "SchedulerMessage": ("._scheduler", "SchedulerMessage"),
    "TINY_GPT2": ("._catalogue", 'TINY_GPT2'),
    "TINY_LLAMA": ("._catalogue", 'TINY_LLAMA'),
    "TINY_MODELS": ("._catalogue", 'TINY_MODELS'),
    "WaitEstimate": ("._scheduler", "WaitEstimate"),
    "declared_problem": ("._hardware", "declared_problem"),
    "find_on_hub": ("._hub", "find_on_hub"),
    "hub_reachable": ("._hub", "hub_reachable"),
    "detect_gpus": ("._hardware", "detect_gpus"),
    "local_node": ("._hardware", "local_node"),
    "plan_options": ("._plans", "plan_options"),
    "tokens_per_example": ("._plans", "tokens_per_example"),
}
"""Each public name: the module it comes from, and its name there (None: the module)."""


__all__ = ["HUB_ID", "TINY_GPT2", "TINY_LLAMA", "TINY_MODELS", "UNKNOWN_GPU_TFLOPS", "Acquire", "Catalogue", "CatalogueModel",
           "Drain", "FollowNodes", "Gpu", "Grant", "Node", "NodeSpec", "Placement",
           "PlanOptions", "Pool", "QueueSnapshot", "Release", "Scheduler",
           "SchedulerMessage", "WaitEstimate", "declared_problem", "detect_gpus",
           "find_on_hub", "hub_reachable", "local_node", "plan_options", "tokens_per_example"]

__getattr__, __dir__ = lazy_names(__name__, _ORIGINS, __all__)
