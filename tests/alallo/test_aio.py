"""alallo embedded in asyncio apps (``alallo.aio``, issue 19): a job created and followed
under ``asyncio.run``, and from the routes of a FastAPI app served by uvicorn. Each app is a
process of its own, as a user's is: what it prints, and where the runtime's logs go, is
the app's."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from support import EXAMPLES, wait_until_sync

pytestmark = pytest.mark.any_backend  # the embedding, not the store

ASYNCIO_APP = '''
import asyncio, logging, sys
from pathlib import Path
import alallo, alallo.aio

logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="LOG %(name)s %(message)s")

async def main(data_dir: str) -> None:
    async with alallo.aio.open_runtime(alallo.Settings(data_dir=data_dir)) as rt:
        account = await rt.authenticate(rt.api_key)
        sample = Path(SAMPLE)
        file = await rt.upload_file(account, sample.name, sample.read_bytes())
        job = await rt.create_job(account, {
            "model": "alallo/tiny-gpt2", "training_file": file.id,
            "hyperparameters": {"max_steps": 12},
            "trainer": {"type": "simulated", "step_delay_s": 0.01}})
        ticks = 0

        async def heartbeat() -> None:  # the app's own work goes on meanwhile
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1

        beating = asyncio.create_task(heartbeat())
        kinds, steps = [], []
        async for item in rt.stream(account, job.id):
            kinds.append(item.kind)
            if item.kind == "job":
                steps.append(item.data["progress"]["step"])
        beating.cancel()
        final = await rt.get_job(account, job.id)
        models = await rt.list_models()  # a plain method of the runtime: awaited too
        try:
            await rt.get_job(account, "ft-" + "0" * 24)
        except alallo.NotFound as exc:
            missing = exc.message
        async for item in rt.stream(account, job.id):  # leaving a stream early is fine
            break
        slow = asyncio.create_task(rt.wait_for_final(account, job.id))
        await asyncio.sleep(0)
        slow.cancel()
        print("RESULT", json.dumps({
            "status": final.status.value, "ticks": ticks, "kinds": sorted(set(kinds)),
            "steps": steps, "models": len(models), "missing": missing}), file=sys.stderr)

import json
asyncio.run(main(sys.argv[1]))
'''

FASTAPI_APP = '''
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import StreamingResponse

import alallo, alallo.aio

@asynccontextmanager
async def lifespan(app: FastAPI):
    async with alallo.aio.open_runtime(alallo.Settings(data_dir=DATA_DIR)) as rt:
        app.state.rt = rt
        app.state.account = await rt.authenticate(rt.api_key)
        yield

app = FastAPI(lifespan=lifespan)

@app.post("/train")
async def train(steps: int = 10) -> dict:
    rt, account = app.state.rt, app.state.account
    sample = Path(SAMPLE)
    file = await rt.upload_file(account, sample.name, sample.read_bytes())
    job = await rt.create_job(account, {
        "model": "alallo/tiny-gpt2", "training_file": file.id,
        "hyperparameters": {"max_steps": steps},
        "trainer": {"type": "simulated", "step_delay_s": 0.02}})
    return {"id": job.id, "status": job.status.value}

@app.get("/progress/{job_id}")
async def progress(job_id: str) -> StreamingResponse:
    rt, account = app.state.rt, app.state.account

    async def lines():
        async for item in rt.stream(account, job_id):
            if item.kind == "job":
                p = item.data["progress"]
                yield f"{item.data['status']} {p['step']}/{p['max_steps']}\\n"
    return StreamingResponse(lines(), media_type="text/plain")
'''


def _app(tmp_path: Path, source: str, name: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(f"SAMPLE = {str(EXAMPLES / 'sample.jsonl')!r}\n"
                    f"DATA_DIR = {str(tmp_path / 'data')!r}\n" + textwrap.dedent(source))
    return path


def test_an_asyncio_app_runs_a_job_and_the_runtime_prints_nothing_to_its_stdout(
        tmp_path: Path) -> None:
    app = _app(tmp_path, ASYNCIO_APP, "asyncio_app")
    done = subprocess.run([sys.executable, str(app), str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # the runtime's records went to the app's logging handler
    result = json.loads(done.stderr.split("RESULT ", 1)[1].splitlines()[0])
    assert result["status"] == "succeeded" and result["ticks"] > 0
    assert result["kinds"] == ["event", "job", "log", "metrics"]
    assert result["steps"] == sorted(result["steps"]) and result["steps"][-1] == 12
    assert result["models"] > 0 and result["missing"].startswith("no job ")
    logged = [line for line in done.stderr.splitlines() if line.startswith("LOG alallo.")]
    assert any("event='job.event'" in line for line in logged), done.stderr[-2000:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_fastapi_app_served_by_uvicorn_creates_a_job_in_a_route_and_streams_it(
        tmp_path: Path) -> None:
    _app(tmp_path, FASTAPI_APP, "fastapi_app")
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "fastapi_app:app", "--app-dir", str(tmp_path),
         "--port", str(port), "--log-level", "info", "--no-access-log"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return httpx.get(f"{url}/docs", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        wait_until_sync(up, timeout=60)
        created = httpx.post(f"{url}/train", params={"steps": 8}, timeout=30).json()
        assert created["status"] == "queued"
        with httpx.stream("GET", f"{url}/progress/{created['id']}", timeout=60) as response:
            lines = [line for line in response.iter_lines() if line]
        assert lines[-1] == "succeeded 8/8"
        steps = [int(line.split()[1].split("/")[0]) for line in lines]
        assert steps == sorted(steps)
    finally:
        server.terminate()
        out, err = server.communicate(timeout=30)
    # uvicorn shuts down on SIGTERM, then raises it again (exit -15): the lifespan's end,
    # which closed the runtime, is what says the shutdown was clean.
    assert server.returncode in (0, -15), err[-2000:]
    assert "Application shutdown complete." in err and "Traceback" not in err, err[-2000:]
    assert out == ""  # no log record of the runtime's on the app's stdout
