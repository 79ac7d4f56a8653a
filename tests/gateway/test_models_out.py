"""A fine-tuned model out of the server (issue 17): its id, the adapter and the merged model
as archives (``Content-Length``, ``Range``), both loadable with transformers/peft as they
are, and its deletion. A real tiny TRL job trains it once for the module (:func:`trained`);
the tests load and generate, download it from many clients at once, and delete it last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import trio
from support import EXAMPLES, FINAL, LiveServer, unpack, wait_until_sync

from alallo.client import AsyncClient, Client

# Training and downloads are the subject, not the store: once, in the PostgreSQL pass (the
# shorter of the two: the passes' balance), in one worker (the model is trained once).
pytestmark = [pytest.mark.slow, pytest.mark.once_on_postgres,
              pytest.mark.xdist_group("models_out")]

UNKNOWN = "ft:alallo--tiny-gpt2:acct-0:" + "0" * 24


PARALLEL = 32
"""Clients that download each archive at once (issue 31: 8 were enough to break it)."""


@pytest.fixture(scope="module")
def trained(live_server: LiveServer) -> dict[str, Any]:
    """A succeeded tiny TRL job with suffix ``demo`` (the job object), trained once for the
    module; the module's last test deletes its model."""
    with httpx.Client(base_url=live_server.url, headers=live_server.headers,
                      timeout=120) as api:
        file_id = api.post("/v1/files", data={"purpose": "fine-tune"}, files={
            "file": ("sample.jsonl", (EXAMPLES / "sample.jsonl").read_bytes())}).json()["id"]
        created = api.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": file_id, "suffix": "demo",
            "hyperparameters": {"max_steps": 4, "batch_size": 2}})
        assert created.status_code == 200, created.text
        job: dict[str, Any] = wait_until_sync(
            lambda: (j := api.get(f"/v1/fine_tuning/jobs/{created.json()['id']}").json())[
                "status"] in FINAL and j, timeout=180, interval=0.2, what="the job ended")
    assert job["status"] == "succeeded", job
    return job


def generate(model: object, tokenizer: object) -> str:
    import torch

    inputs = tokenizer("Hello", return_tensors="pt")  # type: ignore[operator]
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=5, do_sample=False)  # type: ignore[attr-defined]
    return str(tokenizer.decode(out[0], skip_special_tokens=True))  # type: ignore[attr-defined]


async def download_at_once(client: httpx.AsyncClient, model: str, fmt: str,
                           count: int) -> list[httpx.Response]:
    """``count`` downloads of one archive, all sent before any is answered."""
    answers: list[httpx.Response] = []

    async def one() -> None:
        answers.append(await client.get(f"/v1/models/{model}/content", params={"format": fmt}))

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)
    return answers


def leftovers(downloads: Path) -> list[str]:
    """What the server's archive folder holds besides whole archives (temporary files and
    folders of a build)."""
    if not downloads.is_dir():
        return []
    return sorted(p.name for p in downloads.iterdir() if not p.name.endswith(".tar.gz"))


async def test_many_clients_download_a_new_archive_at_once_and_a_failed_build_is_retried(
        trained: dict[str, Any], client: httpx.AsyncClient, tmp_path: Path) -> None:
    model = trained["fine_tuned_model"]
    model_dir = Path(trained["fine_tuned_model_path"])
    downloads = model_dir.parent / "downloads"
    merged_archive = downloads / f"{trained['id']}-merged.tar.gz"

    # A merge that fails (the adapter's config is unreadable) answers an error to everyone
    # who waited for it, and leaves no archive and no temporary file behind.
    config = model_dir / "adapter_config.json"
    good = config.read_bytes()
    config.write_text("{not json")
    try:
        failed = await download_at_once(client, model, "merged", 4)
    finally:
        config.write_bytes(good)
    assert [r.status_code for r in failed] == [500] * 4
    assert not merged_archive.exists() and leftovers(downloads) == []

    # Each format, PARALLEL clients at once: one build, served to all of them (the same file:
    # the same ETag), the next request retrying the merge that failed.
    tops: dict[str, Path] = {}
    for fmt in ("adapter", "merged"):
        answers = await download_at_once(client, model, fmt, PARALLEL)
        assert [r.status_code for r in answers] == [200] * PARALLEL, {
            r.status_code: r.text[:200] for r in answers}
        assert len({r.content for r in answers}) == 1
        assert len({r.headers["etag"] for r in answers}) == 1, "built once"
        top = tops[fmt] = unpack(answers[0].content, tmp_path / fmt)
        assert top.name == f"{trained['id']}-{fmt}"
        assert (top / "adapter_config.json").is_file() == (fmt == "adapter")
    assert leftovers(downloads) == []

    # The archive's adapter names its base by id, so that it loads elsewhere; the server's
    # own copy keeps the path its engines load (issue 35).
    shipped = json.loads((tops["adapter"] / "adapter_config.json").read_text())
    kept = json.loads(config.read_text())
    assert shipped["base_model_name_or_path"] == "alallo/tiny-gpt2", shipped
    assert Path(kept["base_model_name_or_path"]).is_absolute(), kept
    assert {**shipped, "base_model_name_or_path": None} == {
        **kept, "base_model_name_or_path": None}, "nothing else changed"


# peft 0.x asks transformers a deprecated question while it wraps the base model.
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
async def test_a_fine_tuned_model_downloads_loads_and_is_deleted(
        live_server: LiveServer, trained: dict[str, Any], client: httpx.AsyncClient,
        tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    job = trained
    model = job["fine_tuned_model"]
    # OpenAI's five fields, ft:BASE:ACCOUNT:SUFFIX:JOB (issue 32).
    assert model.startswith("ft:alallo--tiny-gpt2:") and model.count(":") == 4
    assert model.endswith(":demo:" + job["id"].removeprefix("ft-"))

    listed = {m["id"]: m for m in (await client.get("/v1/models")).json()["data"]}
    assert listed[model]["adapters"] == ["lora"] and listed[model]["runnable_here"] is True
    assert (await client.get(f"/v1/models/{model}")).json()["id"] == model

    adapter = await client.get(f"/v1/models/{model}/content", params={"format": "adapter"})
    assert adapter.status_code == 200 and adapter.headers["content-type"] == "application/gzip"
    assert int(adapter.headers["content-length"]) == len(adapter.content)
    part = await client.get(f"/v1/models/{model}/content",
                            headers={"Range": "bytes=10-109"})  # a download resumed
    assert part.status_code == 206 and part.content == adapter.content[10:110]
    adapter_dir = unpack(adapter.content, tmp_path / "adapter")
    assert (adapter_dir / "adapter_config.json").is_file()

    merged = await client.get(f"/v1/models/{model}/content", params={"format": "merged"})
    assert merged.status_code == 200, merged.text
    merged_dir = unpack(merged.content, tmp_path / "merged")
    assert not (merged_dir / "adapter_config.json").exists()

    base_dir = live_server.data_dir / "models" / "alallo--tiny-gpt2"
    tokenizer = AutoTokenizer.from_pretrained(merged_dir)
    plain = AutoModelForCausalLM.from_pretrained(merged_dir)
    with_adapter = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir),
                                             adapter_dir)
    # The merged weights are the base with the adapter folded in: the same text comes out.
    assert generate(plain, tokenizer) == generate(with_adapter, tokenizer)

    # The openai SDK talks to the fine-tuned model (its adapter on its base, in a worker).
    with openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=live_server.api_key,
                       max_retries=0, timeout=120) as sdk:
        answer = await trio.to_thread.run_sync(lambda: sdk.completions.create(
            model=model, prompt="Hello", max_tokens=5, temperature=0))
    assert "Hello" + answer.choices[0].text == generate(with_adapter, tokenizer)

    # The Python client resumes a partial download; the CLI downloads and unpacks.
    partial = tmp_path / "client" / f"{job['id']}-adapter.tar.gz.partial"
    partial.parent.mkdir()
    partial.write_bytes(adapter.content[:100])
    with Client(live_server.url, api_key=live_server.api_key) as sync:
        seen: list[tuple[int, int | None]] = []
        path = await trio.to_thread.run_sync(lambda: sync.download_model(
            model, tmp_path / "client", progress=lambda d, t: seen.append((d, t))))
    assert path.read_bytes() == adapter.content and not partial.exists()
    assert seen[-1] == (len(adapter.content), len(adapter.content))
    async with AsyncClient(live_server.url, api_key=live_server.api_key) as async_client:
        path = await async_client.download_model(model, tmp_path / "async", merged=True)
    assert path.name == f"{job['id']}-merged.tar.gz" and path.read_bytes() == merged.content
    env = {**os.environ, "ALALLO_URL": live_server.url, "ALALLO_API_KEY": live_server.api_key}
    cli = subprocess.run([sys.executable, "-m", "alallo", "models", "download", model, "--merged",
                          "-o", str(tmp_path / "cli")], env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert cli.returncode == 0, cli.stderr
    assert (tmp_path / "cli" / f"{job['id']}-merged" / "config.json").is_file(), cli.stdout
    missing = subprocess.run([sys.executable, "-m", "alallo", "models", "download",
                              UNKNOWN], env=env, capture_output=True, text=True, timeout=120,
                             check=False)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert missing.stderr.strip() == f"Error: no model '{UNKNOWN}' (param: model)"

    bad = await client.get(f"/v1/models/{model}/content", params={"format": "gguf"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "format"

    deleted = await client.delete(f"/v1/models/{model}")
    assert deleted.json() == {"id": model, "object": "model", "deleted": True}
    assert (await client.get(f"/v1/models/{model}/content")).status_code == 404
    assert model not in {m["id"] for m in (await client.get("/v1/models")).json()["data"]}
    again = await client.get(f"/v1/fine_tuning/jobs/{job['id']}")
    assert again.json()["status"] == "succeeded", "the job stays, with its events and log"
