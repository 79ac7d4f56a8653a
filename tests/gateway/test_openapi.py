"""``/openapi.json``: generated from the models, matching the routes, and true to the
server (schemathesis fuzzes the live server against it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from starlette.routing import Route
from support import EXAMPLES, LiveServer

from gateway._openapi import OPERATIONS
from gateway.app import ROUTES

ST = Path(sys.executable).with_name("st")


def test_every_route_is_documented_and_nothing_else() -> None:
    routes = {(method.lower(), route.path) for route in ROUTES if isinstance(route, Route)
              for method in route.methods or () if method != "HEAD"}
    assert routes == {(op.method, op.path) for op in OPERATIONS}


def test_the_document_is_openapi_3_1_built_from_the_shapes(live_server: LiveServer) -> None:
    document = httpx.get(f"{live_server.url}/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    schemas = document["components"]["schemas"]
    assert {"JobSpec", "FineTuningJob", "FileObject", "JobEvent", "ErrorBody"} <= set(schemas)
    # The answers' shapes are alallo.api's TypedDicts, their keys' docstrings included.
    attempt = schemas["FineTuningJob"]["properties"]["attempt"]
    assert attempt["type"] == "integer" and "moved or resumed" in attempt["description"]
    # The job spec is alallo.JobSpec's own JSON Schema: its constraints come along.
    hyper = schemas["Hyperparameters"]["properties"]["n_epochs"]["anyOf"][0]
    assert hyper["type"] == "integer" and hyper["minimum"] == 1
    create = document["paths"]["/v1/fine_tuning/jobs"]["post"]
    assert create["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/JobSpec"}


@pytest.mark.any_backend  # the document and the answers are the subject, not the store
def test_schemathesis_finds_no_server_error_and_no_answer_off_the_schema(
        live_server: LiveServer, tmp_path: Path) -> None:
    # Real objects in the lists, so that their schemas are checked against real data.
    with httpx.Client(base_url=live_server.url, headers=live_server.headers) as client:
        file = client.post("/v1/files", files={"file": ("a.jsonl", (EXAMPLES / "sample.jsonl")
                                                          .read_bytes())}).json()
        job = client.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": file["id"],
            "hyperparameters": {"max_steps": 2}, "trainer": "simulated"})
        assert job.status_code == 200, job.text
    result = subprocess.run(
        [str(ST), "run", f"{live_server.url}/openapi.json",
         "--header", f"Authorization: Bearer {live_server.api_key}",
         "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
                     "response_schema_conformance",
         "--exclude-path-regex", "stream$",  # endless bodies: tested in test_sse.py
         "--max-examples", "10", "--seed", "7", "--generation-database", "none",
         "--request-timeout", "120",  # the first completion loads the model into its worker
         "--no-color"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout
