"""Memory of 4-bit (QLoRA) against 16-bit LoRA training, and the memory model's figures for both.

Run: ``.venv/bin/python bench/bench_qlora_memory.py`` (a Llama of 12 layers of width 1024,
152 M parameters: under a minute on 2 idle cores, 5 on busy ones; ``--quick``: 6 layers
of width 512, 25 M; ``--layers L --width W``).

The work: a Llama built here with random weights, saved in bf16 as published checkpoints
are (vocabulary 8,192, a key-value head per 4 query heads, an untied output layer: 89 % of
the 152 M-parameter model's weights are in its linear layers, as 87 % of Llama-3.1-8B's),
with the tiny model's byte-level tokenizer and 32 text examples. Each run loads it as
``python -m alallo.trainers.trl`` does (:func:`alallo.trainers._trl_model.load_model`) and
trains 3 steps of the ``SFTTrainer`` that alallo builds for a job
(:func:`alallo.trainers.trl.build_trainer`: a LoRA adapter of rank 8 on peft's modules for
Llama), in a process of its own, on one side or the other:

- 16-bit LoRA: the bf16 weights (on the CPU they stay in the checkpoint's memory map);
- 4-bit LoRA: the same model quantized to NF4 by bitsandbytes as it loads.

Memory is the process's resident set (anonymous and file-backed: mapped weights are memory
a run needs) sampled every 5 ms from the end of loading to the end of training, its peak,
less the resident set before loading (the imported libraries, printed apart); what loading
left held, and loading's own peak, are printed too. Each side trains with batches of 1
example of 16 tokens, where weights and optimizer state are nearly all the memory, then
with batches of 4 of 256, where activations add theirs. The figures:

- 4-bit against 16-bit: the peak with the small batches;
- bytes per quantized weight as bitsandbytes stores them (packed weights and their
  double-quantized scales) against the memory model's
  :data:`~alallo.capacity._plans.NF4_BYTES`, and the memory 4-bit loading left held (less
  what 16-bit loading holds: code and buffers, its weights mapped but not yet read) against
  the model's weights (:func:`~alallo.capacity._plans.weight_bytes`, with the model's own
  quantized share);
- the memory model against the measure: :func:`~alallo.capacity._plans.memory_gb` for
  each side (on the CPU, with the model's own quantized share) against the whole
  process's peak (libraries included): at least 1 (a plan must not promise a job less
  memory than it takes) and at most 1.5; the fixed part each side implies is printed;
- activations: the larger batches' peak less the small ones', 4-bit against 16-bit
  (the memory model counts the same for both).

On the CPU only (bitsandbytes' CPU kernels): a GPU's figures would be its allocator's.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from _results import report, row

REPO = Path(__file__).resolve().parents[1]
SIDES = ("16-bit", "4-bit")
BATCHES = {"weights": (1, 16), "activations": (4, 256)}
"""Batch size and tokens per example of each run."""
STEPS = 3
VOCABULARY = 8192
MIB = 1024 * 1024


def build_model(path: Path, layers: int, width: int) -> None:
    """A Llama of ``layers`` x ``width`` (MLP 2.75 x width, a key-value head per 4 query
    heads) with the tiny model's tokenizer, saved in bf16; and the examples beside it."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from alallo.trainers.tiny import build_tiny_gpt2

    tokenizer = AutoTokenizer.from_pretrained(build_tiny_gpt2(path.parent / "tiny"))
    heads = max(4, width // 64)
    config = LlamaConfig(vocab_size=VOCABULARY, hidden_size=width,
                         intermediate_size=int(2.75 * width) // 64 * 64,
                         num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=heads // 4, max_position_embeddings=512,
                         tie_word_embeddings=False, bos_token_id=tokenizer.eos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(path)
    tokenizer.save_pretrained(path)
    rows = [{"text": f"The cat sat on mat number {i}; " * 12} for i in range(32)]
    (path.parent / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _resident() -> dict[str, int]:
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key = line.split(":")[0]
            if key in ("RssAnon", "RssFile"):
                fields[key] = int(line.split()[1]) * 1024
    return fields


class _Peak:
    """The peak of the resident set (anonymous + file-backed), sampled every 5 ms."""

    def __init__(self) -> None:
        self.peak = 0
        self._since = 0  # restarts so far: a sample read before one does not count after it
        self._lock = threading.Lock()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while True:
            since = self._since
            now = sum(_resident().values())
            with self._lock:
                if since == self._since:
                    self.peak = max(self.peak, now)
            time.sleep(0.005)

    def restart(self) -> int:
        """The peak so far; then start again from now."""
        with self._lock:
            self._since += 1
            peak, self.peak = self.peak, sum(_resident().values())
        return peak


def measure(side: str, root: Path, batch: int, tokens: int) -> dict[str, Any]:
    """One side's run in this process (the child): its figures, bytes."""
    import torch
    from datasets import Dataset

    from alallo.trainers import TrainerConfig
    from alallo.trainers._data import read_rows
    from alallo.trainers._trl_4bit import quantized_share
    from alallo.trainers._trl_model import load_model, quiet_libraries, trains_in_bf16
    from alallo.trainers._trl_report import ProtocolOut
    from alallo.trainers.trl import build_trainer, choose_threads

    quiet_libraries()
    import bitsandbytes  # noqa: F401  (peft imports it: in the libraries' share, as in a trainer)
    import peft  # noqa: F401
    import trl  # noqa: F401

    bf16 = trains_in_bf16(cuda=False)
    config = TrainerConfig(
        job_id="bench", model=str(root / "model"), model_name=str(root / "model"),
        training_file=str(root / "data.jsonl"), data_format="text",
        output_dir=str(root / side / "model"), checkpoint_dir=str(root / side / "checkpoints"),
        precision=side, max_steps=STEPS, batch_size=batch, logging_steps=1, save_steps=1000,
        max_seq_length=tokens)
    libraries = sum(_resident().values())
    sampler = _Peak()
    started = time.perf_counter()
    model, tokenizer = load_model(config, bf16=bf16)
    load_s = time.perf_counter() - started
    loaded = sum(_resident().values()) - libraries
    choose_threads(model, cuda=False)
    load_peak = sampler.restart()
    rows = read_rows(Path(config.training_file), "text")
    with ProtocolOut(silent=True) as out:
        trainer = build_trainer(config, model, tokenizer, (Dataset.from_list(rows), None), out,
                                None, max_length=tokens, cuda=False, bf16=bf16)
        started = time.perf_counter()
        trainer.train()
        step_s = (time.perf_counter() - started) / STEPS
    import bitsandbytes as bnb

    layers = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    stored = 0  # the packed weights and their double-quantized scales, as held
    for layer in layers:
        state = layer.weight.quant_state
        parts = [layer.weight.data, state.absmax]
        if state.nested:
            parts += [state.state2.absmax, state.state2.code]
        stored += sum(part.numel() * part.element_size() for part in parts)
    return {"side": side, "bf16": bf16, "parameters": model.num_parameters(),
            "quantized": sum(m.in_features * m.out_features for m in layers), "stored": stored,
            "share": quantized_share(model) if side == "4-bit" else 0.0,
            "libraries": libraries, "loaded": loaded, "load_peak": load_peak - libraries,
            "peak": sampler.restart() - libraries, "load_s": load_s, "step_s": step_s,
            "threads": torch.get_num_threads()}


def run_side(side: str, root: Path, batch: int, tokens: int) -> dict[str, Any]:
    """One side in a fresh process (the parent)."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", side, str(root), str(batch), str(tokens)],
        capture_output=True, text=True, check=False, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"{side} failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def predicted(side: str, parameters: int, share: float) -> float:
    """The memory model's bytes for a side, its fixed overhead included."""
    from alallo.capacity._plans import GB, memory_gb

    return memory_gb(parameters, "lora", side, gpu=False, quantized_share=share or None) * GB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 6 x 512 model")
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--width", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    parser.add_argument("--child", nargs=4, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.update(TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
                      TRANSFORMERS_VERBOSITY="error", HF_DATASETS_DISABLE_PROGRESS_BARS="1")
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    sys.path.insert(0, str(REPO))
    if args.child:
        side, root, batch, tokens = args.child
        print(json.dumps(measure(side, Path(root), int(batch), int(tokens))))
        return 0
    layers = args.layers or (6 if args.quick else 12)
    width = args.width or (512 if args.quick else 1024)
    results: dict[tuple[str, str], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="alallo-bench-qlora-") as scratch:
        root = Path(scratch)
        build_model(root / "model", layers, width)
        for name, (batch, tokens) in BATCHES.items():
            for side in SIDES:
                r = results[(name, side)] = run_side(side, root, batch, tokens)
                print(f"batch {batch} x {tokens:3}, {side:6}: peak {r['peak'] / MIB:7.1f} MiB "
                      f"training; loading: {r['loaded'] / MIB:6.1f} MiB held after, "
                      f"{r['load_peak'] / MIB:6.1f} MiB at its peak, {r['load_s']:.1f} s; "
                      f"{r['step_s']:.2f} s a step", flush=True)
    four = results[("weights", "4-bit")]
    rates = [four["parameters"] * 2 / r["load_s"] / 1e9
             for (_, side), r in results.items() if side == "4-bit"]
    print(f"4-bit loading quantized {min(rates):.3f} to {max(rates):.3f} GB/s of 16-bit weights "
          f"(the memory model's CPU_QUANTIZE_GB_PER_S: its start-up)")
    print(f"model: Llama {layers} x {width}, {four['parameters'] / 1e6:.1f} M parameters, "
          f"{four['share']:.1%} of them quantized in 4-bit; libraries before loading "
          f"{four['libraries'] / MIB:.0f} MiB; bf16: {four['bf16']}; {four['threads']} threads")
    return report(rows_of(results), args.json)


def rows_of(results: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures of the module docstring."""
    from alallo.capacity._plans import GB, NF4_BYTES, weight_bytes

    sixteen, four = results[("weights", "16-bit")], results[("weights", "4-bit")]
    nf4 = four["stored"] / four["quantized"]
    weights = four["parameters"] * weight_bytes("4-bit", quantized_share=four["share"])
    # Less what 16-bit loading holds: code and buffers (its weights are mapped, not yet read).
    held = four["loaded"] - sixteen["loaded"]
    rows = [
        row("QLoRA: 4-bit LoRA peak memory vs 16-bit LoRA (batch 1)", four["peak"] / MIB,
            "MiB", sixteen["peak"] / MIB, None, met=four["peak"] < sixteen["peak"]),
        row("QLoRA: bytes per quantized weight (as stored) vs the memory model's", nf4, "B",
            NF4_BYTES, None, met=abs(nf4 / NF4_BYTES - 1) <= 0.05),
        row("QLoRA: memory 4-bit loading holds vs the memory model's weights", held / MIB,
            "MiB", weights / MIB, None, met=abs(held / weights - 1) <= 0.15),
    ]
    for side, measured in (("16-bit", sixteen), ("4-bit", four)):
        whole = measured["peak"] + measured["libraries"]
        model = predicted(side, measured["parameters"], measured["share"])
        rows.append(row(f"QLoRA: memory model vs measured process peak ({side} LoRA, batch 1)",
                        model / MIB, "MiB", whole / MIB, None,
                        met=1.0 <= model / whole <= 1.5))
        print(f"{side}: fixed part {(whole - model + predicted_overhead() * GB) / GB:.2f} GB "
              f"(the process's peak less the model's per-parameter part)")
    wide = {side: results[("activations", side)]["peak"] - results[("weights", side)]["peak"]
            for side in SIDES}
    rows.append(row("QLoRA: activations 4-bit vs 16-bit (batch 4 x 256 less batch 1)",
                    wide["4-bit"] / MIB, "MiB", wide["16-bit"] / MIB, None,
                    met=abs(wide["4-bit"] / wide["16-bit"] - 1) <= 0.25))
    return rows


def predicted_overhead() -> float:
    """The memory model's fixed part on the CPU, GB."""
    from alallo.capacity._plans import CPU_OVERHEAD_GB

    return CPU_OVERHEAD_GB


if __name__ == "__main__":
    sys.exit(main())
