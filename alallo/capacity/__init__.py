"""Where jobs can run: the capacity pool (nodes and their devices), the model catalogue, the
plans a job has on the pool (memory, devices, step time, price) and the scheduler actor
that owns the queue and grants placements.

- :mod:`~alallo.capacity._pool`: :class:`NodeSpec`, :class:`Pool`, placements.
- :mod:`~alallo.capacity._catalogue`: the models a job may name.
- :mod:`~alallo.capacity._plans`: :func:`plan_options` and why a job cannot run.
- :mod:`~alallo.capacity._scheduler`: the :class:`Scheduler` actor and its messages.
"""

from __future__ import annotations

from alallo.capacity._catalogue import TINY_GPT2, Catalogue, CatalogueModel
from alallo.capacity._plans import PlanOptions, plan_options, tokens_per_example
from alallo.capacity._pool import Node, NodeSpec, Placement, Pool
from alallo.capacity._scheduler import (
                                        Acquire,
                                        Drain,
                                        Grant,
                                        QueueSnapshot,
                                        Release,
                                        Scheduler,
                                        SchedulerMessage,
                                        WaitEstimate,
)

__all__ = ["TINY_GPT2", "Acquire", "Catalogue", "CatalogueModel", "Drain", "Grant", "Node",
           "NodeSpec", "Placement", "PlanOptions", "Pool", "QueueSnapshot", "Release",
           "Scheduler", "SchedulerMessage", "WaitEstimate", "plan_options", "tokens_per_example"]
