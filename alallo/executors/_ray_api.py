"""A Ray cluster's REST API, from Trio: its nodes, and jobs submitted, followed and stopped.

Ray's Python SDK (``ray.init``, ``JobSubmissionClient``) is synchronous or asyncio-based; the
runtime never starts an asyncio loop in its thread, so it talks to the cluster over HTTP with
httpx (which runs on Trio). The address is the one ``ray job submit --address`` takes: the
head's dashboard, ``http://HOST:8265``. Endpoints (docs.ray.io, "Ray Jobs REST API"; the state
API), with what Ray 2.60 answers (measured: ``tests/ray_cluster.py``):

- ``GET /api/v0/nodes``: every node, alive or dead (a dead one stays listed), with its
  resources and labels, under ``data.result.result``;
- ``POST /api/jobs/``, ``GET /api/jobs/`` (every job), ``GET /api/jobs/{id}`` (times in ms; ``driver_exit_code``),
  ``POST /api/jobs/{id}/stop``, ``GET /api/jobs/{id}/logs``.

Ray's log tail (``WS /api/jobs/{id}/logs/tail``) brings a line ~2 s after it was printed and
closes 3-5 s after the job ends; the executor follows the output on the shared storage
instead (:mod:`alallo.executors._ray`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["FINAL_STATUSES", "RayApi", "RayApiError", "RayJob", "RayNode"]

FINAL_STATUSES = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
"""A Ray job's statuses once it has ended (the others: PENDING, RUNNING)."""


class RayApiError(OSError):
    """The cluster refused a call or did not answer (an :class:`OSError`: the run could not
    start or be followed, the platform's fault, never the user's)."""


@dataclass(frozen=True)
class RayNode:
    """One node of the cluster, as ``GET /api/v0/nodes`` lists it."""

    node_id: str
    """Ray's node id (56 hex digits)."""
    alive: bool
    head: bool
    resources: Mapping[str, float] = field(default_factory=dict)
    """Its total resources: ``CPU``, ``GPU``, ``memory``, ``accelerator_type:H100``, custom."""
    labels: Mapping[str, str] = field(default_factory=dict)
    address: str = ""

    @property
    def accelerator(self) -> str | None:
        """The GPU type Ray detected (``H100`` of the resource ``accelerator_type:H100``)."""
        for name in self.resources:
            if name.startswith("accelerator_type:"):
                return name.split(":", 1)[1]
        return self.labels.get("ray.io/accelerator-type")


@dataclass(frozen=True)
class RayJob:
    """A submitted job's state, as ``GET /api/jobs/{id}`` gives it."""

    status: str
    message: str
    driver_node_id: str | None
    driver_exit_code: int | None

    @property
    def ended(self) -> bool:
        """Whether the job has ended (:data:`FINAL_STATUSES`)."""
        return self.status in FINAL_STATUSES


class RayApi:
    """The REST API of one Ray cluster.

    Args:
        address: the dashboard's http address, e.g. ``http://10.0.0.1:8265``.
        timeout_s: seconds one call may take before it counts as not answered.
    """

    def __init__(self, address: str, *, timeout_s: float = 10.0) -> None:
        self.address = address.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.address, timeout=timeout_s)

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise RayApiError(f"the Ray cluster at {self.address} did not answer "
                              f"{method} {path}: {exc or type(exc).__name__}") from None
        if response.is_error:
            raise RayApiError(f"the Ray cluster at {self.address} refused {method} {path}: "
                              f"HTTP {response.status_code} {response.text[:300]}")
        return response.json()

    async def version(self) -> str:
        """The cluster's Ray version (``GET /api/version``).

        Raises:
            RayApiError: no Ray dashboard answers at the address.
        """
        return str((await self._call("GET", "/api/version")).get("ray_version", "?"))

    async def nodes(self) -> list[RayNode]:
        """Every node the cluster knows, alive or dead.

        Raises:
            RayApiError: the cluster did not answer.
        """
        body = await self._call("GET", "/api/v0/nodes", params={"limit": 10_000, "detail": 1})
        rows = body["data"]["result"]["result"]
        return [RayNode(node_id=row["node_id"], alive=row["state"] == "ALIVE",
                        head=bool(row.get("is_head_node")),
                        resources=row.get("resources_total") or {},
                        labels=row.get("labels") or {}, address=row.get("node_ip", ""))
                for row in rows]

    async def submit(self, submission_id: str, entrypoint: str, *, node_id: str,
                     num_cpus: float, num_gpus: float, stop_wait_s: float = 3.0,
                     metadata: Mapping[str, str] | None = None) -> None:
        """Submit a job whose entrypoint runs on the node ``node_id`` (its label
        ``ray.io/node-id``; a dead or unknown node fails the job within seconds), holding
        ``num_cpus`` and ``num_gpus`` there until it ends. A stop sends SIGTERM to the
        entrypoint and each of its descendants, then SIGKILL after ``stop_wait_s``
        (``RAY_JOB_STOP_WAIT_TIME_S``, set for this job).

        Raises:
            RayApiError: the cluster refused it (an unknown field: 400; the submission id
                taken: 500).
        """
        await self._call("POST", "/api/jobs/", json={
            "entrypoint": entrypoint, "submission_id": submission_id,
            "entrypoint_num_cpus": num_cpus, "entrypoint_num_gpus": num_gpus,
            "entrypoint_label_selector": {"ray.io/node-id": node_id},
            "runtime_env": {"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": str(math.ceil(stop_wait_s))}},
            "metadata": dict(metadata or {})})

    async def job(self, submission_id: str) -> RayJob:
        """The job's state now.

        Raises:
            RayApiError: the cluster did not answer, or knows no such job.
        """
        return _job(await self._call("GET", f"/api/jobs/{submission_id}"))

    async def jobs(self) -> list[tuple[str, RayJob, dict[str, str]]]:
        """Every job the cluster remembers: its submission id, state and metadata
        (``GET /api/jobs/``).

        Raises:
            RayApiError: the cluster did not answer.
        """
        return [(str(row.get("submission_id") or ""), _job(row), dict(row.get("metadata") or {}))
                for row in await self._call("GET", "/api/jobs/")]

    async def stop(self, submission_id: str) -> None:
        """Ask the cluster to stop the job (its entrypoint gets SIGTERM, then SIGKILL).

        Raises:
            RayApiError: the cluster did not answer.
        """
        await self._call("POST", f"/api/jobs/{submission_id}/stop")

    async def logs(self, submission_id: str) -> str:
        """The job's whole output so far, as Ray logged it (``GET /api/jobs/{id}/logs``).

        Raises:
            RayApiError: the cluster did not answer, or knows no such job.
        """
        return str((await self._call("GET", f"/api/jobs/{submission_id}/logs")).get("logs", ""))


def _job(body: Mapping[str, Any]) -> RayJob:
    code = body.get("driver_exit_code")
    return RayJob(status=body["status"], message=body.get("message") or "",
                  driver_node_id=body.get("driver_node_id"),
                  driver_exit_code=int(code) if code is not None else None)
