"""Overhead on real work: a TRL run through alallo vs the same trainer process run directly.

Run: ``.venv/bin/python bench/bench_overhead.py`` (5 pairs; ``--quick`` for 5 too,
without the warm side; ``--pairs N``). One pair is not a figure: the trainer's own CPU time
swung by 2-5 % from run to run on a shared 2-core VM, as much as the target allows, and
the median of 3 pairs still went 0.97-1.07.

The work: the shipped sample (``examples/sample.jsonl``, 48 examples) on
``alallo/tiny-gpt2`` with the default hyperparameters (36 steps), trained
by ``python -m alallo.trainers.trl``.

- alallo: an embedded :class:`alallo.Runtime` (SQLite, one local slot,
  ``warm_trainers=False`` so that it starts the very command the direct run
  starts); timed from the start of ``upload_file`` to ``succeeded``
  (``wait_for_final``). Without ``--quick`` a third side runs too: a
  runtime with its default warm trainer process (libraries imported once,
  a trainer forked per job), shown next to the same baseline.
- direct: the process alallo starts for it, with the same command, working
  directory layout, environment (``PYTHONUNBUFFERED``,
  ``TOKENIZERS_PARALLELISM``) and config file (the one alallo wrote for the
  warm-up job, with fresh output and checkpoint directories), its output
  read through a pipe as alallo reads it; timed from launch to exit.

A warm-up run through alallo first builds the tiny model and fills the page
cache; then direct and alallo runs alternate (A B A B ...) so drift on a
shared machine falls on both, and each side's figure is its median. Target:
alallo / direct <= 1.03 (the limit is 1.0).

CPU is measured too, as wall time on a shared machine is noisy: the trainer's
(``RUSAGE_CHILDREN``: both sides reap their trainer) and, through alallo, the
whole server process's (``time.process_time``: runtime, store, the waiting
client) per job; the second row is the server's CPU per job over the
trainer's.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import structlog
import trio

from _configs import fresh_config
from _results import append_rows, row
from alallo import Runtime, Settings

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "sample.jsonl"

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def children_cpu_s() -> float:
    """CPU seconds of this process's reaped children so far (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def through_alallo(rt: Runtime) -> tuple[float, str]:
    """One job from upload to ``succeeded``; returns (seconds, job id)."""
    account = await rt.authenticate(rt.api_key)
    start = time.perf_counter()
    file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
    job = await rt.create_job(account, {"model": "alallo/tiny-gpt2", "training_file": file.id})
    final = await rt.wait_for_final(account, job.id)
    elapsed = time.perf_counter() - start
    if final.status.value != "succeeded":
        raise RuntimeError(f"job {job.id} ended {final.status.value}: {final.message}")
    return elapsed, job.id


def direct(settings: Settings, template: Path, workdir: Path) -> float:
    """The trainer process alone, launch to exit, with alallo's command and config."""
    config_path = fresh_config(template, workdir)
    attempt = config_path.parent
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    start = time.perf_counter()
    done = subprocess.run([settings.python, "-m", "alallo.trainers.trl", str(config_path)],
                          cwd=attempt, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    elapsed = time.perf_counter() - start
    if done.returncode != 0 or b'"done"' not in done.stdout:
        raise RuntimeError(f"the direct run failed:\n{done.stdout.decode()[-2000:]}")
    return elapsed


async def main(pairs: int, warm: bool, json_path: Path | None) -> None:
    sides = ["direct", "alallo"] + (["alallo-warm"] if warm else [])
    times: dict[str, list[float]] = {side: [] for side in sides}
    cpu: dict[str, list[float]] = {"trainer direct": [], "trainer alallo": [], "server": []}
    with tempfile.TemporaryDirectory(prefix="alallo-bench-overhead-") as scratch:
        root = Path(scratch)
        # Cold: alallo starts the same command as the direct run (no warm process).
        settings = Settings(data_dir=root / "data", max_concurrent_jobs=1, warm_trainers=False)
        warm_settings = Settings(data_dir=root / "warm", max_concurrent_jobs=1)
        async with Runtime(settings) as rt, contextlib.AsyncExitStack() as stack:
            warm_rt = await stack.enter_async_context(Runtime(warm_settings)) if warm else None
            warm_s, warm_id = await through_alallo(rt)
            template = settings.jobs_dir / warm_id / "attempt-1" / "config.json"
            print(f"warm-up through alallo (builds the model): {warm_s:.2f} s")
            if warm_rt is not None:
                print(f"warm-up of the warm trainer process: {(await through_alallo(warm_rt))[0]:.2f} s")
            for i in range(pairs):
                for side in (sides if i % 2 == 0 else sides[::-1]):
                    children, server = children_cpu_s(), time.process_time()
                    if side == "direct":
                        t = await trio.to_thread.run_sync(
                            direct, settings, template, root / f"direct-{i}")
                    else:
                        t, _ = await through_alallo(rt if side == "alallo" else warm_rt)
                    trainer_cpu, server_cpu = (children_cpu_s() - children,
                                               time.process_time() - server)
                    times[side].append(t)
                    cpus = ""
                    if side in ("direct", "alallo"):
                        cpu[f"trainer {side}"].append(trainer_cpu)
                        cpus = f"  (trainer CPU {trainer_cpu:.2f} s"
                        if side == "alallo":
                            cpu["server"].append(server_cpu)
                            cpus += f", server CPU {server_cpu:.3f} s"
                        cpus += ")"
                    print(f"round {i + 1}: {side:<12}{t:>7.2f} s{cpus}", flush=True)
    d = statistics.median(times["direct"])
    a = statistics.median(times["alallo"])
    print(f"median direct {d:.2f} s, through alallo (cold trainer, the same command) {a:.2f} s: "
          f"ratio {a / d:.3f} (target <= 1.03); overhead {a - d:+.2f} s per job")
    med = {name: statistics.median(values) for name, values in cpu.items()}
    print(f"median CPU per job: trainer direct {med['trainer direct']:.2f} s, trainer through "
          f"alallo {med['trainer alallo']:.2f} s, alallo's server process {med['server']:.3f} s "
          f"({med['server'] / med['trainer alallo']:.1%} of the trainer's)")
    rows = [row("overhead: TRL run through alallo vs trainer alone (wall)", a, "s", d, 1.03,
                met=a / d <= 1.03),
            row("overhead: server CPU per job vs the trainer's CPU", med["server"], "cpu s",
                med["trainer alallo"], None)]
    if warm:
        w = statistics.median(times["alallo-warm"])
        print(f"through alallo with its warm trainer process (the default): {w:.2f} s, "
              f"ratio {w / d:.3f}")
        rows.append(row("overhead: TRL run through alallo, warm trainer, vs trainer alone",
                        w, "s", d, None))
    if json_path is not None:
        append_rows(json_path, rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="without the warm side")
    parser.add_argument("--pairs", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    trio.run(main, args.pairs or 5, not args.quick, args.json)
    sys.exit(0)
