"""Reinforcement fine-tuning throughput: an alallo RFT job vs TRL's ``GRPOTrainer`` run directly.

Run: ``.venv/bin/python bench/bench_rft.py`` (5 pairs of 31 steps, a ``string_check`` grader
and a ``python`` one; ``--quick``: 3 pairs of 16 steps, ``string_check`` only, ~70 s;
``--pairs N``, ``--steps N``, ``--graders string_check,python``).

The work: ``alallo/tiny-gpt2`` (:func:`alallo.trainers.tiny.build_tiny`, built by the
warm-up job), LoRA (alallo's default adapter), 16 prompts in OpenAI's RFT rows (a
developer and a user message, and the ``answer`` the grader reads), 2 prompts a step
(``batch_size``), 4 answers a prompt (``compute_multiplier`` 1), answers up to 32 tokens,
seed 0, a checkpoint every 10 steps (alallo's; the newest 3 kept), the rewards logged every
10 steps, no validation file. Graders: ``string_check`` (the answer equals
``{{ item.answer }}``) and ``python`` (the share of the answer's characters that are small
letters: a sandboxed process per step, the same ~50 ms both ways).

- alallo: a job of ``method: {"type": "reinforcement", ...}`` created on an embedded
  :class:`alallo.Runtime` (SQLite, one slot, the default warm trainer process: the
  trainer forked per job, as a server runs it; the HTTP layer adds nothing to a
  trainer's steps), run to ``succeeded``;
- direct: a script run as its own process that builds TRL's ``GRPOTrainer`` from the config
  file alallo wrote for the warm-up job, with its own checkpoint directory: the same model
  files, data, ``GRPOConfig`` (``per_device_train_batch_size`` = prompts × answers a
  prompt, ``num_generations``, ``max_completion_length``, learning rate, seed,
  ``use_cpu``, bf16 as alallo chooses, ``beta=0``, no activation checkpointing, the same
  logging and checkpoint steps and checkpoints kept), the same LoRA, one torch thread (as
  alallo for a model under 10 M parameters), a LoRA seeded the same way, and as the reward
  :func:`alallo.trainers.graders.grade_many` of the same grader: the same grading cost.

Only training is timed, by the time each step ends: for alallo the job's ``last_step_at``
as the runtime set it on reading that step's progress line (read back after each update of
the job's stream; a logging step's line waits for its log, a few milliseconds), for the
direct run a ``TrainerCallback``'s ``on_step_end``. The figure is the steady state: the
median of the steps' times (one step's end to the next's), the first step (allocations,
first calls) left out. Not the span from the first step to the last: on this shared 2-core
machine a few seconds of someone else's work land inside one run's span and not the
other's: in a first try the spans' ratios swung 0.6-1.9 from pair to pair; the medians'
have stayed within 0.68-1.14. That leaves the checkpoints (steps 10, 20 and 30, where alallo also hashes
its own) out of the figure; the span's ratio, checkpoints in, is printed beside it.
Figures: prompts a second (prompts a step / the median step) and answer tokens generated a
second (TRL's ``completions/mean_length`` of each logging step, weighted by the steps it
covers, × answers a step / the median step; from the last checkpoint's
``trainer_state.json`` for alallo, the trainer's ``log_history`` for the direct run). Both
sides sample with the same seed and generate the same answers: the two mean lengths are
printed, and match.

Pairs alternate (alallo then direct, then direct then alallo, ...) after a warm-up job
through alallo; each side's figure is its median, and the spread is the lowest and highest of
the pairs' ratios. Target: alallo / direct >= 0.97.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _configs import fresh_config
from _results import report, row

REPO = Path(__file__).resolve().parents[1]
PROMPTS, BATCH, ANSWERS, ANSWER_TOKENS = 16, 2, 4, 32
TARGET = 0.97

LOWERCASE = """
def grade(sample, item):
    text = sample["output_text"]
    return sum(ch in "abcdefghijklmnopqrstuvwxyz" for ch in text) / max(1, len(text))
"""
GRADERS: dict[str, dict[str, Any]] = {
    "string_check": {"type": "string_check", "name": "exact",
                     "input": "{{ sample.output_text }}", "reference": "{{ item.answer }}",
                     "operation": "eq"},
    "python": {"type": "python", "name": "lowercase", "source": LOWERCASE},
}

DIRECT = '''
import json, os, sys, time
import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback, set_seed
from trl import GRPOConfig, GRPOTrainer
from alallo.trainers.graders import GRADER, grade_many

c = json.loads(open(sys.argv[1]).read())
if "OMP_NUM_THREADS" not in os.environ:
    torch.set_num_threads(1)  # as alallo's trainer does for a model under 10 M parameters
rows = [json.loads(line) for line in open(c["training_file"]) if line.strip()]
dataset = Dataset.from_list([{"prompt": r["messages"], "item": json.dumps(r)} for r in rows])
grader = GRADER.validate_python(c["grader"])

def reward(prompts, completions, item, **columns):
    texts = ["".join(m["content"] for m in a) if isinstance(a, list) else a for a in completions]
    return [g.reward for g in grade_many(grader, texts, [json.loads(i) for i in item])]

reward.__name__ = "grader"
ends = []

class Timer(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        ends.append(time.perf_counter())

model = AutoModelForCausalLM.from_pretrained(c["model"])
tokenizer = AutoTokenizer.from_pretrained(c["model"])
tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
lora = LoraConfig(r=c["lora_rank"], lora_alpha=c["lora_alpha"] or 2 * c["lora_rank"],
                  fan_in_fan_out=True, task_type="CAUSAL_LM") if c["adapter"] == "lora" else None
args = GRPOConfig(output_dir=c["checkpoint_dir"], max_steps=c["max_steps"],
                  per_device_train_batch_size=c["batch_size"] * c["num_generations"],
                  num_generations=c["num_generations"],
                  max_completion_length=c["max_completion_length"],
                  learning_rate=c["learning_rate"], seed=c["seed"], use_cpu=True,
                  bf16=sys.argv[2] == "1", beta=0.0, activation_checkpointing=False,
                  logging_steps=c["logging_steps"], save_steps=c["save_steps"],
                  save_total_limit=c["keep_checkpoints"], report_to=[], disable_tqdm=True,
                  dataloader_pin_memory=False)
set_seed(c["seed"])  # before peft draws the adapter's weights, as alallo
trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=dataset,
                      processing_class=tokenizer, peft_config=lora, callbacks=[Timer()])
trainer.train()
print("RESULT " + json.dumps({"ends": ends, "log_history": trainer.state.log_history}))
'''


@dataclass(frozen=True)
class Run:
    """One run's training, its first step left out."""

    step_s: float
    """The median seconds of a step (from one step's end to the next's)."""
    span_s: float
    """From the end of the first step to the end of the last (checkpoints included)."""
    steps: int
    """Steps in that span (the run's steps less one)."""
    mean_length: float
    """The run's mean answer length, tokens (TRL's ``completions/mean_length``, each logging
    step's weighted by the steps it covers)."""

    @property
    def prompts_per_s(self) -> float:
        return BATCH / self.step_s

    @property
    def tokens_per_s(self) -> float:
        return self.mean_length * BATCH * ANSWERS / self.step_s

    @property
    def span_prompts_per_s(self) -> float:
        return self.steps * BATCH / self.span_s


def timed(ends: list[tuple[int, float]], history: list[dict[str, Any]]) -> Run:
    """A run from the times its steps ended (``(step, seconds)``, in order, the first step
    among them; a step may be missing, when two were read together) and its log history."""
    if len(ends) < 2 or ends[0][0] != 1:
        raise ValueError(f"expected the end of step 1 and of later steps, got {ends}")
    steps: list[float] = []
    for (before, t0), (step, t1) in zip(ends, ends[1:]):
        steps += [(t1 - t0) / (step - before)] * (step - before)
    return Run(statistics.median(steps), ends[-1][1] - ends[0][1], ends[-1][0] - 1,
               mean_length(history))


def mean_length(log_history: list[dict[str, Any]]) -> float:
    """The mean of TRL's ``completions/mean_length`` over the logging steps of a run, each
    weighted by the steps since the previous one (every step samples as many answers)."""
    total, before, steps = 0.0, 0, 0
    for entry in log_history:
        if "completions/mean_length" in entry:
            covered = entry["step"] - before
            total += entry["completions/mean_length"] * covered
            steps += covered
            before = entry["step"]
    if steps == 0:
        raise ValueError(f"no completions/mean_length in the log history: {log_history}")
    return total / steps


def ratios(alallo: list[float], direct: list[float]) -> tuple[float, float, float]:
    """The median ratio of the sides' medians, and the lowest and highest pair's ratio."""
    pairs = [a / d for a, d in zip(alallo, direct, strict=True)]
    return statistics.median(alallo) / statistics.median(direct), min(pairs), max(pairs)


def prompts_file() -> bytes:
    return b"".join(json.dumps({
        "messages": [{"role": "developer", "content": "Answer in small letters."},
                     {"role": "user", "content": f"Say something, {i}."}],
        "answer": f"word {i}"}).encode() + b"\n" for i in range(PROMPTS))


async def through_alallo(rt: Any, file_id: str, grader: dict[str, Any],
                         steps: int) -> tuple[Run, str]:
    """One RFT job to ``succeeded``; its training, and its id. Each step's end is the job's
    ``last_step_at`` as the runtime set it when it read that step's progress line (read from
    the job after each update the job's stream brings)."""
    account = await rt.authenticate(rt.api_key)
    job = await rt.create_job(account, {
        "model": "alallo/tiny-gpt2", "training_file": file_id, "adapter": "lora", "seed": 0,
        "method": {"type": "reinforcement", "reinforcement": {"grader": grader,
                   "hyperparameters": {"max_steps": steps, "batch_size": BATCH,
                                       "compute_multiplier": ANSWERS / 4,
                                       "max_completion_tokens": ANSWER_TOKENS,
                                       "learning_rate_multiplier": 10}}}})
    ends: dict[int, float] = {}
    async for item in rt.stream(account, job.id):
        if item.kind == "job" and item.data["progress"]["step"] not in ends:
            now = await rt.get_job(account, job.id)
            if now.last_step_at is not None:
                ends.setdefault(now.progress.step, now.last_step_at)
    final = await rt.get_job(account, job.id)
    if final.status.value != "succeeded" or final.checkpoint is None:
        raise RuntimeError(f"job {job.id} ended {final.status.value}: {final.message}")
    state = json.loads((Path(final.checkpoint.path) / "trainer_state.json").read_text())
    return timed(sorted(ends.items()), state["log_history"]), job.id


def direct(script: Path, template: Path, workdir: Path, bf16: bool) -> Run:
    """The direct script with the config alallo wrote, in a process of its own."""
    config = fresh_config(template, workdir)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1",
           "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, str(script), str(config), "1" if bf16 else "0"],
                          cwd=config.parent, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the direct run failed:\n{(done.stdout + done.stderr)[-3000:]}")
    result = json.loads(lines[-1].removeprefix("RESULT "))
    return timed([(i + 1, t) for i, t in enumerate(result["ends"])], result["log_history"])


async def main(graders: list[str], pairs: int, steps: int, json_path: Path | None) -> int:
    import structlog
    import trio

    from alallo import Runtime, Settings
    from alallo.trainers._trl_model import trains_in_bf16

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    bf16 = trains_in_bf16(cuda=False)
    rows = []
    with tempfile.TemporaryDirectory(prefix="alallo-bench-rft-") as scratch:
        root = Path(scratch)
        script = root / "direct_grpo.py"
        script.write_text(DIRECT)
        settings = Settings(data_dir=root / "data", max_concurrent_jobs=1)
        async with Runtime(settings) as rt:
            account = await rt.authenticate(rt.api_key)
            file_id = (await rt.upload_file(account, "prompts.jsonl", prompts_file())).id
            for name in graders:
                grader = GRADERS[name]
                # Warm-up: builds the model (the first job), starts the warm trainer
                # process, fills the page cache, and writes the config the direct runs
                # read. (Each direct run is a fresh process: nothing of one warms the next.)
                warm, job_id = await through_alallo(rt, file_id, grader, steps)
                template = settings.jobs_dir / job_id / "attempt-1" / "config.json"
                print(f"{name} warm-up: alallo {warm.prompts_per_s:.2f} prompts/s", flush=True)
                runs: dict[str, list[Run]] = {"alallo": [], "direct": []}
                for i in range(pairs):
                    for side in ("alallo", "direct") if i % 2 == 0 else ("direct", "alallo"):
                        if side == "alallo":
                            run = (await through_alallo(rt, file_id, grader, steps))[0]
                        else:
                            run = await trio.to_thread.run_sync(
                                direct, script, template, root / f"{name}-{i}", bf16)
                        runs[side].append(run)
                        print(f"{name} pair {i + 1}: {side:<7}{run.prompts_per_s:>7.2f} "
                              f"prompts/s {run.tokens_per_s:>8.1f} tokens/s (median step "
                              f"{run.step_s * 1000:.0f} ms; {run.steps} steps in "
                              f"{run.span_s:.2f} s: {run.span_prompts_per_s:.2f} prompts/s; "
                              f"answers {run.mean_length:.2f} tokens)", flush=True)
                rows += _rows(name, runs)
    return report(rows, json_path)


def _rows(name: str, runs: dict[str, list[Run]]) -> list[dict[str, Any]]:
    span, low, high = ratios([run.span_prompts_per_s for run in runs["alallo"]],
                             [run.span_prompts_per_s for run in runs["direct"]])
    print(f"{name}: first to last step, checkpoints included: ratio {span:.3f} "
          f"(pairs {low:.3f}-{high:.3f})")
    out = []
    for figure, unit in (("prompts_per_s", "prompts/s"), ("tokens_per_s", "tokens/s")):
        a = [getattr(run, figure) for run in runs["alallo"]]
        d = [getattr(run, figure) for run in runs["direct"]]
        ratio, low, high = ratios(a, d)
        print(f"{name}: alallo {statistics.median(a):.2f} {unit}, direct "
              f"{statistics.median(d):.2f}: ratio {ratio:.3f} (pairs {low:.3f}-{high:.3f}; "
              f"target >= {TARGET})")
        out.append(row(f"RFT ({name} grader): alallo {unit} vs GRPOTrainer direct",
                       statistics.median(a), unit, statistics.median(d), TARGET))
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="3 pairs of 16 steps, the string_check grader only")
    parser.add_argument("--pairs", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--graders", default=None, help="string_check,python")
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    import trio

    sys.exit(trio.run(main, (args.graders or ("string_check" if args.quick
                                              else "string_check,python")).split(","),
                      args.pairs or (3 if args.quick else 5),
                      args.steps or (16 if args.quick else 31), args.json))
