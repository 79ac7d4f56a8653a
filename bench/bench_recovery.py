"""Crash recovery at scale: N running jobs, ``kill -9`` the server, start it again.

Run: ``.venv/bin/python bench/bench_recovery.py`` (1,000 jobs; ``--quick`` for
50; ``--jobs N``; ``--postgres`` to run on a scratch database of the local
PostgreSQL server, ``--postgres-url URL`` for another one; ``--py-spy PATH``
records the restarted server's first 20 s with py-spy, speedscope format).

The jobs run a trainer that speaks alallo's protocol from a few lines of
``sh`` (a Python trainer per job would not fit 1,000 times in memory): a
step every ``--step-s`` seconds, a checkpoint every 5 steps, and on a
restart it continues from the checkpoint its config names. Once every job
runs and has a checkpoint, the server is killed with SIGKILL and started
again on the same data. Printed:

- seconds from the restart until every job runs again (its second run has
  started: JOB_RESTARTED and JOB_START are stored), and until every job has
  reported a step of its second run;
- trainers of the killed server still running 10 s after the kill (0: they
  die with it, by their parent-death signal);
- events and log lines lost: stored before the kill and missing after, and,
  for a sample of jobs followed over SSE across the crash (resuming with
  ``Last-Event-ID``), items the store has that the client never got, or got
  twice (must be 0);
- steps charged twice: steps inside more than one charge of a job's ledger
  (must be 0).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
import trio
from _results import append_rows, row
from bench_store import DEFAULT_POSTGRES, ScratchDatabase
from httpx_sse import aconnect_sse

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "sample.jsonl"
MAX_STEPS = 100_000
FOLLOWED = 20
"""Jobs followed over SSE across the crash."""

TRAINER = """#!/bin/sh
# alallo's trainer protocol in sh: one step every STEP_S seconds, a checkpoint every 5.
config="$1"
dir=$(sed -n 's/.*"checkpoint_dir": *"\\([^"]*\\)".*/\\1/p' "$config")
step=$(sed -n 's/.*"resume_from": *"[^"]*checkpoint-\\([0-9]*\\)".*/\\1/p' "$config")
step=${step:-0}
[ "$step" -gt 0 ] && echo "Resuming from checkpoint at step $step"
while [ "$step" -lt MAX_STEPS ]; do
    sleep STEP_S
    step=$((step + 1))
    echo "{\\"type\\": \\"progress\\", \\"step\\": $step, \\"max_steps\\": MAX_STEPS}"
    if [ $((step % 5)) -eq 0 ]; then
        mkdir -p "$dir/checkpoint-$step"
        echo "{\\"type\\": \\"checkpoint\\", \\"step\\": $step, \\"path\\": \\"$dir/checkpoint-$step\\"}"
    fi
done
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``alallo serve`` on a data dir; started again on the same one after a kill."""

    def __init__(self, data_dir: Path, env: dict[str, str]) -> None:
        self.data_dir = data_dir
        self.env = {**os.environ, **env}
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, py_spy: Path | None = None) -> float:
        """Start it; return the moment it was spawned (``time.monotonic``).

        With ``py_spy``, py-spy records its first 20 s there (speedscope format; idle
        samples too, so that a sample is 5 ms of wall time). Its pauses slow the server.
        """
        port = free_port()
        log = self.data_dir.parent / f"server-{port}.log"
        spawned = time.monotonic()
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "alallo", "serve", "--port", str(port),
                 "--data-dir", str(self.data_dir)],
                stdout=out, stderr=subprocess.STDOUT, env=self.env)
        if py_spy is not None:
            subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record",
                              "--pid", str(self.process.pid), "--rate", "200",
                              "--duration", "20", "--idle", "--format", "speedscope",
                              "-o", str(py_spy)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited; see {log}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return spawned
            time.sleep(0.1)
        raise RuntimeError(f"the server did not answer within 300 s; see {log}")

    @property
    def headers(self) -> dict[str, str]:
        key = (self.data_dir / "api-key").read_text().strip()
        return {"Authorization": f"Bearer {key}"}

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def trainer_pids(data_dir: Path) -> list[int]:
    """Running processes started with a config under the data dir (the trainers)."""
    needle = str(data_dir).encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if needle in cmdline and b"alallo\x00serve" not in cmdline and state != "Z":
                found.append(int(entry))
    return found


def states(engine: sa.Engine) -> dict[str, dict[str, Any]]:
    with engine.connect() as c:
        return {job_id: json.loads(state)
                for job_id, state in c.execute(sa.text("SELECT id, state FROM jobs"))}


def stored_items(engine: sa.Engine) -> set[tuple[str, int]]:
    with engine.connect() as c:
        return {(job_id, seq) for job_id, seq in c.execute(
            sa.text("SELECT job_id, seq FROM job_items"))}


def steps_charged_twice(engine: sa.Engine) -> int:
    twice = 0
    with engine.connect() as c:
        rows = c.execute(sa.text("SELECT job_id, first_step, last_step FROM ledger "
                                 "WHERE kind = 'charge'")).all()
    by_job: dict[str, Counter[int]] = {}
    for job_id, first, last in rows:
        by_job.setdefault(job_id, Counter()).update(range(first, last + 1))
    for steps in by_job.values():
        twice += sum(n - 1 for n in steps.values() if n > 1)
    return twice


def wait_until(engine: sa.Engine, ready: Any, what: str, timeout: float) -> float:
    """Poll the store until ``ready(states)``; return when (``time.monotonic``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready(states(engine)):
            return time.monotonic()
        time.sleep(0.2)
    raise RuntimeError(f"not every job {what} within {timeout:.0f} s")


async def create_jobs(server: Server, command: list[str], count: int) -> list[str]:
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers,
                                 timeout=120) as client:
        uploaded = await client.post("/v1/files", files={"file": ("sample.jsonl",
                                                                  SAMPLE.read_bytes())},
                                     data={"purpose": "fine-tune"})
        uploaded.raise_for_status()
        ids: list[str] = []
        limiter = trio.CapacityLimiter(8)

        async def create() -> None:
            async with limiter:
                response = await client.post("/v1/fine_tuning/jobs", json={
                    "model": "alallo/tiny-gpt2", "training_file": uploaded.json()["id"],
                    "hyperparameters": {"max_steps": MAX_STEPS},
                    "trainer": {"command": command}})
                response.raise_for_status()
                ids.append(response.json()["id"])

        async with trio.open_nursery() as nursery:
            for _ in range(count):
                nursery.start_soon(create)
        return ids


async def follow(url: str, headers: dict[str, str], job_id: str, after: int,
                 seen: list[int], stop: trio.Event) -> None:
    """Collect the ids of a job's events and log lines until the server dies or ``stop``."""
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        with contextlib.suppress(httpx.TransportError):
            async with aconnect_sse(client, "GET", f"/v1/fine_tuning/jobs/{job_id}/stream",
                                    headers={"Last-Event-ID": str(after)}) as source:
                async for sse in source.aiter_sse():
                    if sse.event in {"event", "log"}:
                        seen.append(int(sse.id))
                    if stop.is_set():
                        return


def run(args: argparse.Namespace, database_url: str | None, tmp: Path) -> list[dict[str, Any]]:
    data_dir = tmp / "data"
    data_dir.mkdir()
    trainer = tmp / "trainer.sh"
    trainer.write_text(TRAINER.replace("STEP_S", str(args.step_s))
                       .replace("MAX_STEPS", str(MAX_STEPS)))
    env = {"ALALLO_MAX_CONCURRENT_JOBS": str(args.jobs), "ALALLO_BUDGET_FACTOR": "1000000",
           "ALALLO_CANCEL_GRACE_S": "1"}
    if database_url:
        env["ALALLO_DATABASE_URL"] = database_url
    engine = sa.create_engine(database_url or f"sqlite:///{data_dir / 'alallo.db'}",
                              poolclass=sa.pool.NullPool)
    server = Server(data_dir, env)
    try:
        server.start()
        t0 = time.monotonic()
        ids = trio.run(create_jobs, server, ["sh", str(trainer)], args.jobs)
        created = time.monotonic() - t0
        print(f"{args.jobs} jobs created in {created:.1f} s; waiting until each has a checkpoint")
        wait_until(engine, lambda s: all(j["checkpoint"] for j in s.values()), "checkpointed",
                   args.timeout)

        followed = ids[:FOLLOWED]
        seen: dict[str, list[int]] = {job_id: [] for job_id in followed}

        async def follow_then_kill() -> None:
            stop = trio.Event()
            async with trio.open_nursery() as nursery:
                for job_id in followed:
                    nursery.start_soon(follow, server.url, server.headers, job_id, 0,
                                       seen[job_id], stop)
                await trio.sleep(2 * args.step_s + 1)
                server.kill()

        trio.run(follow_then_kill)
        killed_at = time.monotonic()
        before = stored_items(engine)
        before_states = states(engine)
        orphans = trainer_pids(data_dir)
        while orphans and time.monotonic() < killed_at + 10:
            time.sleep(0.1)
            orphans = trainer_pids(data_dir)
        for pid in orphans:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

        spawned = server.start(args.py_spy)
        answering = time.monotonic() - spawned
        running = wait_until(engine, lambda s: all(
            j["attempt"] >= 2 and j["status"] == "running" for j in s.values()),
            "ran again", args.timeout) - spawned
        stepping = wait_until(engine, lambda s: all(
            j["attempt"] >= 2 and j["progress"]["step"] > before_states[i]["checkpoint"]["step"]
            for i, j in s.items()), "reported a step again", args.timeout) - spawned

        async def resume_followers() -> None:
            stop = trio.Event()
            async with trio.open_nursery() as nursery:
                for job_id in followed:
                    after = max(seen[job_id], default=0)
                    nursery.start_soon(follow, server.url, server.headers, job_id, after,
                                       seen[job_id], stop)
                await trio.sleep(3 * args.step_s + 1)
                stop.set()
                nursery.cancel_scope.cancel()

        trio.run(resume_followers)
        after_kill = stored_items(engine)
        lost = len(before - after_kill)
        last_seen = {job_id: max(seqs, default=0) for job_id, seqs in seen.items()}
        missed = sum(1 for job_id, seq in after_kill
                     if job_id in seen and seq <= last_seen[job_id] and seq not in seen[job_id])
        repeated = sum(len(seqs) - len(set(seqs)) for seqs in seen.values())
        twice = steps_charged_twice(engine)
    finally:
        server.stop()
        engine.dispose()

    backend = "PostgreSQL" if database_url else "SQLite"
    print(f"backend {backend}; {args.jobs} running jobs; a step every {args.step_s} s")
    print(f"restart: answering after {answering:.1f} s, every job running again after "
          f"{running:.1f} s, every job stepping again after {stepping:.1f} s")
    print(f"trainers left 10 s after the kill: {len(orphans)}")
    print(f"items lost in the store: {lost}; over SSE ({len(followed)} jobs followed): "
          f"{missed} missed, {repeated} repeated; steps charged twice: {twice}")
    name = f"recovery ({backend}, {args.jobs} jobs)"
    return [
        row(f"{name}: seconds until every job runs again", running, "s", None, None),
        row(f"{name}: seconds until every job steps again", stepping, "s", None, None),
        row(f"{name}: trainers outliving the killed server", len(orphans), "", None, None,
            met=not orphans),
        row(f"{name}: events and log lines lost or repeated", lost + missed + repeated, "",
            None, None, met=lost + missed + repeated == 0),
        row(f"{name}: steps charged twice", twice, "", None, None, met=twice == 0),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 jobs instead of 1,000")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--step-s", type=float, default=None,
                        help="seconds per trainer step (default: 1 per 100 jobs, at least 0.5)")
    parser.add_argument("--postgres", action="store_true",
                        help="run on a scratch database of the PostgreSQL server")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--py-spy", type=Path, default=None,
                        help="record the restarted server with py-spy to this speedscope file")
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    args.jobs = args.jobs or (50 if args.quick else 1000)
    args.step_s = args.step_s or max(0.5, args.jobs / 100)
    with tempfile.TemporaryDirectory(prefix="alallo-bench-recovery-") as scratch:
        if args.postgres:
            with ScratchDatabase(args.postgres_url) as url:
                rows = run(args, url, Path(scratch))
        else:
            rows = run(args, None, Path(scratch))
    if args.json:
        append_rows(args.json, rows)
    failed = [r["name"] for r in rows if r["met"] is False]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
