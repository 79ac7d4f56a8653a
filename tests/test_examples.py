"""The example programs under ``examples/``, run as a user runs them.

The embedding ones run alone (no server, a fresh data directory); the
others against the live server, with ``ALALLO_URL`` and ``ALALLO_API_KEY``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import EXAMPLES, LiveServer

from alallo import Client

pytestmark = pytest.mark.any_backend  # the example programs are the subject


def run(script: str, *args: str, server: LiveServer | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALALLO_")}
    if server is not None:
        env |= {"ALALLO_URL": server.url, "ALALLO_API_KEY": server.api_key}
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *args],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def seqs(out: str) -> list[int]:
    return [int(n) for n in re.findall(r"^\[(\d+)\]", out, flags=re.MULTILINE)]


@pytest.mark.parametrize("script", ["embed_trio.py", "embed_asyncio.py"])
def test_embedding_examples_run_a_job_and_print_every_update(script: str,
                                                             tmp_path: Path) -> None:
    out = run(script, "--data-dir", str(tmp_path / "data"), "--steps", "5")
    assert re.search(r"^created ft-[0-9a-f]{24}: queued \(Starting\)$", out, flags=re.M), out
    assert "event JOB_PENDING" in out and "event JOB_COMPLETE" in out
    assert "job succeeded step 5/5" in out.replace("  ", " ")
    assert seqs(out) == sorted(set(seqs(out)))
    assert "finished succeeded: " in out
    assert not re.search(r"\[(info|warning|error) *\]", out), "logs go to stderr"
    if script == "embed_asyncio.py":
        heartbeats = re.search(r"asyncio ran (\d+) heartbeats meanwhile", out)
        assert heartbeats and int(heartbeats.group(1)) > 0


def test_openai_sdk_example(live_server: LiveServer) -> None:
    out = run("openai_sdk.py", server=live_server)
    assert re.search(r"^uploaded sample.jsonl as file-", out, flags=re.M), out
    assert "finished succeeded: " in out
    assert "learning_rate=0.002" in out  # the multiplier 2 times LoRA's default 1e-3
    events = re.findall(r"^event (\w+): (.*)$", out, flags=re.M)  # newest first
    assert events[0][0] == "message" and events[0][1].startswith("Job finished at ")
    assert events[-1] == ("message", "Fine tune request created")
    assert ("metrics", "Step 8/8: training loss=4.13") in events  # the simulator's loss


def simulated_job(server: LiveServer, steps: int) -> str:
    with Client(server.url, api_key=server.api_key) as client:
        file = client.upload_file(EXAMPLES / "sample.jsonl")
        job = client.create_job(model="alallo/tiny-gpt2", training_file=file["id"],
                                hyperparameters={"max_steps": steps},
                                trainer={"type": "simulated", "step_delay_s": 0.02})
    return str(job["id"])


def test_sse_follower_example(live_server: LiveServer) -> None:
    job_id = simulated_job(live_server, 10)
    out = run("follow_sse.py", job_id, server=live_server)
    assert "event JOB_COMPLETE" in out and re.search(r"\] log .*loss", out)
    assert out.rstrip().endswith("done: succeeded")
    assert seqs(out) == sorted(set(seqs(out)))


def test_websocket_follower_example(live_server: LiveServer) -> None:
    jobs = [simulated_job(live_server, 10), simulated_job(live_server, 5)]
    out = run("follow_websocket.py", *jobs, server=live_server)
    for job_id in jobs:
        assert f"done: {job_id} succeeded" in out
    assert out.count("event JOB_COMPLETE") == 2
