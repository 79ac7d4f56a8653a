"""``/openapi.json``: generated from the models, matching the routes, and true to the
server: schemathesis, with every check, finds nothing off it (issue 31, item 8)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from starlette.routing import Route
from support import EXAMPLES, REPO, LiveServer

from gateway._openapi import OPERATIONS, _decimals_up_to
from gateway.app import ROUTES

ST = Path(sys.executable).with_name("st")
MAX_EXAMPLES = 2
"""Cases per operation in the fuzzing phase; the coverage phase's boundary cases (every
bound, every enum value, a missing required field...) come on top, and most findings of the
probe were among them. Kept small for the suite's 15 minutes: the fuzzing phase is most of
the test's time; runs by hand with 10 and 30 examples found nothing more (issue 31)."""


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


def test_the_document_states_the_bounds_the_server_checks(live_server: LiveServer) -> None:
    document = httpx.get(f"{live_server.url}/openapi.json").json()
    params = {param["name"]: param for param in
              document["paths"]["/v1/fine_tuning/jobs"]["get"]["parameters"]}
    # limit=0 was allowed by the document and refused by the server; limit= is none given.
    assert params["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 1000,
                                         "default": 20}
    assert params["limit"]["allowEmptyValue"] is True
    content = document["paths"]["/v1/models/{model_id}/content"]["get"]["parameters"]
    assert content[1]["schema"]["enum"] == ["adapter", "merged"]
    # The server's own limits (settings) are in its document.
    chat = document["components"]["schemas"]["ChatRequest"]["properties"]
    assert chat["max_tokens"]["anyOf"][0]["maximum"] == 32_768  # inference_max_tokens
    # Each event of a stream, and its data's shape.
    stream = document["paths"]["/v1/fine_tuning/jobs/{job_id}/stream"]["get"]
    events = stream["responses"]["200"]["content"]["text/event-stream"]["schema"]["oneOf"]
    assert {e["properties"]["event"]["const"]: e["properties"]["data"]["contentSchema"]
            for e in events}["log"] == {"$ref": "#/components/schemas/TrainingLogLine"}


@pytest.mark.unit
def test_a_last_event_id_pattern_takes_exactly_the_ids_below_its_bound() -> None:
    pattern = re.compile(_decimals_up_to(4611686018427387903))
    for n in (0, 7, 10**17, 999999999999999999, 4611686018427387903, 4611686018427387899,
              4011686018427387903, 4611686018427386999):
        assert pattern.fullmatch(str(n)), n
    for text in ("4611686018427387904", "4611686018427387910", "5000000000000000000",
                 "10000000000000000000", "007", "-1", "", "+1"):
        assert not pattern.fullmatch(text), text
    small = re.compile(_decimals_up_to(1234))
    assert [n for n in range(3000) if small.fullmatch(str(n))] == list(range(1235))


@pytest.mark.any_backend  # the document and the answers are the subject, not the store
def test_schemathesis_with_every_check_finds_nothing_off_the_document(
        server_factory: Callable[..., LiveServer], tmp_path: Path) -> None:
    # A server of its own: the jobs the probe creates train one at a time and end with it.
    # Its completions are short (the document says so: max_tokens up to 8).
    server = server_factory(ALALLO_INFERENCE_MAX_TOKENS="8")
    # Real objects in the lists, so that their schemas are checked against real data.
    with httpx.Client(base_url=server.url, headers=server.headers) as client:
        file = client.post("/v1/files", files={"file": ("a.jsonl", (EXAMPLES / "sample.jsonl")
                                                          .read_bytes())}).json()
        job = client.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": file["id"],
            "hyperparameters": {"max_steps": 2}, "trainer": "simulated"})
        assert job.status_code == 200, job.text
    # schemathesis.toml: the refusals no schema can state, and how long to read a stream.
    result = subprocess.run(
        [str(ST), "--config-file", str(REPO / "schemathesis.toml"), "run",
         f"{server.url}/openapi.json",
         "--header", f"Authorization: Bearer {server.api_key}",
         "--checks", "all", "--mode", "all",  # positive and negative cases
         "--phases", "coverage,fuzzing,stateful",  # the document has no examples
         "--max-examples", str(MAX_EXAMPLES), "--seed", "7",
         "--generation-database", "none", "--no-color"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "Stateful" in result.stdout
