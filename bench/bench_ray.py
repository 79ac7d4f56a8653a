"""Training through a Ray cluster: a tiny real job through alallo on Ray vs a bare Ray job (and
vs the local executor), and a node lost.

Run: ``.venv/bin/python bench/bench_ray.py`` (``--quick`` as well: 5 repetitions, each
side's median; one repetition's ratio swung by ±10 % on a noisy 2-core VM; ``--json FILE``
appends the rows to FILE). It starts a real local Ray cluster
(``tests/ray_cluster.py``: a head with no CPUs for work, two 2-CPU workers on 127.0.0.1).

- **alallo on Ray vs bare Ray**: the same tiny real TRL job (``alallo/tiny-gpt2``, LoRA, 10
  steps of 2 examples) from ``create_job`` to ``succeeded`` through an embedded runtime on
  the cluster, against the same trainer command and config submitted by hand as a bare Ray
  job (``POST /api/jobs/`` to Ray's SUCCEEDED; :func:`bare_ray_job`), holding the same CPUs.
  Target: alallo's wall time ≤ 1.05× the bare job's (medians): what alallo adds on Ray
  (placement, the fence, the node launcher's process and scrubbed environment, following
  the output on the shared storage) is ~5 % of this 5 s job at most.
- **Ray vs local**: the same job through a runtime on the local executor (cold trainers, as
  a Ray node starts them), shown without a target: the difference is Ray's own start of a
  job (a ``JobSupervisor`` actor in a new worker process: 0.8 s on an Intel 2-core VM,
  1.3-1.7 s on an AMD one), which the bare Ray job pays as well, and which a ratio on a
  4-5 s job turns into 20-35 %. Also Ray's own part measured on its own: from Ray's taking
  the job to the trainer started on the node. The three sides run in turn, each first in
  one repetition in three.
- **Node lost**: a job of the simulated trainer (a real process on the node, 0.2 s a
  step, 200 steps, a checkpoint every 10) runs on a worker; once it has a checkpoint, the
  worker's raylet is killed (SIGKILL: the node is cut off, its trainer lives on). Measured:
  seconds from the kill to the job training again on the other node (target < 30 s), the
  steps redone (the last reached by the first run, less the step the second resumed from:
  the cut-off trainer goes on, and its checkpoints count until the move), and the steps
  charged, from the ledger (each once: the job's 200).
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import trio
from _configs import fresh_config
from _results import report, row

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from ray_cluster import RayCluster  # noqa: E402

from alallo import Runtime, Settings  # noqa: E402

SAMPLE = REPO / "examples" / "sample.jsonl"
TINY = {"model": "alallo/tiny-gpt2", "hyperparameters": {"max_steps": 10, "batch_size": 2},
        "seed": 1}
LOST_STEPS = 200


async def one_job(rt: Runtime, spec: dict[str, Any]) -> tuple[float, float, str]:
    """Seconds from ``create_job`` to the first step, and to the job's end (succeeded); the
    job's id."""
    account = await rt.authenticate(rt.api_key)
    file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
    started = time.perf_counter()
    job = await rt.create_job(account, {"training_file": file.id, **spec})
    first: float | None = None
    async for item in rt.stream(account, job.id):
        if first is None and item.kind == "job" and item.data["progress"]["step"] >= 1:
            first = time.perf_counter() - started
    wall = time.perf_counter() - started
    done = await rt.get_job(account, job.id)
    if first is None or done.status.value != "succeeded":
        raise RuntimeError(f"job {job.id} ended {done.status.value}: {done.error}")
    return first, wall, job.id


def ray_job_of(cluster: RayCluster, job_id: str) -> dict[str, Any]:
    """The Ray job of the job's first attempt, as ``GET /api/jobs/`` lists it."""
    jobs = httpx.get(f"{cluster.address}/api/jobs/", timeout=30).json()
    return next(j for j in jobs if str(j["submission_id"]).startswith(f"{job_id}-attempt-1"))


def ray_job_start(cluster: RayCluster, shared: Path, job_id: str) -> float:
    """Seconds from Ray's taking the job (its ``start_time``, set as Ray handles the
    ``POST /api/jobs/``) to the trainer started on the node (the launcher writes ``trainer.pid``
    as soon as it has): Ray's own job start (a ``JobSupervisor`` actor in a new worker
    process) and the launcher's."""
    ray_job = ray_job_of(cluster, job_id)
    pid_file = shared / "jobs" / job_id / "attempt-1" / "trainer.pid"
    return pid_file.stat().st_mtime - ray_job["start_time"] / 1000


async def bare_ray_job(cluster: RayCluster, shared: Path, template: Path, rep: int,
                       num_cpus: float) -> float:
    """The same trainer as a bare Ray job: seconds from ``POST /api/jobs/`` to Ray's
    reporting it SUCCEEDED (looked at every 0.1 s: Ray's own supervisor polls its
    entrypoint as often).

    The command and config are the ones alallo wrote for a job (``template``: the config of
    its first attempt, with fresh output and checkpoint directories), in a directory of
    the shared storage, entrypoint ``cd DIR && exec PYTHON -m alallo.trainers.trl
    config.json`` holding the CPUs alallo's job holds: what a user of Ray would submit
    by hand, without alallo's launcher, fence, scrubbed environment or placement.
    """
    attempt = fresh_config(template, shared / f"bare-{rep}").parent
    entrypoint = (f"cd {shlex.quote(str(attempt))} && exec {shlex.quote(sys.executable)} "
                  "-m alallo.trainers.trl config.json")
    submission_id = f"bare-{rep}-{time.time_ns()}"
    async with httpx.AsyncClient(base_url=cluster.address, timeout=30) as client:
        started = time.perf_counter()
        posted = await client.post("/api/jobs/", json={
            "entrypoint": entrypoint, "submission_id": submission_id,
            "entrypoint_num_cpus": num_cpus})
        posted.raise_for_status()
        while True:
            job = (await client.get(f"/api/jobs/{submission_id}")).json()
            if job["status"] in ("SUCCEEDED", "FAILED", "STOPPED"):
                break
            await trio.sleep(0.1)
        seconds = time.perf_counter() - started
        if job["status"] != "SUCCEEDED":
            logs = (await client.get(f"/api/jobs/{submission_id}/logs")).json().get("logs", "")
            raise RuntimeError(f"the bare Ray job ended {job['status']}:\n{logs[-2000:]}")
    return seconds


async def ray_vs_local(cluster: RayCluster, reps: int, tmp: Path) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"local_first": [], "local": [], "ray_first": [], "ray": [],
                                     "ray_job_start": [], "bare_ray": []}
    local = Settings(data_dir=tmp / "local", warm_trainers=False)
    on_ray = Settings(data_dir=tmp / "ray", shared_dir=tmp / "shared", ray_address=cluster.address)
    async with Runtime(local) as lrt, Runtime(on_ray) as rrt:
        await one_job(lrt, TINY)  # not timed: builds the tiny model in each place
        _, _, first_id = await one_job(rrt, TINY)
        template = tmp / "shared" / "jobs" / first_id / "attempt-1" / "config.json"
        account = await rrt.authenticate(rrt.api_key)
        placement = (await rrt.get_job(account, first_id)).placement or {}
        num_cpus = float(placement.get("devices", 1))  # as RayExecutor asks on a CPU node
        for rep in range(reps):
            sides = ["bare", "local", "ray"]
            for side in sides[rep % 3:] + sides[:rep % 3]:  # each side first in turn
                if side == "bare":
                    times["bare_ray"].append(await bare_ray_job(
                        cluster, tmp / "shared", template, rep, num_cpus))
                elif side == "local":
                    first, wall, _ = await one_job(lrt, TINY)
                    times["local_first"].append(first)
                    times["local"].append(wall)
                else:
                    first, wall, job_id = await one_job(rrt, TINY)
                    times["ray_first"].append(first)
                    times["ray"].append(wall)
                    times["ray_job_start"].append(ray_job_start(cluster, tmp / "shared", job_id))
            print(f"rep {rep + 1}/{reps}: " + ", ".join(
                f"{name} {values[-1]:.2f} s" for name, values in times.items()), flush=True)
    return times


async def node_lost(cluster: RayCluster, tmp: Path) -> dict[str, float]:
    settings = Settings(data_dir=tmp / "lost", shared_dir=tmp / "lost-shared",
                        ray_address=cluster.address)
    async with Runtime(settings) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        job = await rt.create_job(account, {
            "model": "alallo/tiny-gpt2", "training_file": file.id,
            "hyperparameters": {"max_steps": LOST_STEPS},
            "trainer": {"type": "simulated", "step_delay_s": 0.2}})
        killed_at: float | None = None
        again: float | None = None
        reached = resumed_from = 0
        async for item in rt.stream(account, job.id):
            if item.kind != "job":
                continue
            state = await rt.get_job(account, job.id)
            if state.attempt == 1:
                reached = max(reached, state.progress.step)
            if killed_at is None and state.checkpoint is not None and state.placement:
                node = next(w for w in cluster.workers
                            if w.node_id == state.placement["node"])
                cluster.kill_raylet(node)
                killed_at = time.perf_counter()
            elif (again is None and killed_at is not None and state.attempt == 2
                  and state.first_step_at is not None):
                again = time.perf_counter() - killed_at
                resumed_from = state.first_step - 1  # first_step: the first step it ran
        done = await rt.get_job(account, job.id)
        entries = await rt.store.ledger_entries(job.id)
    if done.status.value != "succeeded" or again is None:
        raise RuntimeError(f"job {job.id} ended {done.status.value}: {done.error}")
    charged = sum(e["last_step"] - e["first_step"] + 1 for e in entries if e["kind"] == "charge")
    return {"seconds": again, "redone": float(reached - resumed_from),
            "charged_steps": float(charged)}


def rows(times: dict[str, list[float]], lost: dict[str, float]) -> list[dict[str, Any]]:
    local, ray = statistics.median(times["local"]), statistics.median(times["ray"])
    bare = statistics.median(times["bare_ray"])
    local_first = statistics.median(times["local_first"])
    ray_first = statistics.median(times["ray_first"])
    return [
        row("ray: tiny real job, wall, alallo on Ray (vs the same trainer as a bare Ray job)",
            ray, "s", bare, 1.05, met=ray / bare <= 1.05),
        row("ray: tiny real job, wall, through Ray (vs the local executor)", ray, "s",
            local, None),
        row("ray: submit to first step, through Ray (vs local)", ray_first, "s",
            local_first, None),
        row("ray: Ray's job start, POST /api/jobs/ to the trainer started on the node",
            statistics.median(times["ray_job_start"]), "s", None, None),
        row("ray: node lost to training again on another node", lost["seconds"], "s",
            None, 30.0, met=lost["seconds"] < 30.0),
        row("ray: node lost, steps redone (from the last checkpoint)", lost["redone"], "stp",
            None, None),
        row("ray: node lost, steps charged (= max_steps)", lost["charged_steps"], "stp",
            LOST_STEPS, 1.0, met=lost["charged_steps"] == LOST_STEPS),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the same 5 repetitions (for make bench)")
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="alallo-bench-ray-") as scratch, \
            RayCluster() as cluster:
        print(f"Ray cluster up in {cluster.startup_seconds:.1f} s", flush=True)
        times = trio.run(ray_vs_local, cluster, 5, Path(scratch))
        lost = trio.run(node_lost, cluster, Path(scratch))
    result = rows(times, lost)
    return report(result, args.json)


if __name__ == "__main__":
    sys.exit(main())
