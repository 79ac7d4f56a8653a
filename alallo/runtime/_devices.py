"""The runtime's pool and executor, from the settings and the hardware (docs/clusters.md).

No node configured: the node ``local`` is what NVML finds, or the CPU. Nodes configured:
each one that is not simulated must have its GPUs here, or the server refuses to start
with one line (:class:`~alallo.SettingError`, ``param="nodes"``). With a Ray cluster
(``ray_address``), the pool's real nodes are the cluster's (:mod:`alallo.runtime._ray_nodes`)
and trainers and vLLM engines run there (:class:`~alallo.executors.RayExecutor`,
:class:`~alallo.executors.RayServices`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import replace

from .._errors import SettingError
from ..capacity import Gpu, Pool, declared_problem, detect_gpus, local_node
from pathlib import Path

from ..executors import Executor, LocalExecutor, LocalServices, RayApi, RayExecutor, RayServices
from ..executors import Services, TrainerUser
from ..jobs import DEVICE_TYPES
from ..settings import Settings

__all__ = ["open_executor", "open_pool", "open_services"]


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
    if settings.ray_address:  # the real nodes are the cluster's, followed once it answers
        if real := [n.name for n in specs if not n.simulated]:
            raise SettingError(f"ALALLO_NODES: node {real[0]!r} is not simulated: with a Ray "
                               "cluster the real nodes are its own; declare only simulated "
                               "ones", param="nodes")
    elif not specs:
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
    """Where this server's trainers run: child processes of its own (run as ``user``), or
    Ray jobs on the nodes of the cluster at ``ray_address``.

    Raises:
        SettingError: a Ray cluster without ``shared_dir``, or without Ray installed.
    """
    if not settings.ray_address:
        return LocalExecutor(grace_s=settings.cancel_grace_s, shared_env=settings.trainer_env,
                             warm=settings.warm_trainers, user=user)
    if settings.shared_dir is None:
        raise SettingError(
            "ALALLO_RAY_ADDRESS needs ALALLO_SHARED_DIR: a directory every node of the Ray "
            "cluster mounts at the same path (NFS, a shared volume), for the jobs' "
            "checkpoints, training files and models (alallo serve --ray-address ... "
            "--shared-dir DIR)", param="shared_dir")
    if importlib.util.find_spec("ray") is None:
        raise SettingError(
            "ALALLO_RAY_ADDRESS needs Ray in this environment, which the cluster's nodes "
            "run too: pip install 'alallo[ray]'", param="ray_address")
    return RayExecutor(RayApi(settings.ray_address), python=settings.python,
                       grace_s=settings.cancel_grace_s, shared_env=settings.trainer_env)


def open_services(settings: Settings, executor: Executor) -> tuple[Services, Path]:
    """Where this server's vLLM engines start, and the folder of their folders: children of
    its own in ``data_dir/inference``, or Ray jobs on the cluster its trainers run on, in
    ``shared_dir/inference``."""
    if isinstance(executor, RayExecutor) and settings.shared_dir is not None:
        home = settings.shared_dir / "inference"
        return RayServices(executor.api, python=executor.python, home=home,
                           grace_s=settings.cancel_grace_s), home
    return LocalServices(), settings.data_dir / "inference"
