"""A Hugging Face hub model in the server's cache, trained by its hub id (issue 17).

The cache is a temporary ``HF_HOME`` holding the tiny model in the hub's layout
(``hub/models--ORG--NAME/{refs/main, snapshots/<commit>/}``), with ``HF_HUB_OFFLINE=1``: no
network. The model is listed, trained by its id (the job records the commit it trained), and
an id the cache does not have is refused at once with a message that says so.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from support import EXAMPLES, FINAL, LiveServer, upload, wait_for_job

from alallo.trainers.tiny import build_tiny_gpt2

pytestmark = [pytest.mark.slow, pytest.mark.any_backend]  # training is the subject, not the store

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def hub_cache(home: Path) -> Path:
    """An ``HF_HOME`` whose cache holds ``acme/tiny`` at :data:`COMMIT` (its ``main``)."""
    repo = home / "hub" / "models--acme--tiny"
    build_tiny_gpt2(repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    return home


async def test_a_hub_model_in_the_cache_is_listed_trained_and_pinned(
        server_factory: Callable[..., LiveServer], tmp_path: Path) -> None:
    home = hub_cache(tmp_path / "hf")
    server = server_factory(HF_HOME=str(home), HF_HUB_OFFLINE="1")
    async with httpx.AsyncClient(base_url=server.url, timeout=60, headers={
            "Authorization": f"Bearer {server.api_key}"}) as client:
        models = {m["id"]: m for m in (await client.get("/v1/models")).json()["data"]}
        tiny = models["acme/tiny"]
        assert (tiny["owned_by"], tiny["revision"]) == ("acme", COMMIT)
        assert tiny["parameters"] == models["alallo/tiny-gpt2"]["parameters"]

        file_id = (await upload(client, EXAMPLES / "sample.jsonl")).json()["id"]
        missing = await client.post("/v1/fine_tuning/jobs", json={
            "model": "acme/missing", "training_file": file_id})
        assert missing.status_code == 400, missing.text
        error = missing.json()["error"]
        assert error["param"] == "model"
        assert error["message"].startswith(
            "'acme/missing' is not in this server's Hugging Face cache (the operator downloads "
            "it: huggingface-cli download acme/missing)")

        created = await client.post("/v1/fine_tuning/jobs", json={
            "model": "acme/tiny", "training_file": file_id,
            "hyperparameters": {"max_steps": 4, "batch_size": 2}})
        assert created.status_code == 200, created.text
        assert created.json()["model_revision"] == COMMIT
        done = await wait_for_job(client, created.json()["id"],
                                  lambda j: j["status"] in FINAL, timeout=180)
    assert done["status"] == "succeeded", done
    assert done["model"] == "acme/tiny" and done["model_revision"] == COMMIT
    shutil.rmtree(home)
