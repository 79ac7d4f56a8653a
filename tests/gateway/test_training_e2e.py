"""The main job end to end over HTTP: upload, create, follow SSE to ``succeeded``.

Real TRL training of the tiny model, in a real server process.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from support import EXAMPLES, LiveServer, read_stream, statuses, upload

pytestmark = [pytest.mark.slow, pytest.mark.any_backend]  # training is the subject, not the store


async def test_sample_job_trains_to_succeeded_live(client: httpx.AsyncClient,
                                                   live_server: LiveServer) -> None:
    file = (await upload(client, EXAMPLES / "sample.jsonl")).json()
    assert file["format"] == "text" and file["line_count"] == 48

    created = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file["id"],
        "hyperparameters": {"max_steps": 30, "batch_size": 4}, "seed": 1,
    })
    assert created.status_code == 200, created.text
    job = created.json()
    assert (job["status"], job["message"]) == ("queued", "Starting")
    assert job["progress"] == {"step": 0, "max_steps": 30, "percent": 0.0,
                               "epoch": None, "loss": None}

    items = await read_stream(client, job["id"])

    ids = [seq for _, seq, _ in items]
    assert ids == sorted(set(ids)), "SSE ids must be strictly increasing"
    # The stream starts from the job's current state; the rest follows in order.
    seen = statuses(items)
    assert seen[-2:] == ["running", "succeeded"] and seen in (["queued", "running", "succeeded"],
                                                              ["running", "succeeded"])
    final = items[-1][2]
    assert items[-1][0] == "job" and final["status"] == "succeeded"
    assert final["progress"]["step"] == 30 and final["progress"]["percent"] == 100.0

    log = [data["text"] for kind, _, data in items if kind == "log"]
    loss_steps = [int(m.group(1)) for line in log if (m := re.search(r"Step (\d+)/30: loss", line))]
    assert loss_steps == [10, 20, 30]

    types = [data["alallo_type"] for kind, _, data in items if kind == "event"]
    expected = ["JOB_PENDING", "JOB_START", "MODEL_DOWNLOAD_COMPLETE",
                "TRAINING_DATA_DOWNLOAD_COMPLETE", "TRAINING_START", "CHECKPOINT_SAVE",
                "TRAINING_COMPLETE", "JOB_COMPLETE"]
    assert [t for t in types if t in expected and t != "CHECKPOINT_SAVE"] == [
        t for t in expected if t != "CHECKPOINT_SAVE"]
    assert types.count("CHECKPOINT_SAVE") == 3

    # The events endpoint agrees with the stream (its message events, oldest first), with
    # hashes where due.
    events = (await client.get(f"/v1/fine_tuning/jobs/{job['id']}/events",
                               params={"order": "asc", "type": "message", "limit": 1000})).json()
    assert [e["alallo_type"] for e in events["data"]] == types
    assert all(e["hash"] for e in events["data"] if e["alallo_type"] == "CHECKPOINT_SAVE")

    # The checkpoint and the fine-tuned model are on disk.
    model_dir = Path(final["fine_tuned_model_path"])
    assert final["fine_tuned_model"].startswith("ft:alallo--tiny-gpt2:")
    assert final["fine_tuned_model"].endswith(":" + final["id"].removeprefix("ft-"))
    assert model_dir.is_dir() and (model_dir / "adapter_config.json").is_file()
    assert final["checkpoint"]["step"] == 30
    checkpoints = live_server.data_dir / "jobs" / job["id"] / "attempt-1" / "checkpoints"
    assert (checkpoints / "checkpoint-30").is_dir()

    # The log endpoint serves the same lines.
    served = (await client.get(f"/v1/fine_tuning/jobs/{job['id']}/log")).json()
    assert [line["text"] for line in served["data"]] == log


async def test_cancel_a_real_training_run_leaves_no_process(client: httpx.AsyncClient) -> None:
    from test_jobs_http import trainer_pids, wait_for_step

    file = (await upload(client, EXAMPLES / "sample.jsonl")).json()
    job = (await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file["id"], "adapter": "full",
        "hyperparameters": {"max_steps": 5000}})).json()
    await wait_for_step(client, job["id"], 2)
    assert trainer_pids(job["id"])

    cancelled = await client.post(f"/v1/fine_tuning/jobs/{job['id']}/cancel")
    assert cancelled.json()["status"] in {"cancelling", "cancelled"}
    items = await read_stream(client, job["id"])
    final = items[-1][2]
    assert final["status"] == "cancelled" and final["progress"]["step"] < 5000
    assert trainer_pids(job["id"]) == []


def test_demo_trains_the_sample_job_and_exits(tmp_path: Path) -> None:
    """``make run`` is ``alallo demo``; ``--exit`` returns once the job has ended."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "alallo", "demo", "--exit", "--port", "0",
         "--data-dir", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Uploaded sample.jsonl: 48 examples (text)" in out
    assert "queued (Starting)" in out
    assert re.search(r"Step 10/36: loss \d", out) and "Step 30/36: loss" in out
    assert "succeeded" in out
    assert re.search(r"Fine-tuned model: ft:alallo--tiny-gpt2:\S+:[0-9a-f]{24}\n", out), out
    model = re.search(r"Its files on the server: (\S+)", out)
    assert model is not None and (Path(model.group(1)) / "adapter_config.json").is_file()
