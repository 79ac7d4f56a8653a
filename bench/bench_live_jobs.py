"""Many live jobs: N jobs running at once in one server, each reporting a step every second.

Run: ``.venv/bin/python bench/bench_live_jobs.py`` (300 jobs, about what
one of 2 shared cores keeps up with, see docs/performance.md; ``--quick``
for 100; ``--jobs N``; ``--followed K`` jobs followed over SSE, default 200).

The issue's figure is 10,000 jobs. Each job here is a real trainer process
(alallo runs every trainer as a child process, ``alallo/executors/_local.py``):
a bash script that speaks the trainer protocol without forking per step
(``read -t`` on a FIFO sleeps, ``$EPOCHREALTIME`` is the clock) and prints a
``progress`` line every ``--period`` seconds whose ``loss`` is the wall
clock when it printed it. A separate load process (``bench/_load.py sse``)
follows K jobs over ``GET /v1/fine_tuning/jobs/{id}/stream`` and measures,
for each ``job`` item, the delay from that clock to its read: trainer line ->
pipe -> job actor -> store -> bus -> SSE.

Printed: the server's resident memory with N jobs live (and per job, and
extrapolated to 10,000 jobs: target < 2 GiB), the p99 delay (target
< 500 ms), progress lines the server handled per second against the N per
second offered (steps stored, read from the store; target >= 0.95x), and
the server's CPU time per progress line (what 10,000 lines a second would
need). Trainer processes are not counted in the server's memory.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import append_rows, row
from _server import BenchServer, create_jobs, proc_cpu_s, raise_fd_limit, wait_running
from bench_sse import percentile

TRAINER = """#!/bin/bash
# alallo's trainer protocol in bash, with no fork per step: a progress line every
# PERIOD seconds whose loss is this process's clock when it printed it.
exec 3<>"FIFO"
step=0
while [ $step -lt MAX_STEPS ]; do
    read -t PERIOD -u 3
    step=$((step + 1))
    echo "{\\"type\\": \\"progress\\", \\"step\\": $step, \\"max_steps\\": MAX_STEPS, \\"loss\\": $EPOCHREALTIME}"
done
"""
MAX_STEPS = 1_000_000


def stored_steps(db: Path) -> int:
    """The sum of every job's stored step (from the store's job states)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as connection:
        return sum(json.loads(state)["progress"]["step"]
                   for (state,) in connection.execute("SELECT state FROM jobs"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 jobs, 5 s window")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--followed", type=int, default=200)
    parser.add_argument("--period", type=float, default=1.0, help="seconds between steps")
    parser.add_argument("--seconds", type=float, default=None, help="measuring window")
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    parser.add_argument("--profile", type=Path, default=None,
                        help="sample the server with py-spy during the window "
                             "(collapsed stacks to this file)")
    args = parser.parse_args()
    jobs = args.jobs or (100 if args.quick else 300)
    seconds = args.seconds or (5.0 if args.quick else 15.0)
    followed = min(jobs, args.followed)
    limit = raise_fd_limit()
    env = {"ALALLO_MAX_CONCURRENT_JOBS": str(jobs), "ALALLO_BUDGET_FACTOR": "1000000",
           "ALALLO_CANCEL_GRACE_S": "1", "ALALLO_MAX_STEPS_LIMIT": str(MAX_STEPS)}
    with tempfile.TemporaryDirectory(prefix="alallo-bench-live-") as scratch:
        root = Path(scratch)
        fifo = root / "sleep.fifo"
        os.mkfifo(fifo)
        trainer = root / "trainer.sh"
        trainer.write_text(TRAINER.replace("FIFO", str(fifo)).replace("PERIOD", str(args.period))
                           .replace("MAX_STEPS", str(MAX_STEPS)))
        with BenchServer(root / "data", env) as server:
            idle_rss = server.rss_bytes()
            t0 = time.perf_counter()
            ids = create_jobs(server, jobs, ["bash", str(trainer)], max_steps=MAX_STEPS)
            wait_running(server, ids, timeout=600)
            print(f"{jobs:,} jobs created and running after {time.perf_counter() - t0:.1f} s "
                  f"(fd limit {limit:,})", flush=True)
            load = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("_load.py")), "sse", server.url,
                 ",".join(f"/v1/fine_tuning/jobs/{i}/stream" for i in ids[:followed]),
                 "--subscribers", str(followed),
                 "--header", f"Authorization: Bearer {server.api_key}"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert load.stdout is not None
            ready = load.stdout.readline()
            if not ready.startswith("ready"):
                raise RuntimeError(f"the load process failed: {ready!r}")
            db = server.data_dir / "alallo.db"
            steps_before, cpu_before = stored_steps(db), proc_cpu_s(server.pid)
            spy = server.profile(seconds, args.profile)
            start = time.perf_counter()
            time.sleep(seconds / 2)
            rss = server.rss_bytes()
            time.sleep(seconds / 2)
            steps_after, cpu_after = stored_steps(db), proc_cpu_s(server.pid)
            window = time.perf_counter() - start
            rss = max(rss, server.rss_bytes())
            out, _ = load.communicate("stop\n", timeout=120)
            if spy is not None:
                spy.wait()
            result = json.loads(out.strip().splitlines()[-1])
    handled = (steps_after - steps_before) / window
    offered = jobs / args.period
    cpu_per_line_ms = (cpu_after - cpu_before) / max(1, steps_after - steps_before) * 1000
    per_job = (rss - idle_rss) / jobs
    at_10k = idle_rss + per_job * 10_000
    p50, p99 = percentile(result["latencies_ms"], 0.5), percentile(result["latencies_ms"], 0.99)
    print(f"server RSS: idle {idle_rss / 2**20:,.0f} MiB, with {jobs:,} live jobs "
          f"{rss / 2**20:,.0f} MiB ({per_job / 1024:,.0f} KiB per job; 10,000 jobs -> "
          f"{at_10k / 2**30:.2f} GiB)")
    print(f"progress lines: offered {offered:,.0f}/s, stored {handled:,.0f}/s; server CPU "
          f"{cpu_per_line_ms:.2f} ms per line ({(cpu_after - cpu_before) / window:.0%} of a core; "
          f"10,000 lines/s would need {cpu_per_line_ms * 10:.1f} cores)")
    print(f"trainer line -> SSE client ({followed} jobs followed, {result['received']:,} "
          f"items): p50 {p50:.0f} ms, p99 {p99:.0f} ms")
    if args.json:
        name = f"live jobs ({jobs:,})"
        append_rows(args.json, [
            row(f"{name}: server RSS, extrapolated to 10,000 jobs", at_10k / 2**20, "MiB",
                2048, None, met=at_10k < 2**31),
            row(f"{name}: p99 trainer progress line -> SSE client", p99, "ms", None, 500,
                met=p99 < 500),
            row(f"{name}: progress lines stored/s vs offered", handled, "/s", offered, 0.95),
            row(f"{name}: server CPU per progress line", cpu_per_line_ms, "ms", None, None),
        ])
    return 0


if __name__ == "__main__":
    sys.exit(main())
