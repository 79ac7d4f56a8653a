"""The runtime's pool from the settings and this machine's GPUs (docs/clusters.md).

No node configured: the node ``local`` is what NVML finds, or the CPU. Nodes configured:
each one that is not simulated must have its GPUs here, or the server refuses to start
with one line (:class:`~alallo.SettingError`, ``param="nodes"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .._errors import SettingError
from ..capacity import Gpu, Pool, declared_problem, detect_gpus, local_node
from ..executors import Executor, LocalExecutor, TrainerUser
from ..jobs import DEVICE_TYPES
from ..settings import Settings

__all__ = ["open_executor", "open_pool"]


def open_pool(settings: Settings, gpus: Sequence[Gpu] | None = None) -> Pool:
    """The capacity pool of this server.

    Args:
        gpus: this machine's GPUs; None asks NVML (:func:`~alallo.capacity.detect_gpus`).

    Raises:
        SettingError: a node is not what the machine has (a declared GPU NVML does not
            find), or names an unknown device type (``param="nodes"``).
    """
    real_gpus = [n for n in settings.nodes if not n.simulated and n.device != "cpu"]
    if gpus is None:  # NVML only when a node is this machine's GPUs (its start takes ~0.1 s)
        gpus = detect_gpus() if real_gpus or not settings.nodes else []
    price = settings.gpu_price_per_hour
    # The CPU costs what the operator says; every other device its list price.
    types = dict(DEVICE_TYPES, cpu=replace(DEVICE_TYPES["cpu"],
                                           price_per_hour=settings.cpu_price_per_hour))
    specs = settings.nodes
    if not specs:
        spec, unknown = local_node(gpus, cpu_devices=settings.local_cpu_devices,
                                   unknown_price=price)
        specs = [spec]
        if unknown is not None:
            types[unknown.name] = unknown
    for spec in specs:
        if (problem := declared_problem(spec, gpus, unknown_price=price)) is not None:
            raise SettingError(f"ALALLO_NODES: {problem}", param="nodes")
    try:
        return Pool(specs, types)
    except ValueError as exc:
        raise SettingError(f"ALALLO_NODES: {exc}", param="nodes") from None


def open_executor(settings: Settings, user: TrainerUser | None) -> Executor:
    """Where this server's trainers run: child processes of its own (run as ``user``)."""
    return LocalExecutor(grace_s=settings.cancel_grace_s, shared_env=settings.trainer_env,
                         warm=settings.warm_trainers, user=user)
