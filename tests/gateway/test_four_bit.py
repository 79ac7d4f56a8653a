"""A 4-bit (QLoRA) job on a CPU-only server, over HTTP, as a user meets it (issue 31): the
estimate offers it, the job trains and succeeds, its log says 4-bit, and the model it makes
(a LoRA adapter) downloads, alone and merged into the 16-bit base, and loads there."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from support import EXAMPLES, FINAL, LiveServer, unpack, upload, wait_for_job

pytestmark = [pytest.mark.slow, pytest.mark.any_backend]  # training is the subject, not the store


# peft asks transformers a deprecated question while it wraps the base model.
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
async def test_a_four_bit_job_trains_on_the_cpu_and_its_adapter_loads_on_the_16_bit_base(
        live_server: LiveServer, client: httpx.AsyncClient, tmp_path: Path) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    file_id = (await upload(client, EXAMPLES / "sample.jsonl")).json()["id"]
    job = {"model": "alallo/tiny-gpt2", "training_file": file_id, "precision": "4-bit",
           "hyperparameters": {"max_steps": 4, "batch_size": 2}}
    estimate = (await client.post("/v1/fine_tuning/estimates", json=job)).json()
    assert estimate["available"] is True, estimate
    assert estimate["plan"]["device_type"] == "cpu"

    created = await client.post("/v1/fine_tuning/jobs", json=job)
    assert created.status_code == 200, created.text
    assert created.json()["precision"] == "4-bit"
    done = await wait_for_job(client, created.json()["id"], lambda j: j["status"] in FINAL,
                              timeout=180)
    assert done["status"] == "succeeded", done
    log = (await client.get(f"/v1/fine_tuning/jobs/{done['id']}/log")).json()["data"]
    lines = [line["text"] for line in log]
    assert "Loading model alallo/tiny-gpt2 in 4-bit (NF4, QLoRA)" in lines
    assert any(text.startswith("Quantized 74% of the model's weights to 4-bit") for text in lines)
    assert "Step 4/4: loss" in " ".join(lines)

    model = done["fine_tuned_model"]
    adapter = await client.get(f"/v1/models/{model}/content", params={"format": "adapter"})
    assert adapter.status_code == 200, adapter.text
    adapter_dir = unpack(adapter.content, tmp_path / "adapter")
    merged = await client.get(f"/v1/models/{model}/content", params={"format": "merged"})
    assert merged.status_code == 200, merged.text
    merged_dir = unpack(merged.content, tmp_path / "merged")

    # The adapter trained on 4-bit weights applies to the 16-bit base as it is, and the
    # merged download is that base with the adapter folded in.
    base_dir = live_server.data_dir / "models" / "alallo--tiny-gpt2"
    base = AutoModelForCausalLM.from_pretrained(base_dir)
    with_adapter = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir),
                                             adapter_dir).eval()
    plain = AutoModelForCausalLM.from_pretrained(merged_dir).eval()
    ids = AutoTokenizer.from_pretrained(base_dir)("Hello, world", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = with_adapter(ids).logits
        assert torch.allclose(plain(ids).logits, logits, atol=1e-4)
        assert not torch.allclose(base.eval()(ids).logits, logits, atol=1e-4), \
            "the adapter trained: it changes what the model says"
