"""Memory at the sizes users reach: server RSS per idle job and per open stream, 10,000 each.

Run: ``.venv/bin/python bench/bench_memory.py`` (10,000 jobs and 10,000
streams; ``--quick`` for 1,000 of each; ``--size N``).

An *idle job* is one waiting for capacity: the server holds its actor, its
mailbox, its cached view and its place in the queue, but no trainer process.
The server gets one slot (``ALALLO_MAX_CONCURRENT_JOBS=1``), one job takes it
with a trainer that never reports, and N more jobs are created behind it
over HTTP. The server's RSS before and after, divided by N, is the memory per
idle job. Its budget: 10,000 idle jobs in under 1 GiB (100 KiB each), so one
server holds a whole organisation's backlog.

An *open stream* is ``GET /v1/fine_tuning/jobs/{id}/stream`` held open by a
client (``bench/_load.py sse``), N of them spread over the idle jobs. Its
baseline is the same number of bare sse-starlette streams
(``GET /bare/stream/{topic}`` of ``bench/_server.py``: a Starlette route, a
trio memory channel, no alallo code) opened in a second server of the same
build, so the ratio is what alallo's stream (authentication, backlog
replay, bus subscription, heartbeat) costs over the bare protocol. RSS is
read after the streams' first bytes have arrived, and once more a second
later; the larger is kept.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import append_rows, row
from _server import BenchServer, create_jobs, raise_fd_limit, wait_running

LOAD = Path(__file__).with_name("_load.py")
PATHS_PER_LOAD = 1_000
"""Distinct job paths given to one load process (its argument list has a size limit)."""
IDLE_JOB_BUDGET = 100 * 1024
"""Bytes per idle job: 10,000 of them in under 1 GiB."""
STREAM_RATIO = 1.5
"""An open stream's memory against a bare sse-starlette one: at most this ratio (what
alallo adds: the stream's account, its job's backlog cursor, its bus subscription)."""


def open_streams(server: BenchServer, paths: list[str],
                 count: int) -> tuple[subprocess.Popen[str], int]:
    """Start a load process holding ``count`` SSE streams over ``paths``; wait until each
    is open or failed; return the process and how many are open.

    Raises:
        RuntimeError: the load process failed, or more than 1 % of the streams did not open.
    """
    load = subprocess.Popen(
        [sys.executable, str(LOAD), "sse", server.url, ",".join(paths[:PATHS_PER_LOAD]),
         "--subscribers", str(count), "--header", f"Authorization: Bearer {server.api_key}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert load.stdout is not None
    ready = load.stdout.readline().split()
    opened = int(ready[1]) if len(ready) == 2 and ready[0] == "ready" else 0
    if opened < 0.99 * count:
        load.kill()
        raise RuntimeError(f"the load process opened {opened} of {count} streams")
    return load, opened


def settled_rss(server: BenchServer) -> int:
    """The server's RSS now and a second later: the larger (allocations may still land)."""
    first = server.rss_bytes()
    time.sleep(1.0)
    return max(first, server.rss_bytes())


def close(load: subprocess.Popen[str]) -> None:
    """Stop a load process (it reads ``stop`` on stdin)."""
    load.communicate("stop\n", timeout=120)


def measure_alallo(root: Path, size: int) -> tuple[float, float]:
    """Bytes of server RSS per idle job and per open stream, ``size`` of each."""
    env = {"ALALLO_MAX_CONCURRENT_JOBS": "1", "ALALLO_BUDGET_FACTOR": "1000000"}
    with BenchServer(root / "alallo", env) as server:
        running = create_jobs(server, 1)
        wait_running(server, running)
        before = settled_rss(server)
        t0 = time.perf_counter()
        idle = create_jobs(server, size)
        print(f"{size:,} idle jobs created in {time.perf_counter() - t0:.1f} s", flush=True)
        with_jobs = settled_rss(server)
        load, opened = open_streams(
            server, [f"/v1/fine_tuning/jobs/{i}/stream" for i in idle], size)
        try:
            with_streams = settled_rss(server)
        finally:
            close(load)
    return (with_jobs - before) / size, (with_streams - with_jobs) / opened


def measure_bare(root: Path, size: int) -> float:
    """Bytes of server RSS per open bare sse-starlette stream."""
    with BenchServer(root / "bare") as server:
        before = settled_rss(server)
        topics = [f"/bare/stream/t{i}" for i in range(min(size, PATHS_PER_LOAD))]
        load, opened = open_streams(server, topics, size)
        try:
            with_streams = settled_rss(server)
        finally:
            close(load)
    return (with_streams - before) / opened


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 jobs and streams")
    parser.add_argument("--size", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    size = args.size or (1_000 if args.quick else 10_000)
    raise_fd_limit()
    with tempfile.TemporaryDirectory(prefix="alallo-bench-memory-") as scratch:
        root = Path(scratch)
        per_job, per_stream = measure_alallo(root, size)
        print(f"alallo: {per_job / 1024:,.1f} KiB per idle job, {per_stream / 1024:,.1f} KiB "
              "per open stream", flush=True)
        bare = measure_bare(root, size)
    print(f"server RSS per idle job: {per_job / 1024:,.1f} KiB ({size:,} jobs; "
          f"10,000 -> {per_job * 10_000 / 2**20:,.0f} MiB)")
    print(f"server RSS per open stream: {per_stream / 1024:,.1f} KiB "
          f"(bare sse-starlette: {bare / 1024:,.1f} KiB; {size:,} streams)")
    if args.json:
        append_rows(args.json, [
            row(f"memory ({size:,}): server RSS per idle job", per_job / 1024, "KiB",
                IDLE_JOB_BUDGET / 1024, None, met=per_job <= IDLE_JOB_BUDGET),
            row(f"memory ({size:,}): server RSS per open stream vs bare sse-starlette",
                per_stream / 1024, "KiB", bare / 1024, STREAM_RATIO,
                met=per_stream <= STREAM_RATIO * bare),
        ])
    return 0


if __name__ == "__main__":
    sys.exit(main())
