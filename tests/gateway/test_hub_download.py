"""A hub model the cache lacks, downloaded when its job starts (issue 17).

A stand-in for the Hugging Face hub (``tests/fake_hub.py``, run as a process) serves the
tiny model as ``acme/gated``, readable with one token only; the server has that token
(``ALALLO_HF_TOKEN``), an empty ``HF_HOME`` and ``HF_ENDPOINT`` pointing at the stand-in. The
job is accepted with the hub's commit pinned, its trainer downloads the weights (the
progress in its log) and trains them; what cannot be had is refused at create, each case in
its own words. The lookup's every answer, token or not: tests/alallo/test_hub_lookup.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fake_hub import start_fake_hub_process
from support import EXAMPLES, FINAL, LiveServer, upload, wait_for_job

from alallo.trainers.tiny import build_tiny_gpt2

pytestmark = [pytest.mark.slow, pytest.mark.any_backend]  # the hub is the subject

TOKEN = "hf_" + "r" * 34


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[str]:
    tiny = build_tiny_gpt2(tmp_path / "tiny")
    process, url = start_fake_hub_process({"acme/gated": (tiny, TOKEN),
                                           "acme/locked": (tiny, "hf_someone_else")})
    yield url
    process.terminate()
    process.wait()


async def test_a_hub_model_is_downloaded_when_its_job_starts(
        server_factory: Callable[..., LiveServer], hub: str, tmp_path: Path) -> None:
    home = tmp_path / "hf"
    server = server_factory(HF_HOME=str(home), HF_HUB_OFFLINE="0", HF_ENDPOINT=hub,
                            ALALLO_HF_TOKEN=TOKEN)
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers,
                                 timeout=60) as client:
        file_id = (await upload(client, EXAMPLES / "sample.jsonl")).json()["id"]
        for model, words in (("acme/nothing", "no model 'acme/nothing' on the Hugging Face hub"),
                             ("acme/gated@v9", "'acme/gated' has no revision 'v9'"),
                             ("acme/locked", "'acme/locked' is gated on the Hugging Face hub: "
                                             "the server's token")):
            refused = await client.post("/v1/fine_tuning/jobs", json={
                "model": model, "training_file": file_id})
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"]["param"] == "model"
            assert refused.json()["error"]["message"].startswith(words)

        estimate = await client.post("/v1/fine_tuning/estimates", json={
            "model": "acme/gated", "training_file": file_id})
        assert estimate.status_code == 200, estimate.text
        chat = {"model": "acme/gated", "prompt": "Hi", "max_tokens": 2}
        early = await client.post("/v1/completions", json=chat)
        assert early.status_code == 400 and "not in this server's Hugging Face cache yet" in (
            early.json()["error"]["message"])

        created = await client.post("/v1/fine_tuning/jobs", json={
            "model": "acme/gated", "training_file": file_id,
            "hyperparameters": {"max_steps": 4, "batch_size": 2}})
        assert created.status_code == 200, created.text
        commit = created.json()["model_revision"]
        assert commit and len(commit) == 40
        job = await wait_for_job(client, created.json()["id"], lambda j: j["status"] in FINAL,
                                 timeout=180)
        assert job["status"] == "succeeded", job
        log = [line["text"] for line in (await client.get(
            f"/v1/fine_tuning/jobs/{job['id']}/log")).json()["data"]]
        assert f"Downloading model acme/gated at {commit[:12]} from the Hugging Face hub" in log
        assert any(line.startswith("Downloading model acme/gated: 100% of ") for line in log)
        events = (await client.get(f"/v1/fine_tuning/jobs/{job['id']}/events",
                                   params={"limit": 100, "type": "message"})).json()["data"]
        assert "MODEL_DOWNLOAD_COMPLETE" in [e["alallo_type"] for e in events]
        answer = await client.post("/v1/completions", json=chat)  # downloaded: it answers
        assert answer.status_code == 200, answer.text
    snapshot = home / "hub" / "models--acme--gated" / "snapshots" / commit
    assert (snapshot / "config.json").is_file(), "in the server's Hugging Face cache"
    listed = {m["id"]: m for m in httpx.get(f"{server.url}/v1/models",
                                            headers=server.headers).json()["data"]}
    assert listed["acme/gated"]["revision"] == commit
