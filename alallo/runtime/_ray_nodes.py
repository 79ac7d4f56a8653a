"""The pool follows the Ray cluster: its alive nodes are the pool's real nodes.

Every :data:`FOLLOW_S` the cluster's nodes are read (``GET /api/v0/nodes``) and handed to the
scheduler (:class:`~alallo.capacity.FollowNodes`): a node that joined takes jobs at once, one
that left is dropped (its runs end as their node lost, :mod:`alallo.executors._ray`, and the
jobs move on from their checkpoints). A node is named by its Ray node id and offers:

- its GPUs (``GPU``), of the catalogue's type whose family Ray names
  (``accelerator_type:H100`` → ``H100-80GB``; of two sizes, the smaller), or of a type of its
  own priced at ``gpu_price_per_hour`` (memory unknown to Ray: :data:`UNKNOWN_GPU_MEMORY_GB`);
- or, without GPUs, its CPUs (``CPU``), one device each, priced as the local CPU.

A node with neither (a head started with ``--num-cpus=0``) offers nothing and is left out.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import cast

import structlog
import trio

from actors import ActorRef, ActorStopped

from .._errors import SettingError
from ..capacity import UNKNOWN_GPU_TFLOPS, FollowNodes, NodeSpec, SchedulerMessage
from ..executors import Executor, RayApiError, RayExecutor, RayNode
from ..jobs import DEVICE_TYPES, DeviceType
from ..settings import Settings

__all__ = ["FOLLOW_S", "UNKNOWN_GPU_MEMORY_GB", "follow_ray_nodes", "node_spec", "reach_ray"]

FOLLOW_S = 2.0
"""Seconds between two reads of the cluster's nodes."""
UNKNOWN_GPU_MEMORY_GB = 16.0
"""The memory assumed of a GPU type the catalogue does not know (Ray does not report it)."""

log = structlog.get_logger("alallo.ray")


def node_spec(node: RayNode, *, unknown_price: float) -> tuple[NodeSpec, DeviceType | None] | None:
    """The pool's node for a Ray node, with its device type when the catalogue lacks it;
    None for a node that offers no CPU and no GPU."""
    gpus = int(node.resources.get("GPU", 0))
    if gpus > 0:
        accelerator = (node.accelerator or "GPU").upper()
        known = sorted((d for d in DEVICE_TYPES.values()
                        if d.name.split("-")[0].upper() == accelerator),
                       key=lambda d: d.memory_gb)
        device = known[0] if known else DeviceType(
            f"ray-{accelerator}", UNKNOWN_GPU_MEMORY_GB, UNKNOWN_GPU_TFLOPS, unknown_price)
        spec = NodeSpec(name=node.node_id, device=device.name, count=gpus, ray=True)
        return spec, None if known else device
    cpus = int(node.resources.get("CPU", 0))
    if cpus > 0:
        return NodeSpec(name=node.node_id, device="cpu", count=cpus, ray=True), None
    return None


async def _read(executor: RayExecutor, settings: Settings,
                ) -> tuple[list[NodeSpec], Mapping[str, DeviceType]]:
    specs, types = [], {}
    for node in await executor.api.nodes():
        made = node_spec(node, unknown_price=settings.gpu_price_per_hour) if node.alive else None
        if made is not None:
            specs.append(made[0])
            if made[1] is not None:
                types[made[1].name] = made[1]
    return specs, types


@contextlib.asynccontextmanager
async def reach_ray(executor: Executor) -> AsyncIterator[None]:
    """Check that the Ray cluster answers (nothing without a Ray executor), before the
    runtime opens anything else; its connections are closed on the way out, after every
    user of them (the runs, the nodes followed, the vLLM engines on its nodes).

    Raises:
        SettingError: it does not (``param="ray_address"``).
    """
    if not isinstance(executor, RayExecutor):
        yield
        return
    try:
        try:
            await executor.api.version()
        except RayApiError as exc:
            raise SettingError(f"ALALLO_RAY_ADDRESS: {exc}", param="ray_address") from None
        yield
    finally:
        with trio.CancelScope(shield=True):
            await executor.api.aclose()


@contextlib.asynccontextmanager
async def follow_ray_nodes(executor: Executor, settings: Settings,
                           scheduler_of: Callable[[], ActorRef[SchedulerMessage] | None],
                           ) -> AsyncIterator[None]:
    """While the block runs, keep the pool's real nodes the Ray cluster's (nothing without
    a Ray executor). The first read is made before the block starts.

    Raises:
        SettingError: the cluster does not answer at the start (``param="ray_address"``).
    """
    if not isinstance(executor, RayExecutor):
        yield
        return
    try:
        first = await _read(executor, settings)
    except RayApiError as exc:
        raise SettingError(f"ALALLO_RAY_ADDRESS: {exc}", param="ray_address") from None

    async def tell(specs: list[NodeSpec], types: Mapping[str, DeviceType]) -> None:
        scheduler = scheduler_of()
        if scheduler is not None:
            joined, left = cast(tuple[list[str], list[str]],
                                await scheduler.ask(FollowNodes(specs, types)))
            if joined or left:
                log.info("ray.nodes", joined=joined, left=left, nodes=len(specs))

    async def follow() -> None:
        while True:
            await trio.sleep(FOLLOW_S)
            try:
                await tell(*await _read(executor, settings))
            except RayApiError as exc:  # the runs see it too; the pool stays as it was
                log.warning("ray.nodes_unread", error=str(exc))
            except ActorStopped:
                return  # the scheduler stopped first: the runtime is closing

    await tell(*first)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow)
        yield
        nursery.cancel_scope.cancel()
