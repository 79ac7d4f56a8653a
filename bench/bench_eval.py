"""Evaluation's overhead: alallo's TRL trainer with a validation file vs plain TRL evaluating
the same way, each a process of its own, launch to exit.

Run: ``.venv/bin/python bench/bench_eval.py`` (5 pairs; ``--quick`` for 2; ``--pairs N``).

The work: the shipped sample (``examples/sample.jsonl``, 48 examples) on
``alallo/tiny-gpt2``, LoRA rank 8 on ``c_attn``, 40 steps of 4 examples, the loss
logged every 10 steps, a checkpoint every 10 steps (two kept), and an evaluation on a
validation file of 16 examples every 10 steps:

- alallo: ``python -m alallo.trainers.trl CONFIG`` with the config the runtime writes
  (:class:`alallo.trainers.TrainerConfig`, ``validation_file`` set): what a job runs,
  with its protocol lines (metrics, evaluations, checkpoints with their hashes) read
  through a pipe as the runtime reads them;
- plain TRL: a script that builds the same ``SFTTrainer`` (the same model, data, LoRA
  settings, ``SFTConfig``, ``eval_strategy="steps"``, one thread as alallo uses for a model
  this small) and calls ``train()`` and ``save_model()``, nothing else.

The two alternate (A B A B ...) after a warm-up of each, and each side's figure is its
median. Target: alallo / plain <= 1.05.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import append_rows, row

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "sample.jsonl"
STEPS, EVERY, BATCH = 40, 10, 4

PLAIN_TRL = '''
import json, sys
import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

c = json.loads(open(sys.argv[1]).read())
torch.set_num_threads(1)
rows = lambda path: [json.loads(line) for line in open(path) if line.strip()]
model = AutoModelForCausalLM.from_pretrained(c["model"])
tokenizer = AutoTokenizer.from_pretrained(c["model"])
args = SFTConfig(output_dir=c["checkpoint_dir"], max_steps=c["max_steps"],
                 per_device_train_batch_size=c["batch_size"],
                 per_device_eval_batch_size=c["batch_size"],
                 learning_rate=c["learning_rate"], logging_steps=c["logging_steps"],
                 save_steps=c["save_steps"], save_total_limit=2, eval_strategy="steps",
                 eval_steps=c["eval_steps"], use_cpu=True, report_to=[], disable_tqdm=True,
                 max_length=c["max_seq_length"], dataset_text_field="text", packing=False,
                 activation_checkpointing=False, dataloader_pin_memory=False)
trainer = SFTTrainer(model=model, args=args, processing_class=tokenizer,
                     train_dataset=Dataset.from_list(rows(c["training_file"])),
                     eval_dataset=Dataset.from_list(rows(c["validation_file"])),
                     peft_config=LoraConfig(r=c["lora_rank"], lora_alpha=2 * c["lora_rank"],
                                            target_modules=["c_attn"], task_type="CAUSAL_LM"))
trainer.train()
trainer.save_model(c["output_dir"])
'''


def configs(root: Path, model: Path) -> Path:
    """The shared config (alallo's trainer config; the plain script reads the same keys)."""
    lines = SAMPLE.read_text().splitlines()
    validation = root / "valid.jsonl"
    validation.write_text("\n".join(lines[:16]) + "\n")
    config = {
        "job_id": "ft-bench", "model": str(model), "model_name": "alallo/tiny-gpt2",
        "training_file": str(SAMPLE), "data_format": "text",
        "validation_file": str(validation), "validation_format": "text",
        "output_dir": "", "checkpoint_dir": "", "max_steps": STEPS, "batch_size": BATCH,
        "learning_rate": 1e-3, "lora_rank": 8, "logging_steps": EVERY, "save_steps": EVERY,
        "eval_steps": EVERY, "max_seq_length": 128,
    }
    path = root / "config.json"
    path.write_text(json.dumps(config))
    return path


def one_run(command: list[str], template: Path, workdir: Path) -> float:
    """One process, launch to exit, its output read through a pipe; seconds."""
    config = json.loads(template.read_text())
    config["output_dir"] = str(workdir / "model")
    config["checkpoint_dir"] = str(workdir / "checkpoints")
    workdir.mkdir(parents=True)
    path = workdir / "config.json"
    path.write_text(json.dumps(config))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    start = time.perf_counter()
    done = subprocess.run([*command, str(path)], cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{command} failed:\n{done.stdout.decode()[-3000:]}")
    return elapsed


def main(pairs: int, json_path: Path | None) -> None:
    from alallo.trainers.tiny import build_tiny_gpt2

    with tempfile.TemporaryDirectory(prefix="alallo-bench-eval-") as scratch:
        root = Path(scratch)
        model = build_tiny_gpt2(root / "model")
        template = configs(root, model)
        script = root / "plain_trl.py"
        script.write_text(PLAIN_TRL)
        sides = {"plain": [sys.executable, str(script)],
                 "alallo": [sys.executable, "-m", "alallo.trainers.trl"]}
        times: dict[str, list[float]] = {side: [] for side in sides}
        for side, command in sides.items():  # warm-up: the page cache, the model's files
            print(f"warm-up {side}: {one_run(command, template, root / f'warm-{side}'):.2f} s")
        for i in range(pairs):
            for side in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
                t = one_run(sides[side], template, root / f"{side}-{i}")
                times[side].append(t)
                print(f"round {i + 1}: {side:<8}{t:>7.2f} s", flush=True)
    plain, alallo = statistics.median(times["plain"]), statistics.median(times["alallo"])
    print(f"median plain TRL {plain:.2f} s, alallo's trainer {alallo:.2f} s: "
          f"ratio {alallo / plain:.3f} (target <= 1.05)")
    if json_path is not None:
        append_rows(json_path, [row("evaluation: alallo's TRL trainer vs plain TRL, "
                                    "both evaluating (wall)", alallo, "s", plain, 1.05,
                                    met=alallo / plain <= 1.05)])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 pairs instead of 5")
    parser.add_argument("--pairs", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    main(args.pairs or (2 if args.quick else 5), args.json)
