"""A real local Ray cluster for tests: a head node with no CPUs for work and two 2-CPU worker
nodes, all on this machine, each a ``ray start --block`` child process in its own session.

Use the session fixture ``ray_cluster`` (import it into a conftest), or ``RayCluster`` directly
(``with RayCluster() as cluster: ...``). ``python tests/ray_cluster.py`` starts one by hand,
prints its address and node ids and runs until Ctrl-C (or SIGTERM).

Design notes (Ray 2.60):

- Every port Ray would otherwise take at a fixed default is given a free port picked at start
  (GCS, dashboard, Ray client server, each node's dashboard agent HTTP port, and the head's
  two Prometheus ports ``DASHBOARD_METRIC_PORT``/``AUTOSCALER_METRIC_PORT``, which are env vars
  only). The other ports (node manager, object manager, metrics export, runtime env agent,
  dashboard agent gRPC, worker ports) default to 0 in 2.60, i.e. the OS picks them when they
  bind, which never collides; they are left so (``--min/max-worker-port=0``).
- Node IP: Ray 2.60 rewrites 127.0.0.1/localhost (``--node-ip-address``, the GCS address a
  worker joins) to the machine's routable IP, and a worker node refuses to start when that is
  switched off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``). So the nodes' ``node_ip`` (and their
  ``node:<ip>`` resource) is that IP, the same for all three nodes; the GCS listens there. The
  dashboard (the only address tests use) is bound to 127.0.0.1 (``--dashboard-host``).
- Ray's processes get a small environment (no secrets): PATH (the venv's bin first), HOME,
  LANG, ``RAY_USAGE_STATS_ENABLED=0`` and a marker variable, ``ALALLO_TEST_RAY_CLUSTER``, unique
  to the cluster. Every process of the cluster inherits it, down to job entrypoints and what
  they start in a new session, so stopping kills the nodes' process groups and then sweeps
  every process that still carries the marker. ``ray stop`` is never used: it kills every Ray
  process on the machine.
- One ``--temp-dir`` for all nodes (``<root>/t``, root a short ``/tmp/r-XXXX``: Ray's unix
  socket paths must stay under ~107 chars), as Ray's own ``ray.cluster_utils.Cluster`` does:
  the session dir (``<temp-dir>/session_<name>``) is then one for the cluster, and Ray gives
  each node's sockets and log files unique names in it. Per-node temp dirs break job logs on a
  one-machine cluster: a dashboard agent reads job logs through ``ray.init()``, which on a
  machine with several nodes picks the head node (``get_node_to_connect_for_driver``), so the
  agent of the worker running a job looked in the head's log dir and ``GET
  /api/jobs/{id}/logs`` (and the tail) showed none of the entrypoint's output.
- A ``ray start --block`` process drains its node for up to 30 s on SIGTERM; a test cluster has
  nothing to drain, so stopping is SIGKILL.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx
import psutil
import pytest

MARKER = "ALALLO_TEST_RAY_CLUSTER"
"""Env var set, with a value unique to the cluster, in every process of a test cluster."""

SCRIPTS = Path(sysconfig.get_path("scripts"))
"""The venv's bin (``ray``, ``python``)."""
RAY = SCRIPTS / "ray"

OBJECT_STORE_BYTES = 100 * 1024 * 1024

FAST_NODE_DEATH_ENV = {"RAY_health_check_period_ms": "1000",
                       "RAY_health_check_failure_threshold": "2"}
"""``extra_env`` for a cluster whose GCS declares a node DEAD ~1.5 s after its raylet dies
(a job on it FAILED ~2 s after), instead of ~14.5 s (~17-19 s) with Ray's defaults. Not the
default: on a loaded 2-core machine, two missed 1 s health checks could fail a live node."""


def free_ports(n: int) -> list[int]:
    """n distinct ports free on 127.0.0.1 now (all sockets held until all are picked)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class RayNode:
    """One ``ray start --block`` of the cluster."""

    name: str
    head: bool
    temp_dir: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    ports: dict[str, int]
    node_id: str = ""
    """Ray node id (hex), read from the raylet's command line."""
    raylet_pid: int = 0

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the node's ``ray start`` output."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def raylet_alive(self) -> bool:
        try:
            return psutil.Process(self.raylet_pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False


@dataclass
class RayCluster:
    """A head (``--num-cpus=0``) and ``num_workers`` worker nodes of ``worker_cpus`` CPUs."""

    num_workers: int = 2
    worker_cpus: int = 2
    extra_env: dict[str, str] = field(default_factory=dict)
    """More env vars for every node's processes (e.g. ``RAY_JOB_STOP_WAIT_TIME_S``)."""
    start_timeout: float = 120.0

    root: Path = field(init=False)
    head: RayNode = field(init=False)
    workers: list[RayNode] = field(init=False, default_factory=list)
    """The worker nodes started, in order (a killed one stays listed; see ``alive_workers``)."""
    address: str = field(init=False, default="")
    """The dashboard's http address (``ray job submit --address``), e.g. http://127.0.0.1:PORT."""
    gcs_address: str = field(init=False, default="")
    startup_seconds: float = field(init=False, default=0.0)
    """From ``start()`` to every node ALIVE in ``GET /api/v0/nodes`` with its dashboard agent
    answering (measured on 2 cores: ~9-10 s; 17 s once under load)."""
    token: str = field(init=False, default_factory=lambda: uuid.uuid4().hex)
    _count: int = field(init=False, default=0)

    # ---- start ---------------------------------------------------------------------------

    @property
    def head_node_id(self) -> str:
        return self.head.node_id

    @property
    def alive_workers(self) -> list[RayNode]:
        return [w for w in self.workers if w.raylet_alive()]

    def env(self, head: bool) -> dict[str, str]:
        env = {
            "PATH": f"{SCRIPTS}:/usr/local/bin:/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/tmp"),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "RAY_USAGE_STATS_ENABLED": "0",
            MARKER: self.token,
        }
        env.update(self.extra_env)
        return env

    def start(self) -> Self:
        t0 = time.monotonic()
        # Short: Ray's unix socket paths (<temp-dir>/session_<date>_<pid>/sockets/raylet...)
        # must stay under ~107 chars.
        self.root = Path(tempfile.mkdtemp(prefix="r-", dir="/tmp"))
        try:
            gcs, dash, client, agent, dash_metrics, autoscaler_metrics = free_ports(6)
            self.gcs_address = f"127.0.0.1:{gcs}"  # Ray makes it <routable ip>:<gcs>
            self.address = f"http://127.0.0.1:{dash}"
            env = self.env(head=True)
            env["DASHBOARD_METRIC_PORT"] = str(dash_metrics)
            env["AUTOSCALER_METRIC_PORT"] = str(autoscaler_metrics)
            self.head = self._spawn(
                "head", True, env,
                ["--head", f"--port={gcs}", "--num-cpus=0", "--num-gpus=0",
                 "--include-dashboard=true", "--dashboard-host=127.0.0.1",
                 f"--dashboard-port={dash}", f"--ray-client-server-port={client}",
                 f"--dashboard-agent-listen-port={agent}"],
                {"gcs": gcs, "dashboard": dash, "client": client, "agent": agent,
                 "dashboard_metrics": dash_metrics, "autoscaler_metrics": autoscaler_metrics})
            self._wait_gcs(gcs, self.head)
            self._read_raylet(self.head)
            self._wait_dashboard()
            self._wait_ready(self.head)
            for _ in range(self.num_workers):
                self.start_worker()
        except BaseException as e:
            detail = self._diagnose()
            self.stop()
            raise RuntimeError(f"Ray test cluster did not start: {e!r}\n{detail}") from e
        self.startup_seconds = time.monotonic() - t0
        return self

    def start_worker(self, num_cpus: int | None = None, num_gpus: int = 0) -> RayNode:
        """Add a worker node (e.g. after ``kill_raylet``); returns once it is ALIVE and its
        dashboard agent answers. ``num_gpus`` is a logical resource: no device is needed.

        Nodes start one after another: in the shared temp dir Ray names a node's sockets
        and log files by the first free ``name.N``, which two nodes starting at once can
        both pick."""
        node = self._spawn_worker(num_cpus, num_gpus)
        self.workers.append(node)
        self._read_raylet(node)
        self._wait_ready(node)
        return node

    def _wait_ready(self, node: RayNode) -> None:
        self.wait_alive([node.node_id])
        deadline = self._deadline()
        while True:
            self._check_running(node)
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", node.ports["agent"]), 0.5):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"dashboard agent of {node.name} not listening")
            time.sleep(0.1)

    def _diagnose(self) -> str:
        parts = []
        with contextlib.suppress(Exception):
            parts.append(f"node states: {self.node_states()}")
        for node in [*([self.head] if hasattr(self, "head") else []), *self.workers]:
            parts.append(f"--- {node.name} (node {node.node_id or '?'}, ray start "
                         f"rc={node.process.poll()}):\n{node.log_tail(1500)}")
        return "\n".join(parts)

    def _spawn_worker(self, num_cpus: int | None = None, num_gpus: int = 0) -> RayNode:
        (agent,) = free_ports(1)
        self._count += 1
        cpus = self.worker_cpus if num_cpus is None else num_cpus
        return self._spawn(
            f"w{self._count}", False, self.env(head=False),
            [f"--address={self.gcs_address}", f"--num-cpus={cpus}",
             f"--num-gpus={num_gpus}", f"--dashboard-agent-listen-port={agent}"],
            {"agent": agent})

    def _spawn(self, name: str, head: bool, env: dict[str, str], args: list[str],
               ports: dict[str, int]) -> RayNode:
        temp_dir = self.root / "t"
        temp_dir.mkdir(exist_ok=True)
        log_path = self.root / f"{name}.log"
        cmd = [str(RAY), "start", "--block", f"--temp-dir={temp_dir}",
               "--min-worker-port=0", "--max-worker-port=0",
               f"--object-store-memory={OBJECT_STORE_BYTES}", "--include-log-monitor=false",
               "--disable-usage-stats", "--log-style=record", *args]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(cmd, env=env, cwd=self.root, stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        return RayNode(name, head, temp_dir, process, log_path, ports)

    def _check_running(self, node: RayNode) -> None:
        if node.process.poll() is not None:
            raise RuntimeError(f"ray start of node {node.name} exited with "
                               f"{node.process.returncode}:\n{node.log_tail()}")

    def _deadline(self) -> float:
        return time.monotonic() + self.start_timeout

    def _wait_gcs(self, port: int, node: RayNode) -> None:
        deadline = self._deadline()
        while True:
            self._check_running(node)
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"GCS of {node.name} not listening on {port}")
            time.sleep(0.1)

    def _read_raylet(self, node: RayNode) -> None:
        """The node's raylet pid and node id (``--node_id=`` on the raylet's command line)."""
        deadline = self._deadline()
        while True:
            self._check_running(node)
            with contextlib.suppress(psutil.Error):
                for p in psutil.Process(node.process.pid).children(recursive=True):
                    if p.name() == "raylet":
                        for arg in p.cmdline():
                            if arg.startswith("--node_id="):
                                node.raylet_pid = p.pid
                                node.node_id = arg.split("=", 1)[1]
                                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"no raylet for node {node.name}:\n{node.log_tail()}")
            time.sleep(0.1)

    def _wait_dashboard(self) -> None:
        deadline = self._deadline()
        while True:
            self._check_running(self.head)
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.address}/api/version", timeout=2).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError("dashboard not answering /api/version")
            time.sleep(0.2)

    # ---- state ---------------------------------------------------------------------------

    def nodes(self) -> list[dict[str, Any]]:
        """``GET /api/v0/nodes`` rows (node_id, state, is_head_node, resources_total, labels...)."""
        r = httpx.get(f"{self.address}/api/v0/nodes", params={"limit": 1000}, timeout=10)
        r.raise_for_status()
        return r.json()["data"]["result"]["result"]

    def node_states(self) -> dict[str, str]:
        return {n["node_id"]: n["state"] for n in self.nodes()}

    def wait_node_state(self, node_ids: list[str], state: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(httpx.HTTPError):
                states = self.node_states()
                if all(states.get(i) == state for i in node_ids):
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"nodes {node_ids} not {state} in {timeout} s")
            time.sleep(0.2)

    def wait_alive(self, node_ids: list[str]) -> None:
        self.wait_node_state(node_ids, "ALIVE", self.start_timeout)

    def processes(self) -> list[psutil.Process]:
        """Every live process of this cluster (carrying its marker), entrypoints included."""
        found = []
        me = os.getpid()
        for p in psutil.process_iter():
            if p.pid == me:
                continue
            with contextlib.suppress(psutil.Error):
                if p.status() == psutil.STATUS_ZOMBIE:
                    continue
                if p.environ().get(MARKER) == self.token:
                    found.append(p)
        return found

    def memory(self) -> dict[str, int]:
        """Sum over the cluster's processes: ``rss`` and ``pss`` bytes (PSS counts shared
        pages once), and how many ``processes``."""
        rss = pss = n = 0
        for p in self.processes():
            with contextlib.suppress(psutil.Error):
                info = p.memory_full_info()
                rss += info.rss
                pss += info.pss
                n += 1
        return {"rss": rss, "pss": pss, "processes": n}

    # ---- faults and stop -----------------------------------------------------------------

    def kill_raylet(self, worker: RayNode) -> None:
        """SIGKILL the worker's raylet (the node's other processes are left to react)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.raylet_pid, signal.SIGKILL)

    def stop(self) -> None:
        """SIGKILL every node's process group, then every process left with the marker
        (workers, job entrypoints in their own sessions); then remove the temp dirs."""
        nodes = [*getattr(self, "workers", []), *([self.head] if hasattr(self, "head") else [])]
        for node in nodes:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(node.process.pid, signal.SIGKILL)
        for node in nodes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.process.wait(10)
        deadline = time.monotonic() + 30
        while left := self.processes():
            for p in left:
                with contextlib.suppress(psutil.Error):
                    p.kill()
            if time.monotonic() > deadline:
                raise RuntimeError(f"Ray processes survive stop: {[p.pid for p in left]}")
            time.sleep(0.1)
        if hasattr(self, "root"):
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def describe(self) -> dict[str, Any]:
        return {"address": self.address, "gcs_address": self.gcs_address,
                "head_node_id": self.head_node_id, "root": str(self.root),
                "startup_seconds": round(self.startup_seconds, 2),
                "workers": [{"name": w.name, "node_id": w.node_id, "raylet_pid": w.raylet_pid}
                            for w in self.workers]}


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """A real Ray cluster for the whole session: see ``RayCluster``."""
    cluster = RayCluster()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


if __name__ == "__main__":
    stop = False

    def _on_term(*_: object) -> None:
        global stop
        stop = True

    signal.signal(signal.SIGTERM, _on_term)
    extra = dict(a.split("=", 1) for a in sys.argv[1:])
    with RayCluster(extra_env=extra) as cluster:
        print(json.dumps({**cluster.describe(), "memory": cluster.memory()}), flush=True)
        try:
            while not stop:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
