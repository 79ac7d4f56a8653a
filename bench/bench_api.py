"""API throughput: ``GET /v1/fine_tuning/jobs/{id}`` vs a bare Starlette endpoint, same server.

Run: ``.venv/bin/python bench/bench_api.py`` (``--quick`` for short windows).

One bench server (``bench/_server.py``: alallo's gateway app and a bare
Starlette app under Hypercorn's trio worker, one process) holds one running
job. A separate load process (``bench/_load.py http``: keep-alive HTTP/1.1
on 8 connections) asks for the job, then for the same JSON from the bare
endpoint, alternating (A B A B ...) so that drift on a shared machine falls
on both; each figure is the median of its windows (many short windows:
the machine's load changes by the second, and a round's two windows then
see the same machine). Printed: requests per second of each, their ratio
(target >= 0.85, issue 20), the ratio of each round's pair of windows (how
steady the figure is), the server's CPU time per
request of each (on a shared machine the server may get less than a core,
and req/s then measures the machine; requests per CPU-second does not), and
the CPU the load generator took (it must not be the bottleneck).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from _results import append_rows, row
from _server import BenchServer, create_jobs, proc_cpu_s, run_load, wait_running

CONNECTIONS = 8
TARGET = 0.85
"""Least ratio to the bare endpoint, of req/s and of requests per CPU-second (issue 20)."""


def window(server: BenchServer, path: str, seconds: float,
           profile: Path | None = None) -> dict[str, Any]:
    """One load window; adds the server's CPU seconds during it (and samples it with
    py-spy into ``profile``)."""
    spy = server.profile(seconds, profile)
    before = proc_cpu_s(server.pid)
    result = run_load(["http", server.url, path, "--connections", str(CONNECTIONS),
                       "--seconds", str(seconds),
                       "--header", f"Authorization: Bearer {server.api_key}"])
    result["server_cpu_s"] = proc_cpu_s(server.pid) - before
    result["rps"] = result["requests"] / result["wall_s"]
    if spy is not None:
        spy.wait()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="15 rounds of 1 s windows")
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    parser.add_argument("--profile", type=Path, default=None,
                        help="sample the server with py-spy in one extra alallo window "
                             "(collapsed stacks to this file)")
    args = parser.parse_args()
    rounds, seconds = (15, 1.0) if args.quick else (15, 3.0)
    with tempfile.TemporaryDirectory(prefix="alallo-bench-api-") as scratch, \
            BenchServer(Path(scratch) / "data") as server:
        [job_id] = create_jobs(server, 1)
        wait_running(server, [job_id])
        job = httpx.get(f"{server.url}/v1/fine_tuning/jobs/{job_id}", headers=server.headers)
        httpx.put(f"{server.url}/bare/job", json=job.json()).raise_for_status()
        paths = {"alallo": f"/v1/fine_tuning/jobs/{job_id}", "bare": "/bare/job"}
        results: dict[str, list[dict[str, Any]]] = {"alallo": [], "bare": []}
        window(server, paths["alallo"], 0.5)  # warm-up: imports, caches, connections
        for i in range(rounds):
            order = ("alallo", "bare") if i % 2 == 0 else ("bare", "alallo")
            for side in order:
                result = window(server, paths[side], seconds)
                if result["errors"]:
                    raise RuntimeError(f"{side}: {result['errors']} requests failed")
                results[side].append(result)
        if args.profile:
            window(server, paths["alallo"], seconds, args.profile)
    alallo = statistics.median(r["rps"] for r in results["alallo"])
    bare = statistics.median(r["rps"] for r in results["bare"])
    load_cpu = statistics.median(r["cpu_s"] / r["wall_s"] for r in results["alallo"])
    server_cpu = statistics.median(r["server_cpu_s"] / r["wall_s"] for r in results["alallo"])
    bare_load_cpu = statistics.median(r["cpu_s"] / r["wall_s"] for r in results["bare"])
    # Server CPU time per request: on a shared machine the server may get less
    # than a core, and then req/s measures the machine; CPU per request does not.
    cpu_us = statistics.median(r["server_cpu_s"] / r["requests"] * 1e6 for r in results["alallo"])
    bare_cpu_us = statistics.median(r["server_cpu_s"] / r["requests"] * 1e6
                                    for r in results["bare"])
    print(f"{'GET job (alallo)':<28}{alallo:>10,.0f} req/s   server CPU {server_cpu:.0%}, "
          f"load generator CPU {load_cpu:.0%}")
    print(f"{'bare Starlette endpoint':<28}{bare:>10,.0f} req/s   load generator CPU "
          f"{bare_load_cpu:.0%}")
    print(f"server CPU per request: alallo {cpu_us:,.0f} us, bare {bare_cpu_us:,.0f} us "
          f"(requests per CPU-second: ratio {bare_cpu_us / cpu_us:.2f})")
    paired = sorted(a["rps"] / b["rps"] for a, b in zip(results["alallo"], results["bare"]))
    paired_cpu = sorted(b["server_cpu_s"] / b["requests"] / (a["server_cpu_s"] / a["requests"])
                        for a, b in zip(results["alallo"], results["bare"]))
    print("each round's ratio: req/s " + " ".join(f"{r:.2f}" for r in paired)
          + "; requests per CPU-second " + " ".join(f"{r:.2f}" for r in paired_cpu))
    print(f"ratio {alallo / bare:.2f} (target >= {TARGET}); {rounds} rounds of {seconds:g} s, "
          f"{CONNECTIONS} keep-alive connections, the same {len(job.content):,}-byte body")
    if args.json:
        append_rows(args.json, [
            row("api: GET job req/s vs bare Starlette endpoint (same server)", alallo, "req/s",
                bare, TARGET),
            row("api: requests per server CPU-second vs bare (1 / CPU per request)",
                1e6 / cpu_us, "req/cpu-s", 1e6 / bare_cpu_us, TARGET),
            row("api: load generator CPU per second of load (alallo side)", load_cpu, "cpu s/s",
                None, None),
        ])
    return 0


if __name__ == "__main__":
    sys.exit(main())
