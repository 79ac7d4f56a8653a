"""Devices, nodes and the capacity pool.

A *node* is a machine with ``count`` devices of one type; the pool is every
node of this server. The embedded default is one node, ``local``, this
machine's CPU with ``Settings.max_concurrent_jobs`` slots. Operators add
nodes in ``alallo.toml`` or ``ALALLO_NODES``; a *simulated* node runs the
simulated trainer, so a fleet of GPUs can be exercised on one machine.

Device figures are the vendors' dense BF16 peaks and on-demand list prices
of the main clouds at the time of writing; ``docs/capacity.md`` gives the
sources and how they turn into time and price.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..jobs import DEVICE_TYPES, DeviceType

__all__ = ["Node", "NodeSpec", "Placement", "Pool"]


class NodeSpec(BaseModel):
    """A node as configured: ``{"name": "gpu-1", "device": "H100-80GB", "count": 8}``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    device: str
    count: int = Field(default=1, ge=1, le=1024)
    simulated: bool = False
    """Jobs placed here run the simulated trainer (fleet-scale tests on one machine)."""
    ray: bool = False
    """A node of the Ray cluster (named by its Ray node id): the pool follows the cluster's
    alive nodes (:meth:`Pool.follow`), and its jobs run as Ray jobs there."""
    indices: list[int] | None = None
    """Which of this machine's GPUs the node's devices are (``nvidia-smi``'s indices),
    one per device; None: 0 to ``count - 1``. Two nodes declared on one machine name
    different ones."""

    @model_validator(mode="after")
    def _one_index_per_device(self) -> NodeSpec:
        if self.indices is not None and (len(self.indices) != self.count
                                         or len(set(self.indices)) != self.count):
            raise ValueError(f"node {self.name!r}: indices {self.indices} must name "
                             f"{self.count} different devices, one per device")
        return self

    @property
    def device_ids(self) -> list[int]:
        """The node's devices, by their indices on the machine."""
        return self.indices if self.indices is not None else list(range(self.count))


@dataclass(frozen=True)
class Placement:
    """Where a job runs: some devices of one node.

    ``device_indices`` are which of the node's devices the job holds (0-based, as
    ``CUDA_VISIBLE_DEVICES`` numbers a machine's GPUs): two jobs never hold the same one.
    """

    node: str
    device_type: str
    devices: int
    simulated: bool
    device_indices: tuple[int, ...] = ()


@dataclass
class Node:
    """A node and which of its devices are taken, by which job."""

    spec: NodeSpec
    device: DeviceType
    busy: dict[str, int] = field(default_factory=dict)
    """How many devices each job holds, by job id."""
    held: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Which devices each job holds (their indices on the node), by job id."""
    draining: bool = False

    @property
    def free(self) -> int:
        """Devices not taken (0 while draining)."""
        return 0 if self.draining else self.spec.count - sum(self.busy.values())

    def free_indices(self) -> list[int]:
        """The indices of the devices no job holds, in the node's order (draining or not)."""
        taken = {i for indices in self.held.values() for i in indices}
        return [i for i in self.spec.device_ids if i not in taken]


class Pool:
    """The nodes of this server and what runs on them.

    Raises:
        ValueError: a node names an unknown device type, or two nodes share a name.
    """

    def __init__(self, specs: list[NodeSpec],
                 device_types: Mapping[str, DeviceType] | None = None) -> None:
        """Args:
            specs: the nodes.
            device_types: the device types the nodes may name, by name; the catalogue's
                (:data:`~alallo.jobs.DEVICE_TYPES`) if None. The runtime adds what it
                detected (a GPU the catalogue does not know) and the CPU at its price.
        """
        types = DEVICE_TYPES if device_types is None else device_types
        self._types = dict(types)
        self.lost: set[str] = set()
        """Nodes taken for lost (:meth:`lose`)."""
        self.nodes: dict[str, Node] = {}
        for spec in specs:
            if spec.device not in types:
                known = ", ".join(types)
                raise ValueError(f"node {spec.name!r}: unknown device {spec.device!r} ({known})")
            if spec.name in self.nodes:
                raise ValueError(f"two nodes are named {spec.name!r}")
            self.nodes[spec.name] = Node(spec, types[spec.device])

    def largest(self, device_type: str) -> int:
        """The most devices of a type one node has (jobs do not span nodes)."""
        return max((n.spec.count for n in self.nodes.values() if n.device.name == device_type),
                   default=0)

    def device_types(self) -> list[DeviceType]:
        """The device types present, each once."""
        return list({n.device.name: n.device for n in self.nodes.values()}.values())

    def find(self, device_type: str, devices: int) -> Node | None:
        """A node with ``devices`` free devices of the type (the fullest that fits)."""
        fits = [n for n in self.nodes.values()
                if n.device.name == device_type and n.free >= devices]
        return min(fits, key=lambda n: n.free, default=None)

    def take(self, node: Node, job_id: str, devices: int) -> Placement:
        """Give ``devices`` of ``node`` to a job: the lowest indices no job holds.

        Raises:
            ValueError: the node has fewer free devices.
        """
        if node.free < devices:
            raise ValueError(f"node {node.spec.name} has {node.free} free devices, not {devices}")
        node.held.pop(job_id, None)
        indices = tuple(node.free_indices()[:devices])
        node.busy[job_id] = devices
        node.held[job_id] = indices
        return Placement(node.spec.name, node.device.name, devices, node.spec.simulated,
                         indices)

    def follow(self, specs: list[NodeSpec],
               device_types: Mapping[str, DeviceType] | None = None) -> tuple[list[str], list[str]]:
        """Make the pool's Ray nodes these (the cluster's alive nodes now); other nodes stay.

        A node that left is dropped with what ran there (those jobs' runs end as their node
        lost, and they move). A node whose devices changed is taken as a new one.

        Args:
            specs: every alive Ray node (``ray=True``).
            device_types: device types the new nodes may name beyond the pool's own.

        Returns:
            The names of the nodes that joined, and of those that left.
        """
        types = {**self._types, **(device_types or {})}
        wanted = {spec.name: spec for spec in specs if spec.name not in self.lost}
        left = [name for name, node in self.nodes.items() if node.spec.ray and (
            name not in wanted or wanted[name] != node.spec)]
        for name in left:
            del self.nodes[name]
        joined = [spec.name for spec in wanted.values() if spec.name not in self.nodes
                  and spec.device in types]
        for name in joined:
            self.nodes[name] = Node(wanted[name], types[wanted[name].device])
        self._types = types
        return joined, left

    def lose(self, name: str) -> list[str]:
        """Drop a node whose run ended as its node lost, at once and for good (Ray never
        gives a node that died its id again; :meth:`follow` ignores it from now on).

        Returns:
            The jobs that held devices there (their runs end as node lost too).
        """
        self.lost.add(name)
        node = self.nodes.pop(name, None)
        return sorted(node.busy) if node is not None else []

    def release(self, job_id: str) -> None:
        """Give back whatever the job holds (nothing if it holds nothing)."""
        for node in self.nodes.values():
            node.busy.pop(job_id, None)
            node.held.pop(job_id, None)
