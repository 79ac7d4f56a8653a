"""Reinforcement fine-tuning through the Python clients: ``create_job(method="reinforcement",
grader=...)`` with its hyperparameters, blocking and async, each a one-step job of the tiny
model on a live server, followed to its end and read back as a reward."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from support import LiveServer

from alallo import AsyncClient, InvalidRequest, api
from alallo.client import Client, HyperparameterFields

pytestmark = [pytest.mark.slow, pytest.mark.any_backend]  # real training: GRPO, one step

EXACT = {"type": "string_check", "name": "exact", "input": "{{ sample.output_text }}",
         "reference": "{{ item.answer }}", "operation": "eq"}
TINY = HyperparameterFields(max_steps=1, batch_size=2, compute_multiplier=0.5,
                            max_completion_tokens=8)
"""One step of two prompts, an answer each (GRPO's group of 4 × 0.5), of at most 8 tokens."""


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    """OpenAI's RFT rows: a conversation ending before the answer, and the grader's field."""
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"Say {i}."}],
                                        "answer": str(i)}) + "\n" for i in range(4)))
    return path


def assert_rewarded(job: Mapping[str, Any], series: api.MetricsList) -> None:
    assert job["status"] == "succeeded", (job["message"], job["error"])
    method = job["method"]
    assert method["type"] == "reinforcement"
    assert method["reinforcement"]["grader"] == EXACT
    assert method["reinforcement"]["hyperparameters"]["compute_multiplier"] == 0.5
    (row,) = series["data"]
    assert row["step"] == 1 and row["reward"] == 0.0  # the random model never says "1"
    assert row["scores"] == {"exact": 0.0}


def test_the_blocking_client_creates_a_reinforcement_job_with_a_grader(
        live_server: LiveServer, prompts: Path) -> None:
    with Client(live_server.url, api_key=live_server.api_key) as client:
        file = client.upload_file(prompts)
        assert file["format"] == "reinforcement"
        quote = client.estimate(model="alallo/tiny-gpt2", training_file=file["id"],
                                method="reinforcement", grader=EXACT, hyperparameters=TINY)
        assert quote["available"], quote
        with pytest.raises(InvalidRequest) as refused:
            client.create_job(model="alallo/tiny-gpt2", training_file=file["id"],
                              method="reinforcement", hyperparameters=TINY)
        assert "needs a grader" in refused.value.message
        job = client.create_job(model="alallo/tiny-gpt2", training_file=file["id"],
                                method="reinforcement", grader=EXACT, hyperparameters=TINY,
                                adapter="full", seed=0)
        final: Mapping[str, Any] = job
        for item in client.watch(job["id"]):  # it ends after the job's final status
            if item.kind == "job":
                final = item.data
        assert_rewarded(final, client.list_metrics(job["id"]))


async def test_the_async_client_creates_a_reinforcement_job_with_a_grader(
        live_server: LiveServer, prompts: Path) -> None:
    async with AsyncClient(live_server.url, api_key=live_server.api_key) as client:
        file = await client.upload_file(prompts)
        job = await client.create_job(model="alallo/tiny-gpt2", training_file=file["id"],
                                      method="reinforcement", grader=EXACT,
                                      hyperparameters=TINY, seed=0)
        final: Mapping[str, Any] = job
        async with contextlib.aclosing(client.watch(job["id"])) as items:
            async for item in items:
                if item.kind == "job":
                    final = item.data
        assert_rewarded(final, await client.list_metrics(job["id"]))
