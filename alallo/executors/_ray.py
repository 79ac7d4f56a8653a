"""`RayExecutor`: each trainer runs as a Ray job on the node the scheduler planned.

Why a Ray job through the Jobs REST API, not a Ray task: the server stays a plain HTTP client
of the cluster (no ``ray.init``, no asyncio loop beside Trio, no Ray version lock between the
server and the cluster beyond the REST API), a job's entrypoint is a process like the local
trainer (``exec <python> -m alallo.executors._node_launcher launch.json``: the same trainer command,
scrubbed environment, process group and protocol lines), Ray itself streams its output and
stops it, and the entrypoint's resources (``entrypoint_num_cpus``/``_num_gpus``) are held on
the node for as long as it runs. The node is chosen by its label ``ray.io/node-id``
(``entrypoint_label_selector``), and Ray sets ``CUDA_VISIBLE_DEVICES`` to the GPUs it gave.

Following a run: the launcher on the node copies the trainer's output to the attempt's
directory on the shared storage and writes its exit status there when it ends; the server
reads both every :data:`LINES_S` (Ray's own log tail brings a line ~2 s late and closes 3-5 s
after the end: measured, tests/ray_cluster.py). Every :data:`POLL_S` it also looks at the Ray
job and its node: the run ends as **node lost** when the node is no longer ALIVE (the raylet
died, the machine went away: Ray says DEAD in ~15 s) or the cluster has not answered for
:data:`CLUSTER_SILENT_S`, and with Ray's account when the job ended without an exit status
(the launcher killed, or never started: then Ray's log holds what it said). A lost node's trainer may still run (a node cut off keeps its
processes): each run is fenced (:mod:`alallo.trainers._fence`) — its id is written to the job's
fence file before it is submitted, so a run that is no longer current stops itself.

Every node must see the job's directory at the same path (``ALALLO_SHARED_DIR``): the launch
file, the config, the training file, checkpoints and the model are read and written there.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
from collections.abc import Mapping
from pathlib import Path

import structlog
import trio

from ._executor import Launch, LineSink, RunEnd
from ._node_launcher import EXIT_STATUS, OUTPUT
from ._ray_api import RayApi, RayApiError, RayJob

__all__ = ["CLUSTER_SILENT_S", "POLL_S", "RayExecutor", "write_fence"]

POLL_S = 1.0
"""Seconds between two looks at a run's Ray job and its node."""
LINES_S = 0.1
"""Seconds between two reads of a run's output on the shared storage."""
CLUSTER_SILENT_S = 30.0
"""Seconds the cluster may not answer before a run's node counts as lost."""
RAY_ASSIGNS = frozenset({"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"})
"""Variables the executor leaves to Ray: it gives each job its GPUs itself."""
FENCE_FILE = "current-run"
"""The job's fence file, in its directory: the id of the run whose checkpoints count."""

log = structlog.get_logger("alallo.ray")


def write_fence(job_dir: Path, run_id: str) -> Path:
    """Make ``run_id`` the job's current run (atomically: a reader sees the old id or the
    new one); returns the fence file's path."""
    fence = job_dir / FENCE_FILE
    partial = job_dir / f".{FENCE_FILE}.{os.getpid()}"
    partial.write_text(run_id)
    partial.replace(fence)
    return fence


class RayExecutor:
    """Runs trainers as Ray jobs on the nodes of one Ray cluster.

    Args:
        api: the cluster's REST API.
        python: the interpreter on the nodes that has alallo installed (the server's path:
            nodes run the same image or environment).
        grace_s: seconds between SIGTERM and SIGKILL when the launcher stops a trainer.
        shared_env: variables every trainer gets (``Settings.trainer_env``).
    """

    name = "ray"
    fenced = True

    def __init__(self, api: RayApi, *, python: str, grace_s: float,
                 shared_env: Mapping[str, str] | None = None) -> None:
        self.api = api
        self.python = python
        self.grace_s = grace_s
        self.shared_env = dict(shared_env or {})

    def trainer(self, launch: Launch) -> RayRun:
        """A Ray job of ``launch`` on the node ``launch.node`` (a Ray node id)."""
        return RayRun(self, launch)


class RayRun:
    """One trainer run as a Ray job (:class:`~alallo.executors._executor.TrainerRun`)."""

    def __init__(self, executor: RayExecutor, launch: Launch) -> None:
        self._executor = executor
        self._api = executor.api
        self.launch = launch
        self.end: RunEnd | None = None
        self._offset = 0
        self._pending = b""

    async def run(self, on_line: LineSink) -> RunEnd:
        launch = self.launch
        self._prepare()
        cpu = launch.device_type == "cpu"
        python = shlex.quote(self._executor.python)
        # exec: Ray runs the entrypoint with ``sh -c``; the launcher replaces the shell, so
        # Ray's child is the launcher itself (one process less to start, Ray's stop signals
        # reach it first hand, and a launcher killed by a signal reads as that signal).
        entrypoint = (f"exec {python} -m alallo.executors._node_launcher "
                      f"{shlex.quote(str(launch.cwd / 'launch.json'))}")
        await self._api.submit(launch.run_id, entrypoint, node_id=launch.node,
                               num_cpus=launch.devices if cpu else 1,
                               num_gpus=0 if cpu else launch.devices,
                               stop_wait_s=self._executor.grace_s + 2,  # the launcher's grace
                               metadata={"alallo_run": launch.run_id})
        log.info("ray.submitted", run=launch.run_id, node=launch.node)
        try:
            self.end = await self._follow(on_line)
            return self.end
        finally:
            if self.end is None:
                with trio.CancelScope(shield=True):
                    self.end = await self._stop()

    def _prepare(self) -> None:
        """The fence, then the launch file, in the job's directory on the shared storage."""
        launch = self.launch
        fence = write_fence(launch.cwd.parent, launch.run_id)
        env = {k: v for k, v in {**self._executor.shared_env, **launch.env}.items()
               if k not in RAY_ASSIGNS}
        for stale in (OUTPUT, EXIT_STATUS):  # a directory reused by a repeated start
            (launch.cwd / stale).unlink(missing_ok=True)
        (launch.cwd / "launch.json").write_text(json.dumps({
            "command": launch.command, "env": env, "run_id": launch.run_id,
            "fence_file": str(fence), "grace_s": self._executor.grace_s}, indent=2))

    def _read(self) -> tuple[list[bytes], int | None]:
        """The complete lines the trainer printed since the last read, and the launcher's
        exit status once it has written it (then every line is read). Blocking."""
        status_file = self.launch.cwd / EXIT_STATUS
        status = int(status_file.read_text()) if status_file.exists() else None
        try:
            with (self.launch.cwd / OUTPUT).open("rb") as output:
                output.seek(self._offset)
                chunk = output.read()
        except FileNotFoundError:
            chunk = b""
        self._offset += len(chunk)
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        if status is not None and self._pending:
            lines.append(self._pending)
            self._pending = b""
        return lines, status

    async def _follow(self, on_line: LineSink) -> RunEnd:
        """Hand on the trainer's lines as its launcher writes them, until the launcher's exit
        status appears, or Ray ends the job or loses its node; how the run ended."""
        run_id, node = self.launch.run_id, self.launch.node
        silent_since: float | None = None
        next_look = trio.current_time() + POLL_S
        while True:
            lines, status = await trio.to_thread.run_sync(self._read)
            for line in lines:
                await on_line(line.decode("utf-8", "replace").rstrip("\r"))
            if status is not None:
                return RunEnd(status)
            if trio.current_time() < next_look:
                await trio.sleep(LINES_S)
                continue
            next_look = trio.current_time() + POLL_S
            try:
                job = await self._api.job(run_id)
                alive = await self._node_alive(node)
            except RayApiError as exc:
                now = trio.current_time()
                silent_since = silent_since or now
                if now - silent_since >= CLUSTER_SILENT_S:
                    log.warning("ray.cluster_silent", node=node, run=run_id, error=str(exc))
                    return RunEnd(None, node_lost=(
                        f"the Ray cluster has not answered for {CLUSTER_SILENT_S:g} s ({exc})"))
                continue
            silent_since = None
            if not alive:
                log.warning("ray.node_lost", node=node, run=run_id, ray_status=job.status)
                return RunEnd(None, node_lost=_lost(node))
            if job.ended:  # without an exit status: the launcher was killed, or never ran
                return await self._ended_early(job, on_line)

    async def _ended_early(self, job: RayJob, on_line: LineSink) -> RunEnd:
        """A Ray job that ended without its launcher's exit status: the rest of the output
        (Ray's log when the node never saw the shared storage), and Ray's account of it."""
        lines, _ = await trio.to_thread.run_sync(self._read)
        if self._offset == 0 and not lines:
            with contextlib.suppress(RayApiError):
                lines = [line.encode() for line in
                         (await self._api.logs(self.launch.run_id)).splitlines()]
        for line in lines:
            await on_line(line.decode("utf-8", "replace").rstrip("\r"))
        return _ended(job, node_lost=None)

    async def _node_alive(self, node: str) -> bool:
        return any(n.node_id == node and n.alive for n in await self._api.nodes())

    async def _stop(self) -> RunEnd:
        """Stop the Ray job (its launcher stops the trainer's group) and wait for its end."""
        run_id = self.launch.run_id
        try:
            await self._api.stop(run_id)
            with trio.move_on_after(self._executor.grace_s + 15):
                while not (job := await self._api.job(run_id)).ended:
                    await trio.sleep(0.2)
                return _ended(job, node_lost=None)
        except RayApiError as exc:
            log.warning("ray.stop_failed", run=run_id, error=str(exc))
        return RunEnd(-signal.SIGTERM)


def _lost(node: str) -> str:
    return f"node {node} was lost (Ray no longer has it alive)"


def _ended(job: RayJob, *, node_lost: str | None) -> RunEnd:
    """How a Ray job that ended ended: SUCCEEDED is 0, STOPPED a SIGTERM, FAILED its exit
    code (None: it never started), or its node lost when the node is gone."""
    if job.status == "SUCCEEDED":
        return RunEnd(0)
    if job.status == "STOPPED":
        return RunEnd(-signal.SIGTERM)
    if node_lost is not None:
        return RunEnd(None, node_lost=node_lost)
    return RunEnd(job.driver_exit_code)
