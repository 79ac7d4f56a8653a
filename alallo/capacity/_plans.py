"""Plans: how much memory a job needs, on which devices, how fast, at what price.

The memory model and the time model are written out, with their sources, in
``docs/capacity.md``; this module is that page as code. Everything here is
pure arithmetic on the model's parameter count, the method, the precision,
the data and the device catalogue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..jobs import (
    CHECKPOINT_EVERY,
    DEFAULT_COMPLETION_TOKENS,
    DeviceType,
    JobSpec,
    Plan,
    SimulatedTrainer,
    group_size,
)
from ._catalogue import TINY_MODELS, CatalogueModel
from ._pool import Pool

__all__ = ["PlanOptions", "bytes_per_parameter", "memory_gb", "plan_options",
           "tokens_per_example", "weight_bytes", "why_not"]

GB = 1e9
USABLE_MEMORY = 0.9
"""Share of a device's memory a job may plan to use (the rest: fragmentation, spikes)."""
ACTIVATIONS = 0.2
"""Activations and temporary buffers, as a share of the weights' memory at 16 bits: they do
not shrink with 4-bit weights (measured: 0.89 to 0.92 times 16-bit's, docs/capacity.md)."""
GPU_OVERHEAD_GB = 1.5
"""CUDA context, kernels and allocator reserve, per GPU."""
CPU_OVERHEAD_GB = 0.85
"""A CPU trainer's fixed memory: its libraries (torch, transformers, peft, TRL, datasets,
bitsandbytes: 0.63 GB imported) and its working set; measured, the process's peak less
the per-parameter part was 0.68 GB at 16 bits and 0.79 to 0.80 GB at 4 bits
(bench/bench_qlora_memory.py, docs/capacity.md)."""
NF4_BYTES = 0.52
"""Bytes of a weight quantized to 4 bits (NF4): half a byte, and its block's scale (one
per 64 weights) quantized to 8 bits with an fp32 scale per 256 blocks (QLoRA's double
quantization, Dettmers et al. 2023, section 3): 0.5 + 1/64 + 4/16384 = 0.516; measured
0.52 (bench/bench_qlora_memory.py, docs/capacity.md)."""
QUANTIZED_SHARE = 0.85
"""Share of a model's weights that 4-bit quantizes: those of its linear layers; the
embeddings, the output layer and the norms keep 16 bits. 0.87 of Llama-3.1-8B's, 0.86 of
Qwen2.5-7B's, 0.96 of Mistral-7B's, 0.97 of Llama-3.1-70B's; less in small models with large
vocabularies (0.74 of the built-in tiny model's)."""
LORA_TRAINABLE = 0.01
"""Share of the parameters a LoRA adapter trains (rank 8-16 on attention and MLP)."""
OPTIMIZER_BYTES = 16
"""Mixed-precision Adam: bf16 weight and gradient, fp32 master weight, two fp32 moments
(ZeRO, Rajbhandari et al. 2020, section 3.1)."""
CHARS_PER_TOKEN = 4.0
"""Characters per token of the usual BPE tokenizers on English text."""
STEP_OVERHEAD_S = {"cpu": 0.02}
"""Fixed cost of a step (data loading, optimizer, logging) on top of the FLOPs."""
GPU_STEP_OVERHEAD_S = 0.05
DPO_COMPUTE_FACTOR = 2.0
"""A DPO example's compute over an SFT example of the same bytes: the prompt goes through
the model twice (with the chosen and with the rejected answer), about 1.5 times the tokens
of the file's line, and the reference model's forward pass adds a third of a training
step's (forward and backward) work: 1.5 × 4/3 = 2 (Rafailov et al. 2023; TRL's DPOTrainer)."""
DPO_OVERHEAD_FACTOR = 1.2
"""A DPO step's fixed cost over an SFT step's: measured on the tiny model on a CPU (22 ms
against 18 ms a step, 400 steps of 4 examples of 73 bytes each, TRL 1.16)."""
DPO_FULL_MEMORY_FACTOR = 1.25
"""Full-weight DPO keeps a frozen copy of the model as the reference: its weights (2 or 4
bytes a parameter) over full fine-tuning's 16 (weights, gradients, Adam's two moments)."""
EVAL_SHARE_LORA = 0.5
"""An evaluation batch's compute over a LoRA training step's: the forward pass (2 FLOPs a
parameter a token) of the 4 (no weight gradients but the adapter's)."""
EVAL_SHARE_FULL = 1 / 3
"""The same over a full fine-tuning step's 6 FLOPs a parameter a token (Kaplan et al. 2020)."""
GENERATION_FLOPS = 2
"""Reinforcement: FLOPs a parameter a token of sampling the answers (a forward pass), on top
of training on them (GRPO, Shao et al. 2024: sample a group per prompt, then one update)."""
DECODE_TOKEN_S = {"cpu": 0.004}
"""Reinforcement: seconds per sampled token of a step's answers (all answers of the step
decoded together, one token each per forward pass: latency, not FLOPs, bounds it): measured
on the tiny model, TRL 1.16's ``GRPOTrainer`` with transformers' ``generate``."""
GPU_DECODE_TOKEN_S = 0.02
LOAD_GB_PER_S = 1.0
"""Reading weights into device memory."""
CPU_QUANTIZE_GB_PER_S = 0.05
"""Quantizing 16-bit weights to 4 bits as they load, on the CPU (bitsandbytes' CPU kernels):
0.1 GB/s of 16-bit weights measured on 2 idle cores, 0.02 on 2 busy ones
(bench/bench_qlora_memory.py); on a GPU it is part of :data:`LOAD_GB_PER_S`."""
STARTUP_S = 6.0
"""Trainer start before the model loads: Python, torch, transformers imports (measured)."""
SIMULATED_STARTUP_S = 0.3
"""The simulated trainer's start (no torch)."""


def weight_bytes(precision: str, *, quantized_share: float = QUANTIZED_SHARE) -> float:
    """Bytes per parameter of a model's frozen weights: 2 at 16 bits (bf16); at 4 bits
    :data:`NF4_BYTES` for the ``quantized_share`` in linear layers and 2 for the rest
    (0.74 bytes with the default share)."""
    if precision == "4-bit":
        return quantized_share * NF4_BYTES + (1 - quantized_share) * 2.0
    return 2.0


def bytes_per_parameter(adapter: str, precision: str, *,
                        quantized_share: float = QUANTIZED_SHARE) -> float:
    """Memory per parameter, in bytes, of the weights and training state.

    16-bit LoRA: bf16 weights (2) plus the adapter's Adam state (1% of the parameters ×
    16). 4-bit LoRA (QLoRA, Dettmers et al. 2023): :func:`weight_bytes` (NF4 for the
    linear layers, 16 bits for the rest) plus the same adapter state. Full fine-tuning:
    16 bytes (mixed-precision Adam); 4-bit full does not exist.
    """
    adapter_state = LORA_TRAINABLE * OPTIMIZER_BYTES
    if adapter == "full":
        return float(OPTIMIZER_BYTES)
    return weight_bytes(precision, quantized_share=quantized_share) + adapter_state


def memory_gb(parameters: int, adapter: str, precision: str, *, devices: int = 1,
              gpu: bool = True, quantized_share: float | None = None) -> float:
    """Memory per device in GB for a job sharded over ``devices`` (weights and states split):
    weights and training state (:func:`bytes_per_parameter`), activations
    (:data:`ACTIVATIONS` of the 16-bit weights, at either precision) and the device's fixed
    overhead. ``quantized_share``: the model's own, where known (else
    :data:`QUANTIZED_SHARE`)."""
    share = QUANTIZED_SHARE if quantized_share is None else quantized_share
    total = parameters * (bytes_per_parameter(adapter, precision, quantized_share=share)
                          + ACTIVATIONS * weight_bytes("16-bit"))
    return total / GB / devices + (GPU_OVERHEAD_GB if gpu else CPU_OVERHEAD_GB)


@dataclass(frozen=True)
class PlanOptions:
    """Every way a job could run here, and why it cannot when it cannot."""

    options: tuple[Plan, ...]
    verdict: Literal["ok", "not_available", "choose_lower_precision"]
    detail: str | None = None
    """Why the job cannot run here, in words a user reads (None when it can), e.g.
    ``The job needs about 181 GB of memory; the most one node here can give a job is
    14 GB (cpu)``."""

    def pick(self, goal: str) -> Plan:
        """The plan for the goal, ignoring the wait: cheapest, or quickest."""
        if goal == "fastest_finish":
            return min(self.options, key=lambda p: (p.training_s, p.price))
        return min(self.options, key=lambda p: (p.price, p.training_s))


def plan_options(model: CatalogueModel, spec: JobSpec, pool: Pool, *, max_steps: int,
                 tokens_per_example: float, cpu_price_per_hour: float | None = None,
                 memory_factor: float = 1.0, cpu_ranks: int = 1,
                 eval_examples: int = 0) -> PlanOptions:
    """The plans for a job on each device type of the pool that could hold it.

    ``memory_factor`` scales the memory model: a run that measured more
    memory than planned is re-planned with measured / planned. With ``cpu_ranks`` > 1
    (``Settings.cpu_devices``) a job that fits the CPU also has a data-parallel plan on
    that many CPU devices (torchrun, gloo: each rank holds the whole model and a share of
    every batch), quicker and dearer: goal ``fastest_finish`` takes it when it is free.
    ``eval_examples`` (the validation file's lines) adds the evaluations' time.
    """
    options = tuple(_with_evaluation(p, spec, max_steps, eval_examples)
                    for d in pool.device_types()
                    if (p := _plan_on(d, model, spec, pool, max_steps, tokens_per_example,
                                      cpu_price_per_hour, memory_factor)) is not None)
    ranks = min(cpu_ranks, pool.largest("cpu"))
    if ranks > 1 and not isinstance(spec.trainer, SimulatedTrainer) and any(
            p.device_type == "cpu" for p in options):
        cpu = next(d for d in pool.device_types() if d.name == "cpu")
        wide = _plan_on(cpu, model, spec, pool, max_steps, tokens_per_example,
                        cpu_price_per_hour, memory_factor, ranks=ranks)
        options = (*options, *([_with_evaluation(wide, spec, max_steps, eval_examples)]
                               if wide is not None else []))
    if options:
        return PlanOptions(options, "ok")
    detail = why_not(model, spec, pool, memory_factor)
    if spec.precision == "16-bit" and spec.adapter == "lora":
        lower = spec.model_copy(update={"precision": "4-bit"})
        if any(_plan_on(d, model, lower, pool, max_steps, tokens_per_example, None)
               for d in pool.device_types()):
            return PlanOptions((), "choose_lower_precision",
                               f"At 16-bit {detail[0].lower()}{detail[1:]}; at 4-bit it fits")
    return PlanOptions((), "not_available", detail)


def why_not(model: CatalogueModel, spec: JobSpec, pool: Pool,
            memory_factor: float = 1.0) -> str:
    """Why no device type of ``pool`` can hold the job, one sentence without its full stop.

    Mirrors the checks of ``_plan_on``: a GPU job may be sharded over the devices of one
    node, a CPU job may not; a job may plan on ``USABLE_MEMORY`` of a device. Memory
    figures are rounded to whole GB.
    """
    types = pool.device_types()
    if not types:
        return "This server has no nodes"
    gpu = any(d.name != "cpu" for d in types)
    need = memory_factor * memory_gb(model.parameters, spec.adapter, spec.precision, gpu=gpu)

    def offered(d: DeviceType) -> float:
        return d.memory_gb * USABLE_MEMORY * (1 if d.name == "cpu" else pool.largest(d.name))

    best = max(types, key=offered)
    count = 1 if best.name == "cpu" else pool.largest(best.name)
    most = f"{offered(best):.0f} GB ({count} × {best.name})" if count > 1 else \
        f"{offered(best):.0f} GB ({best.name})"
    kind = "GPU memory" if gpu else "memory"
    return (f"The job needs about {need:.0f} GB of {kind}; "
            f"the most one node here can give a job is {most}")


def _plan_on(device: DeviceType, model: CatalogueModel, spec: JobSpec, pool: Pool,
             max_steps: int, tokens_per_example: float,
             cpu_price_per_hour: float | None, memory_factor: float = 1.0,
             ranks: int = 1) -> Plan | None:
    cpu = device.name == "cpu"
    usable = device.memory_gb * USABLE_MEMORY
    most = pool.largest(device.name)
    devices = 1
    if spec.method == "dpo" and spec.adapter == "full":
        memory_factor *= DPO_FULL_MEMORY_FACTOR  # a frozen copy of the weights: the reference
    while memory_factor * memory_gb(model.parameters, spec.adapter, spec.precision,
                                    devices=devices, gpu=not cpu) > usable:
        devices *= 2
        if devices > most or cpu:
            return None
    if cpu:
        devices = ranks  # data parallel: every rank holds the whole model
    batch = spec.hyperparameters.batch_size or 4
    per_token = 6 if spec.adapter == "full" else 4  # FLOPs a parameter a token of training
    decode_s = 0.0
    if spec.method == "reinforcement":  # a group of answers per prompt, sampled, then trained
        hp = spec.hyperparameters
        answer = hp.max_completion_tokens or DEFAULT_COMPLETION_TOKENS
        group = group_size(hp.compute_multiplier or 1.0)
        tokens = batch * group * min(tokens_per_example + answer, model.context_length)
        per_token += GENERATION_FLOPS
        decode_s = answer * DECODE_TOKEN_S.get(device.name, GPU_DECODE_TOKEN_S)
    else:  # the trainer cuts each sequence at the model's context (TrainerConfig.max_seq_length)
        tokens = batch * min(tokens_per_example, model.context_length)
    flops = per_token * model.parameters * tokens
    if spec.precision == "4-bit":
        flops *= 1.3  # dequantizing the NF4 weights on every matmul (QLoRA paper, 4.1)
    rate = devices * device.peak_tflops * 1e12 * device.efficiency
    scaling = 1 + 0.05 * (devices - 1)  # gradient all-reduce between devices
    overhead = STEP_OVERHEAD_S.get(device.name, GPU_STEP_OVERHEAD_S)
    if spec.method == "dpo":
        flops *= DPO_COMPUTE_FACTOR
        overhead *= DPO_OVERHEAD_FACTOR
    step_s = flops / rate * scaling + overhead + decode_s
    # 4-bit reads the 16-bit checkpoint and quantizes it as it loads.
    weights_gb = model.parameters * weight_bytes("16-bit") / GB
    startup_s = STARTUP_S + weights_gb / LOAD_GB_PER_S
    if cpu and spec.precision == "4-bit":
        startup_s += weights_gb / CPU_QUANTIZE_GB_PER_S
    price_per_hour = (cpu_price_per_hour if cpu and cpu_price_per_hour is not None
                      else device.price_per_hour) * devices
    if isinstance(spec.trainer, SimulatedTrainer):
        step_s, startup_s = spec.trainer.step_delay_s, SIMULATED_STARTUP_S
    return Plan(
        device_type=device.name, devices=devices,
        memory_gb=round(memory_factor * memory_gb(model.parameters, spec.adapter,
                                                  spec.precision, devices=1 if cpu else devices,
                                                  gpu=not cpu), 2),
        price_per_hour=price_per_hour, step_time_s=step_s, startup_s=startup_s,
        max_steps=max_steps, tokens_per_step=round(tokens, 3),
    )


def _with_evaluation(plan: Plan, spec: JobSpec, max_steps: int, examples: int) -> Plan:
    """The plan with its evaluations' time: every ``eval_steps`` (reinforcement:
    ``eval_interval``) and at the last step, the whole validation file, in batches of the
    job's size, each a forward pass only (reinforcement: sampling ``eval_samples`` answers
    a prompt)."""
    if not examples or not spec.validation_file:
        return plan
    hp = spec.hyperparameters
    every = hp.eval_steps or hp.eval_interval or CHECKPOINT_EVERY
    evaluations = -(-max_steps // every)
    batches = -(-examples // (hp.batch_size or 4))
    overhead = STEP_OVERHEAD_S.get(plan.device_type, GPU_STEP_OVERHEAD_S)
    forward_s = (plan.step_time_s - overhead) * (EVAL_SHARE_FULL if spec.adapter == "full"
                                                 else EVAL_SHARE_LORA) + overhead
    if spec.method == "reinforcement":  # sampling eval_samples answers a prompt, no update
        forward_s = plan.step_time_s * (hp.eval_samples or 1) \
            / group_size(hp.compute_multiplier or 1.0)
    return plan.model_copy(update={"eval_s": evaluations * batches * forward_s})


def tokens_per_example(model: CatalogueModel, file_bytes: int, line_count: int) -> float:
    """Average tokens of one training example (the tiny model's tokenizer is byte-level)."""
    chars = file_bytes / max(line_count, 1)
    return chars if model.id in TINY_MODELS else max(1.0, chars / CHARS_PER_TOKEN)

