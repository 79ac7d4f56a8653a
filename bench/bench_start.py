"""Start latency: submit to the first training step of a tiny TRL job, cold and warm.

Run: ``.venv/bin/python bench/bench_start.py`` (``--quick`` for 2
repetitions instead of 5; ``--json FILE`` appends the rows to FILE).

Three things are timed in each repetition, one after the other, in turn, on
an idle local node (one job at a time, each ends before the next starts):

- **baseline, the trainer's cold start alone**: ``python -m
  alallo.trainers.trl config.json`` launched directly, until it prints its
  first ``progress`` line (step 1): interpreter start, imports of torch,
  transformers, datasets, peft and TRL, model load, trainer set-up, one step;
- **cold path**: an embedded :class:`~alallo.Runtime` with
  ``warm_trainers=False``: from the call that submits the job
  (``create_job``) until the job's stream shows step 1 (the state a user
  sees, after the store and the bus);
- **warm path**: the same with ``warm_trainers=True``, the runtime's warm
  trainer process already started (by an earlier job of the same runtime, as
  on any server that has run one job since it started).

The job is the tiny model (``alallo/tiny-gpt2``, built once before timing)
with LoRA, 2 steps of 2 examples; the figures are medians. Targets: the cold
path ≤ 1.1× the trainer's own cold start (what alallo adds on top of it),
the warm path < 0.3× of it.
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
from typing import Any

import trio

from _results import append_rows, row

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from alallo import Runtime, Settings  # noqa: E402

SAMPLE = REPO / "examples" / "sample.jsonl"
SPEC = {"model": "alallo/tiny-gpt2", "hyperparameters": {"max_steps": 2, "batch_size": 2},
        "seed": 1}


async def submit_to_first_step(rt: Runtime) -> float:
    """Seconds from ``create_job`` to a job state with step ≥ 1; waits for the job's end."""
    account = await rt.authenticate(rt.api_key)
    file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
    started = time.perf_counter()
    job = await rt.create_job(account, {"training_file": file.id, **SPEC})
    first: float | None = None
    async for item in rt.stream(account, job.id):
        if first is None and item.kind == "job" and item.data["progress"]["step"] >= 1:
            first = time.perf_counter() - started
    done = await rt.get_job(account, job.id)
    if first is None or done.status.value != "succeeded":
        raise RuntimeError(f"job {job.id} ended {done.status.value}: {done.error}")
    return first


def direct_cold_start(config: Path, cwd: Path) -> float:
    """Seconds from launching the TRL trainer directly to its first ``progress`` line."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "alallo.trainers.trl", str(config)],
                               cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    assert process.stdout is not None
    first: float | None = None
    for line in process.stdout:
        if first is None and line.startswith(b'{"type":"progress"'):
            first = time.perf_counter() - started
    process.stdout.close()
    if process.wait() != 0 or first is None:
        raise RuntimeError(f"the trainer exited {process.returncode} (first step: {first})")
    return first


def direct_config(cold_dir: Path, scratch: Path) -> Path:
    """The config of the cold runtime's last job, with fresh output directories."""
    latest = max((cold_dir / "jobs").glob("*/attempt-1/config.json"),
                 key=lambda p: p.stat().st_mtime)
    config = json.loads(latest.read_text())
    config.update(output_dir=str(scratch / "model"), checkpoint_dir=str(scratch / "checkpoints"),
                  job_id="ft-direct")
    path = scratch / "config.json"
    path.write_text(json.dumps(config))
    return path


async def measure(reps: int, tmp: Path) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"direct": [], "cold": [], "warm": []}
    async with Runtime(Settings(data_dir=tmp / "cold", warm_trainers=False)) as cold, \
            Runtime(Settings(data_dir=tmp / "warm", warm_trainers=True)) as warm:
        # Not timed: builds the tiny model in each data dir, starts the warm process.
        await submit_to_first_step(cold)
        await submit_to_first_step(warm)
        config = direct_config(tmp / "cold", tmp)
        for rep in range(reps):
            times["direct"].append(await trio.to_thread.run_sync(direct_cold_start, config, tmp))
            times["cold"].append(await submit_to_first_step(cold))
            times["warm"].append(await submit_to_first_step(warm))
            print(f"rep {rep + 1}/{reps}: " + ", ".join(
                f"{name} {values[-1]:.2f} s" for name, values in times.items()), flush=True)
    return times


def rows(times: dict[str, list[float]]) -> list[dict[str, Any]]:
    base = statistics.median(times["direct"])
    cold = statistics.median(times["cold"])
    warm = statistics.median(times["warm"])
    return [
        row("start: submit to first step, cold trainer (vs its own cold start)", cold, "s",
            base, 1.1, met=cold / base <= 1.1),
        row("start: submit to first step, warm trainer (vs the cold start)", warm, "s",
            base, 0.3, met=warm / base < 0.3),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 repetitions instead of 5")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    reps = args.reps or (2 if args.quick else 5)
    with tempfile.TemporaryDirectory(prefix="alallo-bench-start-") as scratch:
        times = trio.run(measure, reps, Path(scratch))
    result = rows(times)
    for r in result:
        print(f"{r['name']}: {r['value']:.3f} s, baseline {r['baseline']:.3f} s, "
              f"ratio {r['ratio']:.3f} (target {r['target']}), met: {r['met']}")
    if args.json:
        append_rows(args.json, result)
    return 0 if all(r["met"] for r in result) else 1


if __name__ == "__main__":
    sys.exit(main())
