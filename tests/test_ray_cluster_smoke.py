"""The test Ray cluster (tests/ray_cluster.py) is what it says, and runs a job on a chosen node
through the Jobs REST API."""

from __future__ import annotations

import time

import httpx
import pytest
from ray_cluster import RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.any_backend, pytest.mark.slow]


def test_the_cluster_is_a_cpu_less_head_and_two_workers(ray_cluster: RayCluster) -> None:
    nodes = {n["node_id"]: n for n in ray_cluster.nodes()}
    head = nodes[ray_cluster.head_node_id]
    assert head["is_head_node"] and head["state"] == "ALIVE"
    assert "CPU" not in head["resources_total"]
    assert len(ray_cluster.alive_workers) == 2
    for worker in ray_cluster.alive_workers:
        node = nodes[worker.node_id]
        assert node["state"] == "ALIVE" and not node["is_head_node"]
        assert node["resources_total"]["CPU"] == 2
        assert node["labels"]["ray.io/node-id"] == worker.node_id
        assert worker.raylet_alive()


def test_a_job_runs_on_the_node_its_label_selector_names(ray_cluster: RayCluster) -> None:
    worker = ray_cluster.alive_workers[-1]
    with httpx.Client(base_url=ray_cluster.address, timeout=30) as client:
        r = client.post("/api/jobs/", json={
            "entrypoint": "python -c \"print('hi')\"",
            "entrypoint_label_selector": {"ray.io/node-id": worker.node_id}})
        r.raise_for_status()
        submission_id = r.json()["submission_id"]
        deadline = time.monotonic() + 60
        while (job := client.get(f"/api/jobs/{submission_id}").json())["status"] not in {
                "SUCCEEDED", "FAILED", "STOPPED"}:
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
        assert job["status"] == "SUCCEEDED", job
        assert job["driver_exit_code"] == 0
        assert job["driver_node_id"] == worker.node_id
        logs = client.get(f"/api/jobs/{submission_id}/logs").json()["logs"]
        assert "hi\n" in logs.splitlines(keepends=True)
