"""`RayServices`: each service (a vLLM engine) runs as a Ray job on the node the scheduler
placed it on, listening on that node's address (issue 33: serving spreads over a cluster as
training does).

The job's entrypoint is ``python -m alallo.executors._service_launcher service.json`` (the
server's interpreter, as for trainers: nodes run the same environment), which picks a port
free on the node, starts the service there and writes ``HOST:PORT`` to the service's folder
on the shared storage; :meth:`RayServices.start` waits for that file. The job holds the
node's CPUs (``devices`` of them on a CPU node) or GPUs (Ray sets ``CUDA_VISIBLE_DEVICES``)
while it runs. A service's API key travels in ``service.json``, which only the server's user
reads (0600); the service refuses every ``/v1`` call without it, so nothing else on the
network reaches it.

Services do not die with the server on other nodes: each job carries the metadata
``alallo_service`` (the folder the services live in), and :meth:`RayServices.reap_stale`
stops the ones of that folder a server before this one left running.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import uuid
from pathlib import Path

import structlog
import trio

from ._ray import RAY_ASSIGNS
from ._ray_api import RayApi, RayApiError, RayJob
from ._service_launcher import ADDRESS, EXIT_STATUS
from ._services import ServiceLaunch

__all__ = ["RayService", "RayServices"]

log = structlog.get_logger("alallo.ray")

_LOOK_S = 0.1
"""Seconds between two reads of a service's files on the shared storage."""
_POLL_S = 1.0
"""Seconds between two looks at its Ray job and its node."""
_STARTS_IN_S = 120.0
"""Seconds a service's Ray job may take to start its service (pending included)."""


class RayServices:
    """Services as Ray jobs on the cluster's nodes.

    Args:
        api: the cluster's REST API.
        python: the interpreter on the nodes that has alallo installed.
        home: the folder the services' folders are in, on the shared storage.
        grace_s: seconds between SIGTERM and SIGKILL when a service is stopped.
    """

    def __init__(self, api: RayApi, *, python: str, home: Path, grace_s: float) -> None:
        self.api = api
        self.python = python
        self.home = home
        self.grace_s = grace_s

    async def start(self, launch: ServiceLaunch) -> RayService:
        """Submit ``launch`` as a Ray job on its node; the service once its launcher has
        picked its address there.

        Raises:
            OSError: the node is unknown or dead, the cluster refused the job, or the job
                ended (or stayed pending) before its service started (Ray's words).
        """
        host = next((n.address for n in await self.api.nodes()
                     if n.node_id == launch.node and n.alive), None)
        if host is None:
            raise OSError(f"Ray node {launch.node} is not alive")
        launch.cwd.mkdir(parents=True, exist_ok=True)
        for stale in (ADDRESS, EXIT_STATUS):  # a folder reused by a later engine
            (launch.cwd / stale).unlink(missing_ok=True)
        service_file = launch.cwd / "service.json"
        env = {k: v for k, v in {**launch.env, **launch.secrets}.items() if k not in RAY_ASSIGNS}
        descriptor = os.open(service_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as out:  # the API key: its owner only
            json.dump({"command": launch.command, "env": env, "host": host,
                       "grace_s": self.grace_s}, out)
        job_id = f"alallo-{launch.name}-{uuid.uuid4().hex[:8]}"
        cpu = launch.device_type == "cpu"
        await self.api.submit(
            job_id, f"exec {shlex.quote(self.python)} -m alallo.executors._service_launcher "
                    f"{shlex.quote(str(service_file))}",
            node_id=launch.node, num_cpus=launch.devices if cpu else 1,
            num_gpus=0 if cpu else launch.devices, stop_wait_s=self.grace_s + 2,
            metadata={"alallo_service": str(self.home)})
        log.info("ray.service_submitted", service=launch.name, job=job_id, node=launch.node)
        service = RayService(self.api, job_id, launch.cwd, self.grace_s)
        try:
            await service.started()
        except BaseException:
            with trio.CancelScope(shield=True):
                service.kill()
                await service.wait()
            raise
        return service

    async def reap_stale(self) -> None:
        """Stop the Ray jobs of services in :attr:`home` that are still running (their
        server was killed before it let them go).

        Raises:
            RayApiError: the cluster did not answer.
        """
        for job_id, job, metadata in await self.api.jobs():
            if metadata.get("alallo_service") == str(self.home) and not job.ended:
                await self.api.stop(job_id)
                log.info("ray.service_reaped", job=job_id)

    def close(self) -> None:
        """Nothing to forget: each service's folder stays, with its log."""


class RayService:
    """One service running as a Ray job (:class:`~alallo.executors._services.Service`)."""

    pid = None
    """It runs on a node, not as a process of this machine's the server could signal."""
    uds = None

    def __init__(self, api: RayApi, job_id: str, cwd: Path, grace_s: float) -> None:
        self._api = api
        self.job_id = job_id
        self._cwd = cwd
        self._grace_s = grace_s
        self.host = ""
        self.port = 0
        self._code: int | None = None
        self._ended = False
        self._stop_asked = trio.Event()

    async def started(self) -> None:
        """Wait for the launcher's address file.

        Raises:
            OSError: the job ended first, or did not start in :data:`_STARTS_IN_S`.
        """
        address = self._cwd / ADDRESS
        with trio.move_on_after(_STARTS_IN_S):
            next_look = trio.current_time()
            while not address.exists():
                if trio.current_time() >= next_look:
                    next_look += _POLL_S
                    job = await self._api.job(self.job_id)
                    if job.ended:
                        raise OSError(f"its Ray job {self.job_id} ended before it started: "
                                      f"{job.status} {job.message}")
                await trio.sleep(_LOOK_S)
            host, _, port = address.read_text().rpartition(":")
            self.host, self.port = host, int(port)
            return
        raise OSError(f"its Ray job {self.job_id} did not start it in {_STARTS_IN_S:.0f} s")

    def poll(self) -> int | None:
        if self._ended:
            return self._code
        status = self._cwd / EXIT_STATUS
        return int(status.read_text()) if status.exists() else None

    async def wait(self) -> int | None:
        """Until the service ends (its exit status), its job ends without one (Ray's exit
        code), or its node is lost (None); a :meth:`kill` meanwhile stops the job."""
        next_look = trio.current_time() + _POLL_S
        while (code := self.poll()) is None and not self._ended:
            if self._stop_asked.is_set():
                await self._stop()
                break
            with trio.move_on_after(_LOOK_S):
                await self._stop_asked.wait()
            if trio.current_time() < next_look:
                continue
            next_look = trio.current_time() + _POLL_S
            try:
                job = await self._api.job(self.job_id)
            except RayApiError:
                continue
            if job.ended:
                self._end(job)
        self._ended = True
        self._code = self._code if code is None else code
        return self._code

    def _end(self, job: RayJob) -> None:
        """It ended as its launcher says (its exit status), else as Ray does (STOPPED: a
        SIGTERM; FAILED: the launcher's exit code)."""
        status = self._cwd / EXIT_STATUS
        self._code = (int(status.read_text()) if status.exists() else
                      -signal.SIGTERM if job.status == "STOPPED" else
                      0 if job.status == "SUCCEEDED" else job.driver_exit_code)
        self._ended = True

    def kill(self) -> None:
        """Ask for the job to stop (:meth:`wait`, running or next, stops it)."""
        self._stop_asked.set()

    async def _stop(self) -> None:
        try:
            await self._api.stop(self.job_id)
            with trio.move_on_after(self._grace_s + 15):
                while not (job := await self._api.job(self.job_id)).ended:
                    await trio.sleep(0.2)
                self._end(job)
        except RayApiError as exc:
            log.warning("ray.service_stop_failed", job=self.job_id, error=str(exc))
        self._ended = True
