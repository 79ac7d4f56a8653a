"""The memory and time model, and the not-available verdicts (docs/capacity.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from alallo import InvalidRequest, JobSpec
from alallo.capacity._pool import NodeSpec, Pool
from alallo.capacity._catalogue import Catalogue
from alallo.capacity._plans import bytes_per_parameter, memory_gb, plan_options

pytestmark = pytest.mark.unit

CATALOGUE = Catalogue()


def pool(*nodes: tuple[str, int]) -> Pool:
    return Pool([NodeSpec(name=f"n{i}", device=d, count=c, simulated=True)
                 for i, (d, c) in enumerate(nodes)])


def spec(model: str, adapter: str = "lora", precision: str = "16-bit",
         goal: str = "lowest_cost") -> JobSpec:
    return JobSpec(model=model, training_file="f", adapter=adapter, precision=precision,
                   goal=goal)


@pytest.mark.parametrize(
    ("adapter", "precision", "expected"),
    [("lora", "16-bit", 2.16), ("lora", "4-bit", 0.71), ("full", "16-bit", 16.0)],
)
def test_bytes_per_parameter(adapter: str, precision: str, expected: float) -> None:
    assert bytes_per_parameter(adapter, precision) == pytest.approx(expected)


def test_memory_of_an_8b_lora_job() -> None:
    # 8.03e9 × 2.16 B + 20% of the 16 GB of weights + 1.5 GB of CUDA overhead.
    assert memory_gb(8_030_261_248, "lora", "16-bit") == pytest.approx(22.05, abs=0.05)
    assert memory_gb(8_030_261_248, "lora", "16-bit", devices=2) == pytest.approx(11.78, abs=0.05)


@pytest.mark.parametrize(
    ("model", "adapter", "precision", "nodes", "verdict", "device", "devices"),
    [
        ("meta-llama/Llama-3.1-8B", "lora", "16-bit", [("L40S-48GB", 1)], "ok", "L40S-48GB", 1),
        ("meta-llama/Llama-3.1-8B", "full", "16-bit", [("H100-80GB", 8)], "ok", "H100-80GB", 2),
        ("meta-llama/Llama-3.1-70B", "lora", "16-bit", [("H100-80GB", 8)], "ok", "H100-80GB", 4),
        ("meta-llama/Llama-3.1-70B", "lora", "16-bit", [("L40S-48GB", 2)],
         "choose_lower_precision", None, 0),
        ("meta-llama/Llama-3.1-70B", "lora", "4-bit", [("L40S-48GB", 2)], "ok", "L40S-48GB", 2),
        ("meta-llama/Llama-3.1-70B", "lora", "16-bit", [("L40S-48GB", 1)], "not_available",
         None, 0),
        ("meta-llama/Llama-3.1-70B", "full", "16-bit", [("cpu", 4)], "not_available", None, 0),
        ("alallo/tiny-gpt2", "lora", "16-bit", [("cpu", 1)], "ok", "cpu", 1),
        ("alallo/tiny-gpt2", "lora", "4-bit", [("cpu", 1)], "not_available", None, 0),
    ],
)
def test_plans_and_verdicts(model: str, adapter: str, precision: str,
                            nodes: list[tuple[str, int]], verdict: str, device: str | None,
                            devices: int) -> None:
    options = plan_options(CATALOGUE.resolve(model), spec(model, adapter, precision),
                           pool(*nodes), max_steps=100, tokens_per_example=512)
    assert options.verdict == verdict
    if device is not None:
        plan = options.pick("lowest_cost")
        assert (plan.device_type, plan.devices) == (device, devices)
        assert plan.memory_gb <= {"cpu": 16, "L40S-48GB": 48, "H100-80GB": 80}[device] * 0.9


def test_goals_pick_cheapest_or_quickest() -> None:
    fleet = pool(("H100-80GB", 8), ("L40S-48GB", 8))
    options = plan_options(CATALOGUE.resolve("Qwen/Qwen2.5-7B"), spec("Qwen/Qwen2.5-7B"), fleet,
                           max_steps=1000, tokens_per_example=512)
    cheap, quick = options.pick("lowest_cost"), options.pick("fastest_finish")
    assert cheap.device_type == "L40S-48GB" and quick.device_type == "H100-80GB"
    assert cheap.price < quick.price and quick.training_s < cheap.training_s


def test_more_tokens_take_longer() -> None:
    fleet = pool(("A100-80GB", 1))
    short, long = (plan_options(CATALOGUE.resolve("Qwen/Qwen2.5-7B"), spec("Qwen/Qwen2.5-7B"),
                                fleet, max_steps=10, tokens_per_example=t).pick("lowest_cost")
                   for t in (128, 1024))
    assert long.step_time_s > 4 * short.step_time_s - 0.2


def test_a_cpu_of_two_devices_offers_a_two_rank_plan_to_the_quickest() -> None:
    tiny = CATALOGUE.resolve("alallo/tiny-gpt2")
    two = pool(("cpu", 2))
    alone = plan_options(tiny, spec("alallo/tiny-gpt2"), two, max_steps=100,
                         tokens_per_example=40)
    assert [p.devices for p in alone.options] == [1], "one rank unless cpu_devices says more"
    options = plan_options(tiny, spec("alallo/tiny-gpt2"), two, max_steps=100,
                           tokens_per_example=40, cpu_price_per_hour=0.1, cpu_ranks=4)
    one, both = options.options
    assert (one.devices, both.devices) == (1, 2)  # no more ranks than the node has devices
    assert both.memory_gb == one.memory_gb, "each rank holds the whole model"
    assert both.price_per_hour == 0.2 and both.step_time_s < one.step_time_s
    assert options.pick("fastest_finish") == both and options.pick("lowest_cost") == one


def test_an_adapter_directory_as_the_model_is_refused_saying_what_it_is(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text(
        '{"base_model_name_or_path": "/srv/models/base", "peft_type": "LORA"}')
    with pytest.raises(InvalidRequest) as refused:
        Catalogue().resolve(str(tmp_path))
    assert refused.value.param == "model"
    assert refused.value.message.startswith(
        f"{tmp_path} holds a LoRA adapter, not a model (its base: /srv/models/base): name the "
        "base model")


def test_a_hub_id_not_in_the_cache_is_refused_saying_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(InvalidRequest, match="'acme/none' is not in this server's Hugging Face "
                                             "cache"):
        Catalogue().resolve("acme/none")
    with pytest.raises(InvalidRequest, match="unknown model 'none': use one of"):
        Catalogue().resolve("none")
