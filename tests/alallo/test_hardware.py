"""This machine's GPUs by NVML (a fake ``pynvml``), the local node they make, and a
declared GPU node that is not there."""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace

import pytest

from alallo import SettingError
from alallo.capacity import NodeSpec
from alallo.capacity._hardware import Gpu, detect_gpus
from alallo.runtime._devices import open_pool
from alallo.settings import Settings

pytestmark = pytest.mark.unit

GIB = 2**30


class FakeNVMLError(Exception):
    pass


def fake_nvml(*gpus: tuple[str | bytes, int], driver: bool = True) -> ModuleType:
    """A ``pynvml`` that reports ``gpus`` (name, memory in bytes), or has no driver."""
    nvml = ModuleType("pynvml")
    calls: list[str] = []

    def init() -> None:
        if not driver:
            raise FakeNVMLError("NVML Shared Library Not Found")
        calls.append("init")

    nvml.NVMLError = FakeNVMLError  # type: ignore[attr-defined]
    nvml.nvmlInit = init  # type: ignore[attr-defined]
    nvml.nvmlShutdown = lambda: calls.append("shutdown")  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCount = lambda: len(gpus)  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetName = lambda i: gpus[i][0]  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetMemoryInfo = (  # type: ignore[attr-defined]
        lambda i: SimpleNamespace(total=gpus[i][1], free=gpus[i][1], used=0))
    nvml.calls = calls  # type: ignore[attr-defined]
    return nvml


def test_two_h100s_are_the_local_node(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = fake_nvml(("NVIDIA H100 80GB HBM3", 80 * GIB), (b"NVIDIA H100 80GB HBM3", 80 * GIB))
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert detect_gpus() == [Gpu(i, "NVIDIA H100 80GB HBM3", 80.0) for i in (0, 1)]
    assert nvml.calls == ["init", "shutdown"]  # type: ignore[attr-defined]
    node = open_pool(Settings(max_concurrent_jobs=3)).nodes["local"]
    assert (node.device.name, node.spec.count, node.device.price_per_hour) == (
        "H100-80GB", 2, 2.99)
    assert node.spec.device_ids == [0, 1]


def test_an_l40s_and_an_a100_map_to_the_catalogue() -> None:
    from alallo.capacity._hardware import device_type_of

    assert device_type_of(Gpu(0, "NVIDIA L40S", 45.0), unknown_price=1).name == "L40S-48GB"
    assert device_type_of(Gpu(0, "NVIDIA A100-SXM4-80GB", 80.0),
                          unknown_price=1).name == "A100-80GB"
    # An A100 of 40 GB is not the catalogue's A100-80GB: its own type, the operator's price.
    small = device_type_of(Gpu(0, "NVIDIA A100-SXM4-40GB", 40.0), unknown_price=1.25)
    assert (small.name, small.memory_gb, small.price_per_hour) == (
        "NVIDIA A100-SXM4-40GB", 40.0, 1.25)


def test_an_unknown_gpu_keeps_its_name_and_memory_at_the_settings_price(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(("NVIDIA GeForce RTX 4090", 24 * GIB)))
    node = open_pool(Settings(gpu_price_per_hour=0.7)).nodes["local"]
    assert (node.device.name, node.device.memory_gb, node.device.price_per_hour,
            node.spec.count) == ("NVIDIA GeForce RTX 4090", 24.0, 0.7, 1)


@pytest.mark.parametrize("nvml", [None, fake_nvml(driver=False), fake_nvml()],
                         ids=["not-installed", "no-driver", "no-gpu"])
def test_no_gpu_is_the_cpu_node_as_before(monkeypatch: pytest.MonkeyPatch,
                                          nvml: ModuleType | None) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", nvml)  # None: the import fails
    node = open_pool(Settings(max_concurrent_jobs=2, cpu_price_per_hour=0.2)).nodes["local"]
    assert (node.device.name, node.spec.count, node.device.price_per_hour) == ("cpu", 2, 0.2)
    assert open_pool(Settings(cpu_devices=4)).nodes["local"].spec.count == 4


def test_a_declared_gpu_node_that_is_not_here_refuses_the_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(("NVIDIA A100-SXM4-80GB", 80 * GIB)))
    declared = [NodeSpec(name="gpu-1", device="H100-80GB")]
    with pytest.raises(SettingError) as refused:
        open_pool(Settings(nodes=declared))
    assert refused.value.message == (
        "ALALLO_NODES: node 'gpu-1': declared 1 × H100-80GB, NVML finds 1 × A100-80GB")
    assert refused.value.param == "nodes"
    # What is there starts; a simulated fleet needs no GPU at all.
    assert open_pool(Settings(nodes=[NodeSpec(name="a", device="A100-80GB")])).nodes["a"]
    fleet = [NodeSpec(name="sim", device="H100-80GB", count=8, simulated=True)]
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert open_pool(Settings(nodes=fleet)).nodes["sim"].spec.count == 8


def test_two_nodes_on_one_machine_name_their_gpus() -> None:
    gpus = [Gpu(i, "NVIDIA H100 80GB HBM3", 80.0) for i in range(4)]
    pool = open_pool(Settings(nodes=[
        NodeSpec(name="a", device="H100-80GB", count=2, indices=[0, 1]),
        NodeSpec(name="b", device="H100-80GB", count=2, indices=[2, 3])]), gpus)
    placement = pool.take(pool.nodes["b"], "j1", 1)
    assert placement.device_indices == (2,)
    with pytest.raises(SettingError, match=r"declared 2 × H100-80GB at indices \[4, 5\]"):
        open_pool(Settings(nodes=[
            NodeSpec(name="c", device="H100-80GB", count=2, indices=[4, 5])]), gpus)
