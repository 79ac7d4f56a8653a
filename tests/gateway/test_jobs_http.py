"""Job lifecycle over HTTP with the simulated trainer: resume, cancel, bad input."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from support import LiveServer, create_simulated, read_stream, statuses, upload, wait_for_job


async def wait_for_step(client: httpx.AsyncClient, job_id: str, step: int) -> dict[str, Any]:
    """The job as its stream shows it once it runs at ``step`` or later."""
    return await wait_for_job(
        client, job_id, lambda job: job["status"] == "running" and job["progress"]["step"] >= step)


async def test_last_event_id_resumes_with_no_gap_and_no_repeat(
        client: httpx.AsyncClient, file_id: str) -> None:
    job = await create_simulated(client, file_id, steps=40, step_delay_s=0.05)

    first = await read_stream(client, job["id"], stop_after=12)
    assert statuses(first)[-1] in {"queued", "running"}, "the first read must end mid-run"
    rest = await read_stream(client, job["id"], last_event_id=first[-1][1])
    whole = await read_stream(client, job["id"])

    seen = first + rest
    ids = [seq for _, seq, _ in seen]
    assert ids == sorted(set(ids)), "no repeat, in order"
    assert rest[-1][2]["status"] == "succeeded"

    def records(items: list[tuple[str, int, dict[str, Any]]]) -> list[tuple[str, int]]:
        return [(kind, seq) for kind, seq, _ in items if kind in {"event", "log"}]

    assert records(seen) == records(whole), "events and log lines: no gap"


async def test_stream_resumes_from_query_parameter_and_ends_after_final(
        client: httpx.AsyncClient, file_id: str) -> None:
    job = await create_simulated(client, file_id, steps=5, step_delay_s=0.0)
    whole = await read_stream(client, job["id"])
    middle = whole[len(whole) // 2][1]
    response = await client.get(f"/v1/fine_tuning/jobs/{job['id']}/stream",
                                params={"lastEventID": middle})
    assert response.status_code == 200
    assert response.headers["last-event-id"] == str(middle)
    ids = [int(line[4:]) for line in response.text.splitlines() if line.startswith("id: ")]
    assert ids and min(ids) > middle and ids[-1] == whole[-1][1]


def trainer_pids(job_id: str) -> list[int]:
    """Processes whose command line names the job (its trainer config lives under its id)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if job_id.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


async def test_cancel_running_job_stops_the_trainer(client: httpx.AsyncClient,
                                                    file_id: str) -> None:
    job = await create_simulated(client, file_id, steps=10_000, step_delay_s=0.05)
    await wait_for_step(client, job["id"], 3)
    assert trainer_pids(job["id"]), "the trainer runs as a process"

    response = await client.post(f"/v1/fine_tuning/jobs/{job['id']}/cancel")
    assert response.status_code == 200
    assert response.json()["status"] in {"cancelling", "cancelled"}

    items = await read_stream(client, job["id"])
    assert items[-1][2]["status"] == "cancelled"
    types = [data["alallo_type"] for kind, _, data in items if kind == "event"]
    after = types[types.index("CANCEL_REQUESTED") + 1:]
    # The trainer may save a checkpoint while it is being stopped; nothing else comes.
    assert after[-1] == "JOB_STOPPED" and set(after[:-1]) <= {"CHECKPOINT_SAVE"}, types
    assert trainer_pids(job["id"]) == []

    again = await client.post(f"/v1/fine_tuning/jobs/{job['id']}/cancel")
    assert again.status_code == 409
    assert again.json()["error"]["message"] == f"cannot cancel {job['id']}: the job has already finished (cancelled)"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b'{"text": "ok"}\n[1, 2]\n', "line 2: expected a JSON object"),
        (b'{"text": "ok"}\n{"text": "fine"}\n{"txt": "no"}\n', 'line 3: missing column "text"'),
        (b'{"text": "ok"}\n{not json\n', "line 2: not valid JSON"),
        (b"\n\n", "no examples"),
        (b'{"messages": [{"role": "user"}]}\n', "line 1: messages[0].content"),
    ],
)
async def test_bad_training_file_is_refused_and_not_stored(
        client: httpx.AsyncClient, content: bytes, needle: str) -> None:
    before = (await client.get("/v1/files")).json()["data"]
    response = await upload(client, content=content)
    assert response.status_code == 400
    error = response.json()["error"]
    assert needle in error["message"] and error["param"] == "file"
    assert (await client.get("/v1/files")).json()["data"] == before


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "no/such-model"}, 400, "model"),
        ({"hyperparameters": {"n_epochs": -1}}, 400, "hyperparameters.n_epochs"),
        ({"hyperparameters": {"max_steps": 10**9}}, 400, "hyperparameters.max_steps"),
        ({"hyperparameters": {"learning_rate": 5}}, 400, "hyperparameters.learning_rate"),
        ({"training_file": "file-nope"}, 400, "training_file"),
        ({"adapter": "qlora"}, 400, "adapter"),
        ({"adapter": "full", "precision": "4-bit"}, 400, "precision"),
        ({"surprise": 1}, 400, "surprise"),
    ],
)
async def test_bad_job_spec_is_refused_and_creates_nothing(
        client: httpx.AsyncClient, file_id: str, body: dict[str, Any], status: int,
        param: str) -> None:
    before = (await client.get("/v1/fine_tuning/jobs", params={"limit": 1000})).json()["data"]
    spec = {"model": "alallo/tiny-gpt2", "training_file": file_id, **body}
    response = await client.post("/v1/fine_tuning/jobs", json=spec)
    assert response.status_code == status, response.text
    assert response.json()["error"]["param"] == param
    after = (await client.get("/v1/fine_tuning/jobs", params={"limit": 1000})).json()["data"]
    assert len(after) == len(before)


async def test_malformed_json_unknown_ids_and_missing_key(client: httpx.AsyncClient,
                                                          live_server: LiveServer) -> None:
    response = await client.post("/v1/fine_tuning/jobs", content=b"{oops",
                                 headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"

    for path in ("/v1/fine_tuning/jobs/ft-nope", "/v1/fine_tuning/jobs/ft-nope/events",
                 "/v1/fine_tuning/jobs/ft-nope/stream", "/v1/files/file-nope"):
        missing = await client.get(path)
        assert missing.status_code == 404, path
        assert missing.json()["error"]["param"] in {"job_id", "file_id"}
    assert (await client.post("/v1/fine_tuning/jobs/ft-nope/cancel")).status_code == 404

    async with httpx.AsyncClient(base_url=live_server.url) as anonymous:
        assert (await anonymous.get("/v1/fine_tuning/jobs")).status_code == 401
        wrong = await anonymous.get("/v1/models", headers={"Authorization": "Bearer sk-wrong"})
        assert wrong.status_code == 401
    assert (await client.get("/healthz")).json() == {"status": "ok"}


async def test_a_trainer_command_that_does_not_exist_fails_the_job_not_the_server(
        client: httpx.AsyncClient, file_id: str) -> None:
    response = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file_id,
        "trainer": {"command": ["/no/such/trainer"]},
    })
    assert response.status_code == 200
    items = await read_stream(client, response.json()["id"])
    final = items[-1][2]
    assert final["status"] == "failed"
    assert final["message"].startswith("Training failed: cannot start the trainer:")
    assert (await client.get("/healthz")).status_code == 200


async def test_estimate_gives_time_and_price_ranges(client: httpx.AsyncClient,
                                                    file_id: str) -> None:
    response = await client.post("/v1/fine_tuning/estimates", json={
        "model": "alallo/tiny-gpt2", "training_file": file_id})
    assert response.status_code == 200, response.text
    estimate = response.json()
    assert estimate["available"] and estimate["allowed_to_proceed"]
    assert 0 < estimate["time"]["low_s"] < estimate["time"]["high_s"]
    assert estimate["time"]["text"].endswith("min")
    assert 0 < estimate["price"]["low"] < estimate["price"]["high"]
    assert estimate["plan"]["device_type"] == "cpu"
    bad = await client.post("/v1/fine_tuning/estimates", json={"model": "nope",
                                                               "training_file": file_id})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "model"


async def test_events_page_with_the_openai_sdk_cursor(client: httpx.AsyncClient,
                                                      file_id: str) -> None:
    job = await create_simulated(client, file_id, steps=3, step_delay_s=0.0)
    await read_stream(client, job["id"])
    first = (await client.get(f"/v1/fine_tuning/jobs/{job['id']}/events",
                              params={"limit": 2})).json()
    assert first["has_more"] and len(first["data"]) == 2
    assert first["data"][0]["alallo_type"] == "JOB_COMPLETE"  # newest first, as OpenAI's
    rest = (await client.get(f"/v1/fine_tuning/jobs/{job['id']}/events",
                             params={"after": first["data"][-1]["id"], "limit": 1000})).json()
    assert rest["data"][0]["seq"] < first["data"][-1]["seq"]  # the page goes on, older
    assert rest["data"][-1]["alallo_type"] == "JOB_PENDING" and not rest["has_more"]


async def test_models_list_the_tiny_model_and_accept_a_local_directory(
        client: httpx.AsyncClient, file_id: str, tmp_path: Path) -> None:
    models = (await client.get("/v1/models")).json()["data"]
    tiny = next(m for m in models if m["id"] == "alallo/tiny-gpt2")
    assert tiny["runnable_here"] and tiny["adapters"] == ["lora", "full"]

    local = tmp_path / "my-model"
    local.mkdir()
    (local / "config.json").write_text('{"model_type": "gpt2", "n_positions": 512}')
    response = await client.post("/v1/fine_tuning/jobs", json={
        "model": str(local), "training_file": file_id, "hyperparameters": {"max_steps": 2},
        "trainer": "simulated"})
    assert response.status_code == 200, response.text
    listed = {m["id"]: m for m in (await client.get("/v1/models")).json()["data"]}
    assert listed[str(local)]["context_length"] == 512

    relative = await client.post("/v1/fine_tuning/jobs", json={
        "model": "my-model", "training_file": file_id})
    assert relative.status_code == 400 and "unknown model" in relative.json()["error"]["message"]


@pytest.mark.parametrize("path", ["/v1/fine_tuning/jobs", "/v1/fine_tuning/estimates"])
async def test_json_nested_too_deep_is_refused_with_400_not_a_server_error(
        client: httpx.AsyncClient, file_id: str, path: str) -> None:
    before = (await client.get("/v1/fine_tuning/jobs", params={"limit": 1000})).json()["data"]
    ten_thousand = b"[" * 10_000 + b"]" * 10_000
    just_over = ('{"model": "alallo/tiny-gpt2", "training_file": "%s", "suffix": %s}'
                 % (file_id, "[" * 64 + "]" * 64)).encode()  # 65 levels with the object
    for body in (ten_thousand, just_over):
        response = await client.post(path, content=body,
                                     headers={"Content-Type": "application/json"})
        assert response.status_code == 400, response.text
        assert response.json() == {"error": {
            "code": "invalid_json", "param": None, "type": "invalid_request_error",
            "message": "the body is nested deeper than 64 levels of arrays and objects"}}
    after = (await client.get("/v1/fine_tuning/jobs", params={"limit": 1000})).json()["data"]
    assert len(after) == len(before)
    assert (await client.get("/healthz")).json() == {"status": "ok"}


async def test_a_training_file_line_nested_too_deep_is_refused_with_400(
        client: httpx.AsyncClient) -> None:
    deep = b'{"text": "ok"}\n{"text": "x", "extra": ' + b"[" * 10_000 + b"]" * 10_000 + b"}\n"
    response = await upload(client, content=deep)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == {
        "code": "invalid_file", "param": "file", "type": "invalid_request_error",
        "message": "line 2: nested deeper than 64 levels of arrays and objects"}


async def test_training_settings_are_taken_and_shown_or_refused_naming_the_field(
        client: httpx.AsyncClient, file_id: str) -> None:
    spec = {"model": "alallo/tiny-gpt2", "training_file": file_id, "trainer": "simulated"}
    created = await client.post("/v1/fine_tuning/jobs", json=spec | {"hyperparameters": {
        "max_steps": 2, "lora_r": 16, "lora_alpha": 8, "lora_dropout": 0.1,
        "lora_target_modules": ["c_attn"], "warmup_ratio": 0.1, "weight_decay": 0.01,
        "logging_steps": 1}})
    assert created.status_code == 200, created.text
    shown = created.json()["hyperparameters"]
    assert shown | {"lora_rank": 16, "lora_alpha": 8, "lora_dropout": 0.1,
                    "lora_target_modules": ["c_attn"], "warmup_ratio": 0.1,
                    "weight_decay": 0.01, "logging_steps": 1} == shown
    defaults = (await client.post("/v1/fine_tuning/jobs", json=spec)).json()["hyperparameters"]
    assert (defaults["lora_alpha"], defaults["lora_dropout"], defaults["logging_steps"]) == (
        16, 0.0, 10), "alpha twice the rank; the loss every 10 steps, as the seeds have it"
    for hyper, adapter, param in (({"warmup_ratio": 1.0}, "lora", "hyperparameters.warmup_ratio"),
                                  ({"lora_dropout": -0.1}, "lora", "hyperparameters.lora_dropout"),
                                  ({"lora_target_modules": []}, "lora",
                                   "hyperparameters.lora_target_modules"),
                                  ({"logging_steps": 0}, "lora", "hyperparameters.logging_steps"),
                                  ({"lora_alpha": 32}, "full", "hyperparameters")):
        refused = await client.post("/v1/fine_tuning/jobs", json=spec | {
            "adapter": adapter, "hyperparameters": hyper})
        assert refused.status_code == 400, (hyper, refused.text)
        assert refused.json()["error"]["param"] == param, (hyper, refused.json())
