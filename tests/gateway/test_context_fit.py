"""Examples against the model's context, decided before the job runs (issue 31): one
longer than the context is cut and said so, in the estimate's ``warnings`` and in a
``WARNING`` event of the job; one that cannot train is refused by its line, for the
validation file as for the training file; conversations for a model without a chat
template are refused before the job runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import assert_refused_and_nothing_stored, upload

from alallo.trainers.tiny import EOS_TOKEN, byte_level_tokenizer

pytestmark = pytest.mark.any_backend  # the store is not the subject

CUT = ("2 of 3 examples are longer than alallo/tiny-gpt2's context of 256 tokens (the "
       "longest: 401) and train on their first 256 tokens only: lines 2 and 4")


def jsonl(*rows: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


async def test_examples_over_the_context_are_cut_and_said_so(client: httpx.AsyncClient) -> None:
    # One token a byte, and the end-of-sequence token: 301 and 401 tokens (line 3 blank).
    data = jsonl({"text": "short"}, {"text": "x" * 300}) + b"\n" + jsonl({"text": "y" * 400})
    file_id = (await upload(client, content=data)).json()["id"]
    spec = {"model": "alallo/tiny-gpt2", "training_file": file_id,
            "hyperparameters": {"max_steps": 2}}
    estimate = await client.post("/v1/fine_tuning/estimates", json=spec)
    assert estimate.status_code == 200, estimate.text
    assert estimate.json()["warnings"] == [CUT]
    created = await client.post("/v1/fine_tuning/jobs", json=spec)
    assert created.status_code == 200, created.text
    job_id = created.json()["id"]
    await client.post(f"/v1/fine_tuning/jobs/{job_id}/cancel")
    events = (await client.get(f"/v1/fine_tuning/jobs/{job_id}/events",
                               params={"order": "asc"})).json()["data"]
    assert [(e["alallo_type"], e["level"], e["message"]) for e in events[:2]] == [
        ("JOB_PENDING", "info", "Fine tune request created"), ("WARNING", "warn", CUT)]

    fits = (await upload(client, content=jsonl({"text": "short"}))).json()["id"]
    answer = await client.post("/v1/fine_tuning/estimates", json={**spec, "training_file": fits})
    assert answer.status_code == 200 and answer.json()["warnings"] == []


async def test_a_validation_example_that_cannot_train_is_refused_naming_its_line(
        client: httpx.AsyncClient) -> None:
    train = (await upload(client, content=jsonl({"prompt": "Q", "completion": " A"}))).json()
    validation = (await upload(client, content=jsonl(
        {"prompt": "Q", "completion": " A"}, {"prompt": "q" * 300, "completion": " A"}))).json()
    await assert_refused_and_nothing_stored(client, {
        "model": "alallo/tiny-gpt2", "training_file": train["id"],
        "validation_file": validation["id"]}, {
        "code": "invalid_request", "param": "validation_file",
        "message": "line 2: the prompt is 300 tokens and the model's context is 256, so no "
                   "token of the completion fits and the example cannot train: shorten the "
                   "prompt (fewer or shorter messages), or choose a model with a longer "
                   "context"})


async def test_conversations_for_a_model_without_a_chat_template_are_refused(
        client: httpx.AsyncClient, tmp_path: Path) -> None:
    # A model directory of the server's with its tokenizer but no chat template.
    model = tmp_path / "no-template"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "gpt2", "n_positions": 256}')
    byte_level_tokenizer().save(str(model / "tokenizer.json"))
    (model / "tokenizer_config.json").write_text(json.dumps({"eos_token": EOS_TOKEN}))
    chat = (await upload(client, content=jsonl({"messages": [
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}))).json()
    for path in ("/v1/fine_tuning/estimates", "/v1/fine_tuning/jobs"):
        refused = await client.post(path, json={"model": str(model),
                                                "training_file": chat["id"]})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"] == {
            "code": "invalid_request", "param": "training_file", "type": "invalid_request_error",
            "message": f"model {model} has no chat template, so it cannot train on messages "
                       'data: use the "text" or "prompt_completion" format'}
