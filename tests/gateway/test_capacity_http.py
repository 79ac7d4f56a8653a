"""Capacity over HTTP on a simulated GPU fleet: plans, the queue, not-available answers."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import trio
from support import EXAMPLES, LiveServer, read_stream, upload, wait_for_job

pytestmark = pytest.mark.any_backend  # the scheduler is the subject, not the store

Factory = Callable[..., LiveServer]
FLEET = json.dumps([{"name": "gpu-1", "device": "H100-80GB", "count": 2, "simulated": True}])


async def test_a_simulated_fleet_plans_queues_and_refuses(server_factory: Factory) -> None:
    server = server_factory(ALALLO_NODES=FLEET, ALALLO_SIMULATION_TIME_SCALE="5")
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30) as c:
        file = (await upload(c, EXAMPLES / "sample.jsonl")).json()

        async def create(**spec: Any) -> dict[str, Any]:
            response = await c.post("/v1/fine_tuning/jobs", json={
                "training_file": file["id"], "hyperparameters": {"max_steps": 400}, **spec})
            assert response.status_code == 200, response.text
            return dict(response.json())

        capacity = (await c.get("/v1/capacity")).json()
        assert capacity["nodes"][0] | {"busy": {}} == capacity["nodes"][0]
        assert (capacity["nodes"][0]["devices"], capacity["queue_length"]) == (2, 0)

        models = {m["id"]: m for m in (await c.get("/v1/models")).json()["data"]}
        assert models["meta-llama/Llama-3.1-8B"]["runnable_here"]

        # 70B at 16-bit needs 4 H100s, the node has 2; at 4-bit two are enough.
        estimate = (await c.post("/v1/fine_tuning/estimates", json={
            "model": "meta-llama/Llama-3.1-70B", "training_file": file["id"]})).json()
        assert estimate["available"] is False
        assert estimate["reason"] == "Not available right now. Choose a lower precision."
        why = ("At 16-bit the job needs about 182 GB of GPU memory; the most one node here "
               "can give a job is 144 GB (2 × H100-80GB); at 4-bit it fits")
        assert estimate["detail"] == why
        refused = await create(model="meta-llama/Llama-3.1-70B")
        items = await read_stream(c, refused["id"])
        final = items[-1][2]
        assert (final["status"], final["message"]) == (
            "failed", "Not available right now. Choose a lower precision.")
        assert final["error"] == {"code": "not_available", "param": None,
                                  "message": f"Not available right now. Choose a lower "
                                             f"precision. {why}."}
        assert [e[2]["message"] for e in items if e[0] == "event"][-1] == (
            f"Not available right now. Choose a lower precision. ({why})")
        assert final["price"]["charged"] == 0

        # Two 8B jobs take both GPUs; the third waits, first in the queue.
        jobs = [await create(model="meta-llama/Llama-3.1-8B", name=f"j{i}") for i in range(3)]
        third = await wait_for_job(c, jobs[2]["id"],
                                   lambda job: job["message"] == "Waiting for capacity",
                                   timeout=30)
        assert third["queue_position"] == 1
        busy = (await c.get("/v1/capacity")).json()
        assert busy["queue"] == [jobs[2]["id"]] and busy["nodes"][0]["free"] == 0
        held = busy["nodes"][0]["device_indices"]
        assert held == {jobs[0]["id"]: [0], jobs[1]["id"]: [1]}  # each job its own GPU
        estimate = (await c.post("/v1/fine_tuning/estimates", json={
            "model": "meta-llama/Llama-3.1-8B", "training_file": file["id"]})).json()
        assert estimate["note"] == "No capacity is free right now; the job would wait in the queue."
        assert estimate["capacity_free"] is False

        finals = [(await read_stream(c, j["id"]))[-1][2] for j in jobs]
    assert [f["status"] for f in finals] == ["succeeded"] * 3
    assert [f["placement"] for f in finals[:2]] == [
        {"node": "gpu-1", "device_type": "H100-80GB", "devices": 1, "device_indices": [i]}
        for i in (0, 1)]
    assert finals[2]["placement"]["device_indices"] in ([0], [1])
    assert finals[2]["queue_position"] is None


def test_capacity_command_shows_the_nodes(server_factory: Factory) -> None:
    import subprocess
    import sys

    server = server_factory(ALALLO_NODES=FLEET)
    result = subprocess.run([sys.executable, "-m", "alallo", "capacity"], capture_output=True,
                            text=True, timeout=60, env={"ALALLO_URL": server.url,
                                                        "ALALLO_API_KEY": server.api_key,
                                                        "COLUMNS": "160", "PATH": "/usr/bin"})
    assert result.returncode == 0, result.stderr
    assert "gpu-1 (simulated)" in result.stdout and "H100-80GB" in result.stdout
    assert "2/2" in result.stdout and "Queue: 0 waiting" in result.stdout


async def test_a_job_that_needs_more_memory_is_rescheduled_and_continues(
        server_factory: Factory) -> None:
    fleet = json.dumps([
        {"name": "small", "device": "L40S-48GB", "count": 1, "simulated": True},
        {"name": "big", "device": "H100-80GB", "count": 2, "simulated": True}])
    server = server_factory(ALALLO_NODES=fleet)
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30) as c:
        file = (await upload(c, EXAMPLES / "sample.jsonl")).json()
        job = (await c.post("/v1/fine_tuning/jobs", json={
            "model": "meta-llama/Llama-3.1-8B", "training_file": file["id"],
            "hyperparameters": {"max_steps": 30},
            # Planned 22 GB fits an L40S (the cheapest); from step 3 it needs 2.5 × that.
            "trainer": {"type": "simulated", "step_delay_s": 0.05, "memory_surprise": 2.5},
        })).json()
        items = await read_stream(c, job["id"])
        events = (await c.get(f"/v1/fine_tuning/jobs/{job['id']}/events",
                              params={"limit": 1000, "order": "asc", "type": "message"},
                              )).json()["data"]
    statuses = [d["status"] for k, _, d in items if k == "job"]
    folded = [s for i, s in enumerate(statuses) if i == 0 or statuses[i - 1] != s]
    assert folded[-3:] == ["re-scheduling", "running", "succeeded"]
    types = [e["alallo_type"] for e in events]
    assert types.count("JOB_RESCHEDULED") == 1 and types.count("JOB_RESTARTED") == 1
    rescheduled = next(e for e in events if e["alallo_type"] == "JOB_RESCHEDULED")
    assert "a L40S-48GB has 48 GB" in rescheduled["message"]
    final = items[-1][2]
    assert final["placement"]["device_type"] == "H100-80GB"
    assert final["attempt"] == 2 and final["progress"]["step"] == 30
    # The move is our misjudgement: the job costs at most the top of its quote, and the
    # user hears the time it needs on the bigger device.
    assert 0 < final["price"]["charged"] <= final["price"]["estimate"]["high"]
    revised = next(e for e in events if e["alallo_type"] == "ESTIMATE_REVISED")
    assert revised["message"].startswith("Estimate revised for 1 × H100-80GB: ")
    assert revised["data"]["price_cap"] == final["price"]["estimate"]["high"]


async def test_draining_a_node_moves_its_jobs_from_their_checkpoints(
        server_factory: Factory) -> None:
    import subprocess
    import sys

    fleet = json.dumps([
        {"name": "a", "device": "A100-80GB", "count": 1, "simulated": True},
        {"name": "b", "device": "A100-80GB", "count": 1, "simulated": True}])
    server = server_factory(ALALLO_NODES=fleet)
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30) as c:
        file = (await upload(c, EXAMPLES / "sample.jsonl")).json()
        job = (await c.post("/v1/fine_tuning/jobs", json={
            "model": "meta-llama/Llama-3.1-8B", "training_file": file["id"],
            # 10 s of steps: the job still runs when the CLI, started below, drains its node.
            "hyperparameters": {"max_steps": 200},
            "trainer": {"type": "simulated", "step_delay_s": 0.05}})).json()
        now = await wait_for_job(c, job["id"],
                                 lambda j: (j["checkpoint"] or {}).get("step", 0) >= 10,
                                 timeout=30)
        first_node = now["placement"]["node"]
        env = {"ALALLO_URL": server.url, "ALALLO_API_KEY": server.api_key, "PATH": "/usr/bin"}
        drained = await trio.to_thread.run_sync(lambda: subprocess.run(
            [sys.executable, "-m", "alallo", "nodes", "drain", first_node],
            capture_output=True, text=True, timeout=60, env=env))
        assert drained.returncode == 0, drained.stderr
        assert f"Node {first_node} is draining; 1 job(s) moved: {job['id']}" in drained.stdout
        items = await read_stream(c, job["id"])
        events = (await c.get(f"/v1/fine_tuning/jobs/{job['id']}/events",
                              params={"limit": 1000, "order": "asc", "type": "message"},
                              )).json()["data"]
        capacity = (await c.get("/v1/capacity")).json()
        missing = await c.post("/v1/capacity/nodes/nope/drain")
    final = items[-1][2]
    assert final["status"] == "succeeded" and final["placement"]["node"] != first_node
    restarted = [e["message"] for e in events if e["alallo_type"] == "JOB_RESTARTED"]
    assert len(restarted) == 1 and "from the checkpoint at step" in restarted[0]
    assert f"node {first_node} is draining" in restarted[0]
    assert next(n for n in capacity["nodes"] if n["name"] == first_node)["draining"] is True
    assert missing.status_code == 404
