"""``GET /v1/fine_tuning/jobs/{id}/checkpoints`` on a live server, and the clients' iterators.

The simulated trainer saves a checkpoint every 10 steps and at the last step,
and logs ``Step N/M: loss X`` with ``fake_loss(N)`` every 10 steps and at the
last. A job of several attempts is read by the unit tests at the end, over a
runtime stand-in (a restarted tiny job is stopped by its budget: see the report).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from alallo import AsyncClient, Client
from alallo.trainers.simulated import fake_loss
from support import EXAMPLES, LiveServer, read_stream, upload

pytestmark = pytest.mark.any_backend  # the subject does not depend on the store


@pytest.fixture(scope="module")
def restarted_job(live_server: LiveServer) -> dict[str, Any]:
    """A finished job of 35 steps: checkpoints saved at 10, 20, 30 and 35; the newest three
    kept (OpenAI keeps 3)."""
    with Client(live_server.url, api_key=live_server.api_key) as c:
        file_id = c.upload_file(EXAMPLES / "sample.jsonl")["id"]
        job = c.create_job(model="alallo/tiny-gpt2", training_file=file_id,
                           hyperparameters={"max_steps": 35},
                           trainer={"type": "simulated", "step_delay_s": 0})
        final = [item for item in c.watch(job["id"]) if item.kind == "job"][-1].data
    assert final["status"] == "succeeded", final["message"]
    return final


async def test_checkpoints_newest_first_with_models_and_losses(
        client: httpx.AsyncClient, restarted_job: dict[str, Any]) -> None:
    job_id = restarted_job["id"]
    response = await client.get(f"/v1/fine_tuning/jobs/{job_id}/checkpoints")
    assert response.status_code == 200, response.text
    body = response.json()
    data = body["data"]
    assert [c["step_number"] for c in data] == [35, 30, 20], "the kept ones only"
    assert (body["object"], body["has_more"]) == ("list", False)
    assert (body["first_id"], body["last_id"]) == (data[0]["id"], data[-1]["id"])
    for checkpoint in data:
        step = checkpoint["step_number"]
        assert checkpoint["id"] == f"ftckpt-{job_id.removeprefix('ft-')}-{step}"
        assert checkpoint["object"] == "fine_tuning.job.checkpoint"
        assert checkpoint["fine_tuning_job_id"] == job_id
        assert checkpoint["metrics"] == {  # OpenAI's keys; no validation file, none measured
            "step": step, "train_loss": fake_loss(step), "train_mean_token_accuracy": None,
            "valid_loss": None, "valid_mean_token_accuracy": None, "full_valid_loss": None,
            "full_valid_mean_token_accuracy": None}
        # A checkpoint model's id (OpenAI's), no server path.
        model = checkpoint["fine_tuned_model_checkpoint"]
        assert model == f"{restarted_job['fine_tuned_model']}:ckpt-step-{step}"
        assert checkpoint["created_at"] >= restarted_job["created_at"]
    assert len({c["fine_tuned_model_checkpoint"] for c in data}) == 3
    saved = (await client.get(f"/v1/fine_tuning/jobs/{job_id}/events",
                              params={"limit": 1000, "order": "asc"})).json()["data"]
    steps_saved = [e["step"] for e in saved if e["alallo_type"] == "CHECKPOINT_SAVE"]
    assert steps_saved == [10, 20, 30, 35], "10's checkpoint was pruned: 3 are kept"
    again = (await client.get(f"/v1/fine_tuning/jobs/{job_id}/checkpoints")).json()
    assert again["data"] == data, "ids and contents are stable"


async def test_checkpoints_page_with_after_and_limit(
        client: httpx.AsyncClient, restarted_job: dict[str, Any]) -> None:
    url = f"/v1/fine_tuning/jobs/{restarted_job['id']}/checkpoints"
    first = (await client.get(url, params={"limit": 1})).json()
    assert [c["step_number"] for c in first["data"]] == [35] and first["has_more"]
    rest = (await client.get(url, params={"limit": 2, "after": first["last_id"]})).json()
    assert [c["step_number"] for c in rest["data"]] == [30, 20] and not rest["has_more"]
    past = (await client.get(url, params={"after": rest["last_id"]})).json()
    assert past == {"object": "list", "data": [], "has_more": False,
                    "first_id": None, "last_id": None}

    for bad, param in (({"after": "ftckpt-elsewhere-3"}, "after"),
                       ({"after": f"{first['last_id']}x"}, "after"),
                       ({"limit": 0}, "limit"), ({"limit": "many"}, "limit")):
        refused = await client.get(url, params=bad)
        assert refused.status_code == 400, (bad, refused.text)
        assert refused.json()["error"]["param"] == param


async def test_a_job_without_checkpoints_and_an_unknown_job(client: httpx.AsyncClient) -> None:
    file_id = (await upload(client, EXAMPLES / "sample.jsonl")).json()["id"]
    created = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file_id,
        "trainer": {"command": ["/no/such/trainer"]}})
    job_id = created.json()["id"]
    assert (await read_stream(client, job_id))[-1][2]["status"] == "failed"
    empty = await client.get(f"/v1/fine_tuning/jobs/{job_id}/checkpoints")
    assert empty.json() == {"object": "list", "data": [], "has_more": False,
                            "first_id": None, "last_id": None}

    unknown = await client.get(f"/v1/fine_tuning/jobs/ft-{'0' * 24}/checkpoints")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "not_found"


def test_the_client_iterates_checkpoints_page_after_page(
        live_server: LiveServer, restarted_job: dict[str, Any]) -> None:
    with Client(live_server.url, api_key=live_server.api_key) as c:
        steps = [ckpt["step_number"] for ckpt in c.iter_checkpoints(restarted_job["id"], page_size=1)]
        assert steps == [35, 30, 20]
        assert c.list_checkpoints(restarted_job["id"], limit=1)["has_more"] is True


async def test_the_async_client_iterates_checkpoints(
        live_server: LiveServer, restarted_job: dict[str, Any]) -> None:
    async with AsyncClient(live_server.url, api_key=live_server.api_key) as c:
        page = await c.list_checkpoints(restarted_job["id"], limit=1)
        rest = await c.list_checkpoints(restarted_job["id"], after=page["last_id"])
        every = [ckpt async for ckpt in c.iter_checkpoints(restarted_job["id"])]
    assert [x["step_number"] for x in page["data"] + rest["data"]] == [35, 30, 20]
    assert every == page["data"] + rest["data"]


# -- unit: several attempts, over a stand-in for the runtime's three reads -----------

class _Runtime:
    """``get_job``, ``list_events`` and ``read_log`` of a job restarted once."""

    def __init__(self, jobs_dir: Path) -> None:
        from alallo import Event, EventType, LogLine

        job_id = "ft-" + "a" * 24
        self.kept = {10: jobs_dir / job_id / "attempt-1" / "checkpoints" / "checkpoint-10",
                     20: jobs_dir / job_id / "attempt-2" / "checkpoints" / "checkpoint-20",
                     31: jobs_dir / job_id / "attempt-2" / "checkpoints" / "checkpoint-31"}
        for path in self.kept.values():
            path.mkdir(parents=True)
        self.job = SimpleNamespace(
            id=job_id, attempt=2, progress=SimpleNamespace(step=31, loss=0.5),
            account_id="acct", base_model="alallo/tiny-gpt2", spec=SimpleNamespace(suffix=None),
            checkpoint=SimpleNamespace(step=31, path=str(self.kept[31])))
        saved = EventType.CHECKPOINT_SAVE
        self.events = [Event(seq=seq, created_at=100 + seq, type=t, message="", step=step)
                       for seq, t, step in ((1, EventType.JOB_START, None), (2, saved, 5),
                                            (3, saved, 10),
                                            (7, saved, 20), (9, EventType.JOB_RESTARTED, None),
                                            (12, saved, 20), (14, saved, 31))]
        self.logs = {
            1: [LogLine(n=2, at=0, text="Step 10/31: loss 2.5", attempt=1),
                LogLine(n=5, at=0, text="Step 15/31: loss nan-ish", attempt=1),
                LogLine(n=6, at=0, text="Step 20/31: loss 2.0", attempt=1)],
            2: [LogLine(n=11, at=0, text="Step 20/31: loss 1.9", attempt=2),
                LogLine(n=13, at=0, text="Step 30/31: loss 1.5", attempt=2)],
        }

    async def get_job(self, account_id: str, job_id: str) -> Any:
        return self.job

    async def list_events(self, account_id: str, job_id: str, *, after: int,
                          limit: int) -> tuple[list[Any], bool]:
        rest = [e for e in self.events if e.seq > after]
        return rest[:limit], len(rest) > limit

    async def read_log(self, account_id: str, job_id: str, *, after: int, limit: int,
                       attempt: int) -> tuple[list[Any], bool]:
        rest = [line for line in self.logs[attempt] if line.n > after]
        return rest[:limit], len(rest) > limit

    async def list_metrics(self, account_id: str, job_id: str, *,
                           after: int = 0) -> list[dict[str, Any]]:
        return []  # a trainer that reports no metrics lines: the log says the losses


async def test_a_restarted_job_lists_each_kept_step_once_with_the_loss_known_then(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from alallo.runtime import _checkpoint_list

    monkeypatch.setattr(_checkpoint_list, "_PAGE", 2)  # several reads of events and logs
    runtime = _Runtime(tmp_path / "jobs")  # step 5's checkpoint was pruned: not listed
    found, more = await _checkpoint_list.list_checkpoints(
        runtime, "acct", runtime.job.id, limit=10)  # type: ignore[arg-type]
    assert not more
    assert [(c.step, c.created_at, c.train_loss) for c in found] == [
        (31, 114, 1.5),  # no loss line at 31: the one at 30 is what was known
        (20, 112, 1.9),  # saved again by the second run: its time and its loss
        (10, 103, 2.5),  # from the first run's log
    ]
    assert [c.path for c in found] == [str(runtime.kept[s]) for s in (31, 20, 10)]
    assert found[0].model == f"ft:alallo--tiny-gpt2:acct::{'a' * 24}:ckpt-step-31"
    page, more = await _checkpoint_list.list_checkpoints(
        runtime, "acct", runtime.job.id, after=found[0].id, limit=1)  # type: ignore[arg-type]
    assert [c.step for c in page] == [20] and more
