"""Structlog JSON logs carry request and job ids; answers carry ``X-Request-ID``."""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path

import httpx
import pytest
import structlog
from support import EXAMPLES

from alallo import Runtime, Settings
from alallo.runtime._logging import configure_logging
from gateway import build_app

pytestmark = pytest.mark.any_backend  # the request log lines are the subject

UNKNOWN = "ft-" + "0" * 24


async def test_each_request_logs_a_json_line_with_its_request_and_job_ids(
        tmp_path: Path) -> None:
    out = io.StringIO()
    configure_logging(logging.INFO, json=True, file=out)
    try:
        async with Runtime(Settings(data_dir=tmp_path)) as runtime:
            transport = httpx.ASGITransport(app=build_app(runtime))
            async with httpx.AsyncClient(transport=transport, base_url="http://alallo",
                                         headers={"Authorization": f"Bearer {runtime.api_key}"},
                                         ) as client:
                traced = await client.get(f"/v1/fine_tuning/jobs/{UNKNOWN}/events",
                                          headers={"X-Request-ID": "trace-42"})
                odd = await client.get("/healthz", headers={"X-Request-ID": "not a token"},
                                       params={"access_token": runtime.api_key})
                file = (await client.post("/v1/files", files={"file": (
                    "sample.jsonl", (EXAMPLES / "sample.jsonl").read_bytes())})).json()
                job = (await client.post("/v1/fine_tuning/jobs", json={
                    "model": "alallo/tiny-gpt2", "training_file": file["id"],
                    "hyperparameters": {"max_steps": 2}, "trainer": "simulated"})).json()
                await client.post(f"/v1/fine_tuning/jobs/{job['id']}/cancel")
    finally:
        structlog.reset_defaults()

    assert traced.status_code == 404 and traced.headers["x-request-id"] == "trace-42"
    generated = odd.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated), "a header that is no token is replaced"
    text = out.getvalue()
    assert runtime.api_key not in text, "query strings (access tokens) are not logged"
    lines = [json.loads(line) for line in text.splitlines()]
    access = {line["request_id"]: line for line in lines if line["event"] == "http.request"}
    assert access["trace-42"] | {"duration_ms": 0, "timestamp": ""} == {
        "event": "http.request", "level": "info", "method": "GET", "status": 404,
        "path": f"/v1/fine_tuning/jobs/{UNKNOWN}/events", "request_id": "trace-42",
        "job_id": UNKNOWN, "duration_ms": 0, "timestamp": ""}
    assert access[generated]["path"] == "/healthz" and "job_id" not in access[generated]
    cancel = [line for line in access.values() if line["path"].endswith("/cancel")]
    assert [line["job_id"] for line in cancel] == [job["id"]]
    # The job actor's own lines name the job too.
    assert any(line["event"] == "job.event" and line.get("job_id") == job["id"]
               for line in lines)
