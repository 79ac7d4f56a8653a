"""The memory and time model, and the not-available verdicts (docs/capacity.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from alallo import InvalidRequest, JobSpec
from alallo.capacity._pool import NodeSpec, Pool
from alallo.capacity._catalogue import Catalogue
from alallo.capacity._plans import bytes_per_parameter, memory_gb, plan_options, why_not

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
    # 4-bit: 85% of the weights in NF4 (0.52 B), the rest (embeddings, output layer) in 16
    # bits, and the adapter's Adam state (0.16 B): docs/capacity.md, bench_qlora_memory.py.
    [("lora", "16-bit", 2.16), ("lora", "4-bit", 0.902), ("full", "16-bit", 16.0)],
)
def test_bytes_per_parameter(adapter: str, precision: str, expected: float) -> None:
    assert bytes_per_parameter(adapter, precision) == pytest.approx(expected)


def test_memory_of_a_4_bit_job_counts_what_stays_in_16_bits_and_the_same_activations() -> None:
    # 8.03e9 × 0.902 B + 20% of the 16 GB of weights at 16 bits (activations do not shrink
    # with the weights) + 1.5 GB of CUDA overhead.
    assert memory_gb(8_030_261_248, "lora", "4-bit") == pytest.approx(11.96, abs=0.05)
    # A model's own share where known: all in NF4 but its embeddings...
    assert memory_gb(8_030_261_248, "lora", "4-bit", quantized_share=0.97) < \
        memory_gb(8_030_261_248, "lora", "4-bit")
    # ...and, measured on the CPU (a 152 M-parameter Llama, 89% in its linear layers), the
    # model covers what the trainer's process held at its peak, libraries included: 938 MiB
    # at 4 bits, 1,020 MiB at 16 (bench/bench_qlora_memory.py, docs/capacity.md).
    for precision, measured_mib in (("4-bit", 938), ("16-bit", 1020)):
        cpu = memory_gb(152_414_208, "lora", precision, gpu=False, quantized_share=0.888)
        assert measured_mib <= cpu * 1e9 / 2**20 <= 1.5 * measured_mib


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
        ("meta-llama/Llama-3.1-70B", "lora", "16-bit", [("L40S-48GB", 4)],
         "choose_lower_precision", None, 0),
        ("meta-llama/Llama-3.1-70B", "lora", "4-bit", [("L40S-48GB", 4)], "ok", "L40S-48GB", 4),
        # The CPU trains 4-bit too (bitsandbytes' CPU kernels): 16-bit needs 21.4 GB, 4-bit
        # 11.3 GB, of the 14.4 GB a 16 GB node gives a job.
        ("meta-llama/Llama-3.1-8B", "lora", "16-bit", [("cpu", 1)], "choose_lower_precision",
         None, 0),
        ("meta-llama/Llama-3.1-8B", "lora", "4-bit", [("cpu", 1)], "ok", "cpu", 1),
        ("meta-llama/Llama-3.1-70B", "lora", "16-bit", [("L40S-48GB", 1)], "not_available",
         None, 0),
        ("meta-llama/Llama-3.1-70B", "full", "16-bit", [("cpu", 4)], "not_available", None, 0),
        ("alallo/tiny-gpt2", "lora", "16-bit", [("cpu", 1)], "ok", "cpu", 1),
        ("alallo/tiny-gpt2", "lora", "4-bit", [("cpu", 1)], "ok", "cpu", 1),
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


def test_a_4_bit_job_too_big_for_the_cpu_says_how_much_it_needs() -> None:
    model = CATALOGUE.resolve("meta-llama/Llama-3.1-70B")
    assert why_not(model, spec(model.id, precision="4-bit"), pool(("cpu", 1))) == (
        "The job needs about 93 GB of memory; the most one node here can give a job is "
        "14 GB (cpu)")


def test_a_4_bit_plan_on_the_cpu_counts_quantizing_the_16_bit_weights_as_they_load() -> None:
    model = CATALOGUE.resolve("meta-llama/Llama-3.1-8B")
    plans = {precision: plan_options(model, spec(model.id, precision=precision),
                                     pool(("cpu", 1), ("H100-80GB", 1)), max_steps=10,
                                     tokens_per_example=512).options
             for precision in ("16-bit", "4-bit")}
    cpu = next(p for p in plans["4-bit"] if p.device_type == "cpu")
    gpu = next(p for p in plans["4-bit"] if p.device_type == "H100-80GB")
    weights_gb = 8.03 * 2  # read at 16 bits, 1 GB/s; on the CPU quantized at 0.05 GB/s
    assert gpu.startup_s == pytest.approx(6 + weights_gb, abs=0.1)
    assert cpu.startup_s == pytest.approx(6 + weights_gb + weights_gb / 0.05, abs=1)
    assert gpu.startup_s == next(p for p in plans["16-bit"]
                                 if p.device_type == "H100-80GB").startup_s


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
