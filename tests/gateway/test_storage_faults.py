"""Settings that cannot work stop the server at start, in one line; storage that fails
mid-job is said in the job's log and events.

Real ``alallo serve`` processes: a storage URL that cannot be written, a trainer
user that does not exist, a registered trainer that takes a built-in name, or
a GPU node this machine does not have (NVML finds none here)
make the server refuse to start (exit 1, one line naming the setting, no
traceback) instead of answering 500 later. A shared storage location that
starts failing while a job trains skips the checkpoints it refuses and says so.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import trio

from support import EXAMPLES, FINAL, LiveServer, follow_stream, server_env, upload
from test_jobs_http import wait_for_step


def refused_start(data_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "alallo", "serve", "--port", "0", "--data-dir", str(data_dir)],
        env=server_env(data_dir, **env), capture_output=True, text=True, timeout=60,
        check=False)


@pytest.mark.parametrize(("env", "said"), [
    ({"ALALLO_STORAGE_URL": "file://{tmp}/a-file/bucket"},
     "Error: ALALLO_STORAGE_URL (file://{tmp}/a-file/bucket) cannot be written: "),
    ({"ALALLO_TRAINER_USER": "no-such-user-here"},
     "Error: ALALLO_TRAINER_USER 'no-such-user-here' is not a user on this machine"),
    ({"ALALLO_TRAINERS": json.dumps([{"name": "trl", "command": ["/bin/true"]}])},
     "Error: ALALLO_TRAINERS (trainers.0.name): Value error, 'trl' is a built-in trainer's "
     "name; pick another"),
    ({"ALALLO_NODES": json.dumps([{"name": "gpu-1", "device": "H100-80GB"}])},
     "Error: ALALLO_NODES: node 'gpu-1': declared 1 × H100-80GB, NVML finds none"),
    ({"ALALLO_RAY_ADDRESS": "http://127.0.0.1:9"},
     "Error: ALALLO_RAY_ADDRESS needs ALALLO_SHARED_DIR: a directory every node of the Ray "
     "cluster mounts at the same path"),
    ({"ALALLO_RAY_ADDRESS": "http://127.0.0.1:9", "ALALLO_SHARED_DIR": "{tmp}/shared"},
     "Error: ALALLO_RAY_ADDRESS: the Ray cluster at http://127.0.0.1:9 did not answer "
     "GET /api/version"),
], ids=["storage_url", "trainer_user", "trainers", "nodes", "ray_without_shared_dir",
        "ray_not_answering"])
def test_a_setting_that_cannot_work_refuses_the_start_in_one_line(
        tmp_path: Path, env: dict[str, str], said: str) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    result = refused_start(tmp_path / "data",
                           **{k: v.replace("{tmp}", str(tmp_path)) for k, v in env.items()})
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(said.replace("{tmp}", str(tmp_path))), line
    assert "serving at" not in result.stdout


async def test_storage_failing_mid_job_is_said_in_the_log_and_the_events(
        server_factory: Callable[..., LiveServer], tmp_path: Path) -> None:
    bucket = tmp_path / "bucket"
    server = server_factory(ALALLO_STORAGE_URL=f"file://{bucket}")
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30) as c:
        file = (await upload(c, EXAMPLES / "sample.jsonl")).json()["id"]
        created = await c.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": file,
            "hyperparameters": {"max_steps": 30},
            "trainer": {"type": "simulated", "step_delay_s": 0.1}})
        job_id = created.json()["id"]
        running = await wait_for_step(c, job_id, 12)
        assert running["checkpoint"]["step"] == 10, "the first checkpoint was shared"
        shutil.rmtree(bucket)
        bucket.write_text("the storage is gone")  # every later copy fails
        items: list[tuple[str, int, dict[str, object]]] = []
        with trio.fail_after(120):
            await follow_stream(c, job_id, items)
        final = items[-1][2]
        events = (await c.get(f"/v1/fine_tuning/jobs/{job_id}/events",
                              params={"limit": 1000, "order": "asc"})).json()["data"]
        log = (await c.get(f"/v1/fine_tuning/jobs/{job_id}/log")).json()["data"]
    assert final["status"] in FINAL and final["status"] == "succeeded"
    warnings = [e for e in events if e["alallo_type"] == "WARNING"]
    assert [e["step"] for e in warnings] == [20, 30]
    assert warnings[0]["message"].startswith(
        "Checkpoint at step 20 was not saved: the shared storage refused it (")
    assert warnings[0]["level"] == "warn"
    told = [line["text"] for line in log if "was not saved" in line["text"]]
    assert told == [e["message"] for e in warnings]
    saved = [e["step"] for e in events if e["alallo_type"] == "CHECKPOINT_SAVE"]
    assert saved == [10], "a checkpoint the storage refused is not recorded"
