"""The Ray executor's parts that need no cluster: Ray nodes as the pool's nodes, the pool
following the cluster, the REST answers read, the settings a Ray setup needs, and the fence
(a superseded run stops itself: the launcher on the node, and the trainer before it saves).
The cluster itself: ``tests/alallo/test_ray.py``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from actors import open_supervisor
from alallo import Settings
from alallo._errors import SettingError
from alallo.capacity import FollowNodes, NodeSpec, Pool, Scheduler
from alallo.executors import RayApi, RayNode
from alallo.executors._ray import write_fence
from alallo.jobs import DEVICE_TYPES
from alallo.runtime._devices import open_executor, open_pool
from alallo.runtime._ray_nodes import UNKNOWN_GPU_MEMORY_GB, node_spec
from alallo.trainers import TrainerConfig
from alallo.trainers._fence import SUPERSEDED

pytestmark = pytest.mark.unit


def ray_node(node_id: str, alive: bool = True, **resources: float) -> RayNode:
    return RayNode(node_id=node_id, alive=alive, head=False, resources=resources)


def test_ray_nodes_become_the_pools_nodes_by_their_devices() -> None:
    h100 = node_spec(ray_node("a" * 56, GPU=8, **{"accelerator_type:H100": 1}),
                     unknown_price=3.0)
    assert h100 == (NodeSpec(name="a" * 56, device="H100-80GB", count=8, ray=True), None)
    l40s = node_spec(ray_node("b", GPU=2, **{"accelerator_type:L40S": 1}), unknown_price=3.0)
    assert l40s is not None and l40s[0].device == "L40S-48GB"
    odd = node_spec(ray_node("c", GPU=1, **{"accelerator_type:B300X": 1}), unknown_price=3.0)
    assert odd is not None and odd[1] is not None
    assert (odd[0].device, odd[1].memory_gb, odd[1].price_per_hour) == (
        "ray-B300X", UNKNOWN_GPU_MEMORY_GB, 3.0)
    assert node_spec(ray_node("d", CPU=4), unknown_price=3.0) == (
        NodeSpec(name="d", device="cpu", count=4, ray=True), None)
    assert node_spec(ray_node("head", CPU=0), unknown_price=3.0) is None, "offers nothing"


def test_the_pool_follows_the_cluster_and_keeps_its_simulated_nodes() -> None:
    sim = NodeSpec(name="sim", device="H100-80GB", count=8, simulated=True)
    pool = Pool([sim], DEVICE_TYPES)
    one, two = (NodeSpec(name=n, device="cpu", count=2, ray=True) for n in ("n1", "n2"))
    assert pool.follow([one, two]) == (["n1", "n2"], [])
    pool.take(pool.nodes["n1"], "job-1", 1)
    assert pool.follow([two]) == ([], ["n1"])
    assert set(pool.nodes) == {"sim", "n2"}
    bigger = NodeSpec(name="n2", device="cpu", count=4, ray=True)
    assert pool.follow([bigger]) == (["n2"], ["n2"]), "changed devices: a new node"
    assert pool.nodes["n2"].spec.count == 4


async def test_the_scheduler_follows_the_nodes_and_forgets_a_left_ones_jobs() -> None:
    node = NodeSpec(name="n1", device="cpu", count=1, ray=True)
    pool = Pool([], DEVICE_TYPES)
    async with open_supervisor(name="s") as supervisor:
        scheduler = await supervisor.start_child(Scheduler, pool, name="scheduler")
        assert await scheduler.ask(FollowNodes([node])) == (["n1"], [])
        pool.take(pool.nodes["n1"], "job-1", 1)
        assert await scheduler.ask(FollowNodes([])) == ([], ["n1"])
        assert pool.nodes == {}


NODES = {"result": True, "msg": "", "data": {"result": {"total": 2, "result": [
    {"node_id": "h" * 56, "node_ip": "10.0.0.1", "is_head_node": True, "state": "ALIVE",
     "resources_total": {"memory": 1e9}, "labels": {"ray.io/node-id": "h" * 56}},
    {"node_id": "w" * 56, "node_ip": "10.0.0.2", "is_head_node": False, "state": "DEAD",
     "resources_total": {"CPU": 2.0, "GPU": 1.0, "accelerator_type:L4": 1.0}, "labels": {}},
]}}}


async def test_the_rest_answers_are_read() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/api/v0/nodes":
            return httpx.Response(200, json=NODES)
        if request.url.path == "/api/jobs/":
            return httpx.Response(200, json={"submission_id": "r1", "job_id": None})
        if request.url.path == "/api/jobs/r1":
            return httpx.Response(200, json={"status": "FAILED", "message": "exit code 3",
                                             "driver_node_id": "w", "driver_exit_code": 3})
        return httpx.Response(404, text="no such thing")

    api = RayApi("http://ray.test:8265")
    api._http = httpx.AsyncClient(base_url=api.address, transport=httpx.MockTransport(answer))
    head, worker = await api.nodes()
    assert (head.head, head.alive, worker.alive, worker.accelerator) == (True, True, False, "L4")
    await api.submit("r1", "python -m x", node_id="w", num_cpus=1, num_gpus=1)
    body = json.loads(seen[-1].content)
    assert body["entrypoint_label_selector"] == {"ray.io/node-id": "w"}
    assert (body["entrypoint_num_cpus"], body["entrypoint_num_gpus"]) == (1, 1)
    job = await api.job("r1")
    assert (job.ended, job.driver_exit_code) == (True, 3)
    with pytest.raises(OSError, match="refused GET /api/jobs/r2: HTTP 404"):
        await api.job("r2")
    await api.aclose()


def test_a_ray_setup_without_shared_storage_is_refused_with_one_line(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, ray_address="http://127.0.0.1:8265")
    with pytest.raises(SettingError, match="ALALLO_RAY_ADDRESS needs ALALLO_SHARED_DIR: a "
                                           "directory every node of the Ray cluster mounts"):
        open_executor(settings, None)
    declared = [NodeSpec(name="gpu-1", device="H100-80GB")]
    with pytest.raises(SettingError, match="node 'gpu-1' is not simulated"):
        open_pool(Settings(data_dir=tmp_path, ray_address="http://x:1", nodes=declared))
    shared = Settings(data_dir=tmp_path / "d", shared_dir=tmp_path / "s")
    assert (shared.jobs_dir, shared.files_dir, shared.resolved_database_url) == (
        tmp_path / "s" / "jobs", tmp_path / "s" / "files",
        f"sqlite:///{(tmp_path / 'd').resolve() / 'alallo.db'}")


Launched = list[subprocess.Popen[str]]


@pytest.fixture
def launched() -> Iterator[Launched]:
    """The launchers a test started: killed and reaped at its end, passed or failed."""
    processes: Launched = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.communicate()


def launch(tmp_path: Path, command: list[str], launched: Launched,
           ) -> tuple[subprocess.Popen[str], Path]:
    """The node launcher on a launch file for ``command``: run ``run-1``, its job's current
    (added to ``launched``, the fixture that reaps it)."""
    run = tmp_path / "attempt-1"
    run.mkdir()
    fence = write_fence(tmp_path, "run-1")
    (run / "launch.json").write_text(json.dumps({
        "command": command, "env": {"JOB_VAR": "1"}, "run_id": "run-1",
        "fence_file": str(fence), "grace_s": 1}))
    process = subprocess.Popen(
        [sys.executable, "-m", "alallo.executors._node_launcher", str(run / "launch.json")],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "SECRET_TOKEN": "x"})
    launched.append(process)
    return process, run


def trainer_pid(run: Path, process: subprocess.Popen[str]) -> int:
    """The pid the launcher wrote (it writes it as soon as the trainer has started)."""
    deadline = time.monotonic() + 20
    while not (run / "trainer.pid").exists():
        assert process.poll() is None and time.monotonic() < deadline, "no trainer.pid"
        time.sleep(0.02)  # another process's file: nothing to wait on
    return int((run / "trainer.pid").read_text())


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_the_launcher_runs_the_trainer_scrubbed_and_returns_its_exit(
        tmp_path: Path, launched: Launched) -> None:
    show = "import json, os, sys; print(json.dumps({k: os.environ.get(k) for k in " \
           "['JOB_VAR', 'SECRET_TOKEN', 'ALALLO_RUN_ID']})); sys.exit(3)"
    process, _ = launch(tmp_path, [sys.executable, "-c", show], launched)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 3
    assert json.loads(out) == {"JOB_VAR": "1", "SECRET_TOKEN": None, "ALALLO_RUN_ID": "run-1"}


def test_a_superseded_run_stops_its_trainer_and_exits(tmp_path: Path, launched: Launched) -> None:
    process, run = launch(tmp_path, SLEEP, launched)
    pid = trainer_pid(run, process)
    write_fence(tmp_path, "run-2")  # the job moved on: another run is current
    out, _ = process.communicate(timeout=30)
    assert process.returncode == SUPERSEDED and not alive(pid)
    assert "Run run-1 was superseded by run-2" in out


def test_a_stop_from_ray_stops_the_trainers_group(tmp_path: Path, launched: Launched) -> None:
    process, run = launch(tmp_path, SLEEP, launched)
    pid = trainer_pid(run, process)
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=30)
    assert process.returncode == 128 + signal.SIGTERM and not alive(pid)


def test_a_node_without_the_shared_storage_says_so(tmp_path: Path) -> None:
    missing = tmp_path / "elsewhere" / "launch.json"
    done = subprocess.run([sys.executable, "-m", "alallo.executors._node_launcher", str(missing)],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    error = json.loads(done.stdout)
    assert error["type"] == "error" and error["kind"] == "platform"
    assert "must be shared with every Ray node" in error["message"]


def test_a_superseded_trainer_saves_no_checkpoint(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    data.write_text('{"text": "one"}\n' * 20)
    config = TrainerConfig(job_id="ft-1", model=str(tmp_path), model_name="alallo/tiny-gpt2",
                           training_file=str(data), data_format="text",
                           output_dir=str(tmp_path / "model"),
                           checkpoint_dir=str(tmp_path / "checkpoints"), max_steps=20)
    (tmp_path / "config.json").write_text(config.model_dump_json())
    fence = write_fence(tmp_path, "run-2")
    done = subprocess.run(
        [sys.executable, "-m", "alallo.trainers.simulated", str(tmp_path / "config.json")],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "ALALLO_FENCE_FILE": str(fence), "ALALLO_RUN_ID": "run-1"})
    assert done.returncode == SUPERSEDED, done.stderr
    assert "Run run-1 was superseded by run-2: nothing saved" in done.stdout
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "model").exists()
