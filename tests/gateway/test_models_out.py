"""A fine-tuned model out of the server (issue 17): its id, the adapter and the merged model
as archives (``Content-Length``, ``Range``), both loadable with transformers/peft as they
are, and its deletion. A real tiny TRL job trains it; the test loads and generates."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import openai
import pytest
import trio
from support import EXAMPLES, FINAL, LiveServer, upload, wait_for_job

from alallo.client import AsyncClient, Client

pytestmark = [pytest.mark.slow, pytest.mark.any_backend]  # training is the subject, not the store

UNKNOWN = "ft:alallo--tiny-gpt2:acct-0:" + "0" * 24


@pytest.fixture
async def client(live_server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=live_server.url, headers=live_server.headers,
                                 timeout=120) as c:
        yield c


def unpack(data: bytes, into: Path) -> Path:
    """The one top directory of a tar.gz, unpacked into ``into``."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        tops = {name.split("/")[0] for name in archive.getnames()}
        archive.extractall(into, filter="data")
    (top,) = tops
    return into / top


def generate(model: object, tokenizer: object) -> str:
    import torch

    inputs = tokenizer("Hello", return_tensors="pt")  # type: ignore[operator]
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=5, do_sample=False)  # type: ignore[attr-defined]
    return str(tokenizer.decode(out[0], skip_special_tokens=True))  # type: ignore[attr-defined]


# peft 0.x asks transformers a deprecated question while it wraps the base model.
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
async def test_a_fine_tuned_model_downloads_loads_and_is_deleted(
        live_server: LiveServer, client: httpx.AsyncClient, tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    file_id = (await upload(client, EXAMPLES / "sample.jsonl")).json()["id"]
    created = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file_id, "suffix": "demo",
        "hyperparameters": {"max_steps": 4, "batch_size": 2}})
    assert created.status_code == 200, created.text
    job = await wait_for_job(client, created.json()["id"], lambda j: j["status"] in FINAL,
                             timeout=180)
    assert job["status"] == "succeeded", job
    model = job["fine_tuned_model"]
    assert model.startswith("ft:alallo--tiny-gpt2:") and ":demo" not in model
    assert model.endswith("-demo:" + job["id"].removeprefix("ft-"))

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
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "format"

    deleted = await client.delete(f"/v1/models/{model}")
    assert deleted.json() == {"id": model, "object": "model", "deleted": True}
    assert (await client.get(f"/v1/models/{model}/content")).status_code == 404
    assert model not in {m["id"] for m in (await client.get("/v1/models")).json()["data"]}
    again = await client.get(f"/v1/fine_tuning/jobs/{job['id']}")
    assert again.json()["status"] == "succeeded", "the job stays, with its events and log"
