"""Training throughput: tokens/s of alallo's TRL trainer vs plain TRL and TRL's fast paths.

Run: ``.venv/bin/python bench/bench_throughput.py`` (3 rounds of 24 steps; ``--quick`` for 3 rounds of 16 steps of a
smaller model; ``--rounds N``; ``--layers L --width W`` for another model).

The work: a GPT-2-shaped model built here with random weights and the byte-level
tokenizer of ``alallo/tiny-gpt2`` (no network; 4 layers of width 256, ~3.3 M parameters;
``--quick``: 2 layers of width 128; without dropout, as today's Llama-style models), trained on a text file of 64 examples of 20 to 400
tokens (the sample's sentences strung together, seeded), batches of 8, max length 512,
for a fixed number of steps, once with a LoRA adapter (rank 8 on ``c_attn``) and once as a
full fine-tune. Sides, one process, each run from the same saved weights; in a round the
sides step in turn (:class:`Turns`: one step of A, one of B, ... on the same batch, so that
the machine's slow seconds fall on every side; the order reversed every other round), each
side's figure the median of its rounds:

- alallo: the ``SFTTrainer`` that ``python -m alallo.trainers.trl`` builds for a job
  (:func:`alallo.trainers.trl.build_trainer`), with alallo's own choices (threads,
  no activation checkpointing on the CPU, padding-free batches where the model allows,
  each sequence of a row attended on its own);
- plain TRL: ``SFTTrainer`` with ``SFTConfig``'s defaults, given only what defines the job
  (batch, steps, learning rate, max length, seed, CPU): so bf16 autocast (fast on a CPU
  with bf16 units, AMX or AVX-512 BF16; several times slower on one without them),
  activation checkpointing, torch's default threads;
- tuned TRL: the same in alallo's precision (bf16 on a CPU with bf16 units, else fp32:
  :func:`alallo.trainers._trl_model.trains_in_bf16`), ``gradient_checkpointing=False``,
  alallo's thread count
  (what alallo's trainer ran before it chose padding-free batches);
- TRL fast paths: tuned TRL plus ``padding_free=True`` (which TRL
  allows without packing only with ``max_length=None``: every example here fits), or plus
  ``packing=True`` (BFD packing into 512-token rows, padding-free). Liger kernels need
  Triton and a GPU: not installable on this CPU machine, so not a side here.

Tokens are counted the same way on every side: the tokens a step trains on (labels that
are not -100, less the first token of each sequence, which predicts nothing), summed over
the steps, over the seconds spent inside training steps (``on_step_begin`` to
``on_step_end``: no data loading, no checkpoints), the first step of each run left out.
On a CPU without bf16 units plain TRL runs a third of the steps (at least 3): it steps
several times slower there. Packing puts more tokens in a step, so
it reaches the same tokens in fewer steps; the figure is tokens/s either way.

On a GPU the model FLOPs utilisation is printed too (:func:`mfu`: 6 x parameters x
tokens/s over the device's peak bf16 FLOP/s); on the CPU it is None.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _results import report, row

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "sample.jsonl"
EXAMPLES, BATCH, MAX_LENGTH = 64, 8, 512

PEAK_BF16_FLOPS = {  # dense bf16 tensor-core peaks, FLOP/s, from the vendors' data sheets
    "H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "L4": 121e12,
    "A10G": 125e12, "A10": 125e12, "RTX 4090": 165e12, "V100": 125e12, "T4": 65e12,
}


def mfu(params: int, tokens_per_s: float, device_name: str | None) -> float | None:
    """Model FLOPs utilisation: ``6 * params * tokens_per_s / peak`` (Kaplan et al. 2020's
    6N FLOPs per trained token; attention's FLOPs left out, as in PaLM's MFU), the peak
    from :data:`PEAK_BF16_FLOPS` by the device's name; None on the CPU or an unknown device."""
    if device_name is None:
        return None
    peak = next((flops for name, flops in PEAK_BF16_FLOPS.items() if name in device_name), None)
    return None if peak is None else 6 * params * tokens_per_s / peak


def build_model(path: Path, layers: int, width: int) -> int:
    """A GPT-2 of ``layers`` x ``width`` with the tiny model's tokenizer; its parameters."""
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from alallo.trainers.tiny import build_tiny_gpt2

    tiny = build_tiny_gpt2(path.parent / "tiny")
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=MAX_LENGTH, n_embd=width,
                        n_layer=layers, n_head=max(2, width // 64),
                        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.eos_token_id,
                        # No dropout, as Llama, Qwen, Mistral and Gemma train (GPT-2's 0.1
                        # keeps alallo on padded batches: its masks follow the batch's shape).
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return model.num_parameters()


def write_data(path: Path) -> None:
    """64 text examples of 20 to ~400 bytes (= tokens): the sample's sentences, seeded."""
    sentences = [json.loads(line)["text"] for line in SAMPLE.read_text().splitlines()]
    rng = random.Random(0)
    rows = [" ".join(rng.choice(sentences) for _ in range(rng.choice([1, 1, 2, 3, 5, 8])))
            for _ in range(EXAMPLES)]
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in rows))


class Turns:
    """The sides of a round step in turn, one training step each, as a baton passes round a
    ring: the run whose turn it is works (its setup, a step, what ``Trainer`` does between
    steps) while the others wait; so the machine's slow and fast seconds fall on every
    side alike (step i of each side runs within a few hundred milliseconds of the others',
    on the same batch), not on whichever side ran alone in them."""

    def __init__(self, sides: list[str]) -> None:
        self._ring = list(sides)
        self._current = self._ring[0]
        self._changed = threading.Condition()

    def wait(self, side: str) -> None:
        """Block until it is ``side``'s turn."""
        with self._changed:
            self._changed.wait_for(lambda: self._current == side)

    def pass_on(self, side: str, *, leaving: bool = False) -> None:
        """``side`` hands the baton to the next side of the ring (and, ``leaving``, leaves
        the ring: its run has ended)."""
        with self._changed:
            ring = self._ring
            following = ring[(ring.index(side) + 1) % len(ring)]
            if leaving:
                ring.remove(side)
            if self._current == side:
                self._current = following
            self._changed.notify_all()


class Meter:
    """Counts the trained tokens of each step and the seconds inside steps, the first step
    (a warm-up: allocations, first calls) left out; with ``turns``, each step waits for its
    turn first (and sets the side's torch threads again: they are the process's)."""

    def __init__(self) -> None:
        self.tokens = 0
        self.busy_s = 0.0
        self.steps = 0

    def attach(self, trainer: Any, side: str, turns: Turns | None) -> None:
        import torch
        from transformers import TrainerCallback

        meter, began, threads = self, [0.0], torch.get_num_threads()
        step = trainer.training_step

        def counted(model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            if meter.steps > 0:
                meter.tokens += int((inputs["labels"][:, 1:] != -100).sum())
            return step(model, inputs, *args, **kwargs)

        class Timer(TrainerCallback):
            def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
                if turns is not None:
                    turns.pass_on(side)
                    turns.wait(side)
                    torch.set_num_threads(threads)
                began[0] = time.perf_counter()

            def on_step_end(self, *args: Any, **kwargs: Any) -> None:
                if meter.steps > 0:
                    meter.busy_s += time.perf_counter() - began[0]
                meter.steps += 1

        trainer.training_step = counted
        trainer.add_callback(Timer())


def train(side: str, adapter: str, model_dir: Path, data: Path, scratch: Path,
          steps: int, threads: int, turns: Turns | None = None) -> float:
    """One run of ``side`` (with ``turns``: stepping in turn with the other sides); returns
    trained tokens per second of steps."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from alallo.trainers import TrainerConfig
    from alallo.trainers._data import read_rows
    from alallo.trainers._trl_model import load_model, lora_config, trains_in_bf16
    from alallo.trainers._trl_report import ProtocolOut
    from alallo.trainers.trl import build_trainer, choose_threads

    out_dir = scratch / f"{side}-{adapter}-{time.monotonic_ns()}"
    config = TrainerConfig(job_id="bench", model=str(model_dir), model_name=str(model_dir),
                           training_file=str(data), data_format="text",
                           output_dir=str(out_dir / "model"),
                           checkpoint_dir=str(out_dir / "checkpoints"), adapter=adapter,
                           max_steps=steps, batch_size=BATCH, max_seq_length=MAX_LENGTH,
                           save_steps=steps, logging_steps=steps)
    rows = read_rows(data, "text")
    torch.set_num_threads(threads)
    bf16 = trains_in_bf16(cuda=False)  # alallo's choice on this CPU (bf16 units: bf16)
    if side == "alallo":
        model, tokenizer = load_model(config, bf16=bf16)
        choose_threads(model, cuda=False)
        with ProtocolOut(silent=True) as out:
            trainer = build_trainer(config, model, tokenizer, (Dataset.from_list(rows), None),
                                    out, None, max_length=MAX_LENGTH, cuda=False, bf16=bf16)
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        # The fast paths, tuned as alallo tunes a CPU run (its precision, one thread for a
        # small model, no activation checkpointing), so that what differs from alallo is the
        # batch's shape.
        tuned = {"gradient_checkpointing": False, "bf16": bf16}
        fast = {"plain": {}, "tuned": tuned,
                "padding_free": {"padding_free": True, "max_length": None} | tuned,
                "packing": {"packing": True} | tuned}[side]
        if side != "plain":
            choose_threads(model, cuda=False)
        args = SFTConfig(**({"output_dir": str(out_dir / "checkpoints"), "max_steps": steps,
                             "per_device_train_batch_size": BATCH, "learning_rate": 1e-3,
                             "max_length": MAX_LENGTH, "seed": 0, "use_cpu": True,
                             "report_to": [], "disable_tqdm": True, "save_strategy": "no",
                             "logging_steps": steps} | fast))
        trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                             processing_class=tokenizer,
                             peft_config=lora_config(config, model) if adapter == "lora" else None)
    meter = Meter()
    meter.attach(trainer, side, turns)
    trainer.train()
    return meter.tokens / meter.busy_s


def in_turn(sides: list[str], run: Callable[[str, Turns], float]) -> dict[str, float]:
    """``run(side, turns)`` of every side, each in its own thread, stepping in turn
    (:class:`Turns`); each side's result. Raises the first side's error, if any."""
    turns, rates, errors = Turns(sides), {}, []

    def one(side: str) -> None:
        turns.wait(side)  # its setup in its turn as well
        try:
            rates[side] = run(side, turns)
        except BaseException as exc:  # noqa: BLE001 - raised again below, in the main thread
            errors.append(exc)
        finally:
            turns.pass_on(side, leaving=True)

    threads = [threading.Thread(target=one, args=(side,), name=side) for side in sides]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 2 x 128 model, 16 steps")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--width", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--sides", default="alallo,plain,tuned,padding_free,packing")
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    rounds = args.rounds or 3  # medians: a single quick round swung by 10-30 %
    layers = args.layers or (2 if args.quick else 4)
    width = args.width or (128 if args.quick else 256)
    steps = args.steps or (16 if args.quick else 24)
    sides = args.sides.split(",")
    os.environ.update(TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
                      TRANSFORMERS_VERBOSITY="error", HF_DATASETS_DISABLE_PROGRESS_BARS="1")
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torch

    from alallo.trainers._trl_model import quiet_libraries

    quiet_libraries()
    threads = torch.get_num_threads()
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    figures: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="alallo-bench-throughput-") as scratch:
        root = Path(scratch)
        params = build_model(root / "model", layers, width)
        write_data(root / "data.jsonl")
        print(f"model: GPT-2 {layers} x {width}, {params / 1e6:.2f} M parameters; "
              f"{EXAMPLES} examples, batch {BATCH}, {steps} steps; device: {device or 'CPU'}, "
              f"{threads} threads")
        from alallo.trainers._trl_model import trains_in_bf16

        # Plain TRL (bf16 autocast) steps several times slower on a CPU without bf16 units:
        # there fewer steps make its rate.
        plain_steps = steps if trains_in_bf16(cuda=False) else max(3, steps // 3)
        for adapter in ("lora", "full"):
            # Warm-up (not counted): the libraries, and the first side's kernels (the first
            # run of a side in bf16 was 30-40 % slower than the next ones).
            train(sides[0], adapter, root / "model", root / "data.jsonl", root, steps, threads)
            for i in range(rounds):
                order = sides if i % 2 == 0 else sides[::-1]
                rates = in_turn(order, lambda side, turns: train(
                    side, adapter, root / "model", root / "data.jsonl", root,
                    plain_steps if side == "plain" else steps, threads, turns))
                for side in order:
                    figures.setdefault((adapter, side), []).append(rates[side])
                    print(f"{adapter:4} round {i + 1}: {side:<13}{rates[side]:>10,.0f} tokens/s",
                          flush=True)
    rows = []
    for adapter in ("lora", "full"):
        med = {side: statistics.median(figures[(adapter, side)]) for side in sides}
        a = med["alallo"]
        name = {"lora": "LoRA", "full": "full fine-tune"}[adapter]
        util = mfu(params, a, device)
        print(f"{name}: " + ", ".join(f"{side} {med[side]:,.0f}" for side in sides)
              + f" tokens/s; MFU {'n/a on the CPU' if util is None else f'{util:.1%}'}")
        if "plain" in med:
            rows.append(row(f"throughput ({name}): alallo tokens/s vs plain TRL", a,
                            "tokens/s", med["plain"], 1.0))
        fast = [side for side in ("padding_free", "packing") if side in med]
        if fast:
            best = max(fast, key=lambda side: med[side])
            rows.append(row(f"throughput ({name}): alallo tokens/s vs best TRL fast path "
                            f"({best})", a, "tokens/s", med[best], 1.0))
    return report(rows, args.json)


if __name__ == "__main__":
    sys.exit(main())
