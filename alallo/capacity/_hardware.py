"""This machine's GPUs, as NVML reports them, and the local node they make.

Devices are detected, never assumed (docs/clusters.md): at start the runtime asks NVML
(``nvidia-ml-py``, imported as ``pynvml``) for each GPU's name and memory. No NVML
(the package missing, or no driver) means no GPU. The local node is what is there: N
devices of the detected type, named as the catalogue names it
(:data:`~alallo.jobs.DEVICE_TYPES`) when it knows the GPU, else by its NVML name with
its memory and the operator's price for unknown GPUs; without a GPU, the CPU node.

A node the operator declares with GPUs (not simulated) must have them here: a job is
billed at the price of the device it really used, so a declared H100 that is an A100,
or is not there at all, refuses to start (:func:`declared_problem`).

Why NVML and not torch: the server does not import torch (it starts in well under a
second, and a CUDA context in the server would not survive the warm trainers' forks).
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..jobs import DEVICE_TYPES, DeviceType
from ._pool import NodeSpec

__all__ = ["UNKNOWN_GPU_TFLOPS", "Gpu", "declared_problem", "detect_gpus", "device_type_of",
           "local_node"]

GIB = 2**30
MEMORY_TOLERANCE = 0.1
"""How far NVML's total memory may be from the catalogue's figure and still be that device
(an L40S reports 45 GiB of its 48 GB)."""
UNKNOWN_GPU_TFLOPS = 100.0
"""The dense BF16 peak assumed for a GPU the catalogue does not know (about an L4-L40S
class card): its estimates are rough, its price is the operator's."""


@dataclass(frozen=True)
class Gpu:
    """One GPU of this machine.

    Attributes:
        index: NVML's index (``nvidia-smi``'s, and ``CUDA_VISIBLE_DEVICES``'s with
            ``CUDA_DEVICE_ORDER=PCI_BUS_ID``).
        name: NVML's name, e.g. ``NVIDIA H100 80GB HBM3``.
        memory_gb: total memory, GiB.
    """

    index: int
    name: str
    memory_gb: float


def detect_gpus() -> list[Gpu]:
    """This machine's GPUs, by NVML; empty when NVML is not installed or finds no driver."""
    try:
        nvml: Any = importlib.import_module("pynvml")
    except ImportError:
        return []
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return []  # no driver, or no library: no GPU
    try:
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = nvml.nvmlDeviceGetName(handle)
            if isinstance(name, bytes):  # older nvidia-ml-py
                name = name.decode()
            memory = nvml.nvmlDeviceGetMemoryInfo(handle).total
            gpus.append(Gpu(index, str(name), round(memory / GIB, 1)))
        return gpus
    finally:
        nvml.nvmlShutdown()


def device_type_of(gpu: Gpu, *, unknown_price: float) -> DeviceType:
    """The catalogue's device type of a GPU, or a new one for a GPU the catalogue lacks.

    A catalogue type matches when its family (``H100`` of ``H100-80GB``) is a word of
    the NVML name and its memory is within :data:`MEMORY_TOLERANCE` of the GPU's.

    Args:
        unknown_price: USD per device-hour of a GPU the catalogue does not know
            (``Settings.gpu_price_per_hour``).
    """
    words = set(gpu.name.upper().replace("-", " ").split())
    for device in DEVICE_TYPES.values():
        family = device.name.split("-")[0].upper()
        if family in words and abs(gpu.memory_gb - device.memory_gb) <= (
                MEMORY_TOLERANCE * device.memory_gb):
            return device
    return DeviceType(gpu.name, gpu.memory_gb, UNKNOWN_GPU_TFLOPS, unknown_price)


def local_node(gpus: Sequence[Gpu], *, cpu_devices: int, unknown_price: float,
               ) -> tuple[NodeSpec, DeviceType | None]:
    """The node ``local``: this machine's GPUs of its most common type, or the CPU.

    Returns:
        The node, and its device type when the catalogue lacks it (None otherwise).
    """
    if not gpus:
        return NodeSpec(name="local", device="cpu", count=cpu_devices), None
    types = [(gpu, device_type_of(gpu, unknown_price=unknown_price)) for gpu in gpus]
    common, _ = Counter(t.name for _, t in types).most_common(1)[0]
    mine = [(gpu, t) for gpu, t in types if t.name == common]
    device = mine[0][1]
    spec = NodeSpec(name="local", device=device.name, count=len(mine),
                    indices=[gpu.index for gpu, _ in mine])
    return spec, None if device.name in DEVICE_TYPES else device


def declared_problem(spec: NodeSpec, gpus: Sequence[Gpu], *, unknown_price: float,
                     ) -> str | None:
    """Why a declared node's GPUs are not this machine's, or None when they are (or when
    the node is simulated or the CPU), e.g. ``declared 1 × H100-80GB, NVML finds none``."""
    if spec.simulated or spec.device == "cpu":
        return None
    found = {gpu.index: device_type_of(gpu, unknown_price=unknown_price).name for gpu in gpus}
    wanted = spec.indices if spec.indices is not None else list(range(spec.count))
    if all(found.get(i) == spec.device for i in wanted):
        return None
    kinds = Counter(found.values())
    finds = ", ".join(f"{n} × {name}" for name, n in kinds.items()) or "none"
    at = f" at indices {wanted}" if spec.indices is not None else ""
    return (f"node {spec.name!r}: declared {spec.count} × {spec.device}{at}, "
            f"NVML finds {finds}")
