"""DPO with real TRL, through the job lifecycle: preference pairs in OpenAI's form and in
TRL's, checked at upload line by line (an equal pair too: issue 31); a preference file given
to a supervised job (and the reverse) refused in so many words; DPO's own figures in the
log; its estimate counting two sequences and the reference model (issue 18); prompts
against the model's context (issue 31): those that fit train, those that fill it are
refused by their line at create, or fail the job as the user's error, never alallo's."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import EXAMPLES, FINAL, assert_refused_and_nothing_stored, upload, wait_for_job

pytestmark = [pytest.mark.slow, pytest.mark.any_backend]  # training is the subject

GOOD, BAD = ("good", "great", "kind", "clear"), ("bad", "rude", "wrong", "mean")


def seen_pairs(count: int, *, system: str = "Answer well.") -> bytes:
    """Issue 31's pairs: OpenAI's format, a system message and three turns; on the tiny
    model (one token a byte) the prompt is 132 tokens and the longer sequence 151, over
    the 128 the trainer cut to before, within the model's context of 256."""
    return b"".join(json.dumps({
        "input": {"messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": f"Question {i:02d}: how was the film?"},
            {"role": "assistant", "content": "Which part of it?"},
            {"role": "user", "content": "The ending."}]},
        "preferred_output": [{"role": "assistant", "content": "It was good, yes."}],
        "non_preferred_output": [{"role": "assistant", "content": "It was bad, sadly"}],
    }).encode() + b"\n" for i in range(count))


LONG_SYSTEM = "Answer well." + " Be kind." * 15
"""A system message that makes :func:`seen_pairs`' prompts 267 tokens: over the context."""


async def platform_failures(client: httpx.AsyncClient) -> float:
    metrics = (await client.get("/metrics")).text
    found = re.search(r"^alallo_job_platform_failures_total (\S+)$", metrics, re.MULTILINE)
    assert found, metrics
    return float(found.group(1))


def openai_pairs(count: int) -> bytes:
    """OpenAI's preference format: ``input.messages``, ``preferred_output``,
    ``non_preferred_output``."""
    return b"".join(json.dumps({
        "input": {"messages": [{"role": "user", "content": f"Question {i}: how was it?"}]},
        "preferred_output": [{"role": "assistant", "content": f"It was {GOOD[i % 4]}."}],
        "non_preferred_output": [{"role": "assistant", "content": f"It was {BAD[i % 4]}."}],
    }).encode() + b"\n" for i in range(count))


async def test_a_dpo_job_trains_on_preference_pairs_and_logs_its_figures(
        client: httpx.AsyncClient) -> None:
    # Issue 31: these pairs failed 4 runs with "num_samples=0" as a platform error.
    failures = await platform_failures(client)
    pairs = (await upload(client, content=seen_pairs(24), name="pairs.jsonl")).json()
    created = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": pairs["id"],
        "method": {"type": "dpo", "dpo": {"hyperparameters": {"beta": 0.2, "max_steps": 10,
                                                                "batch_size": 4}}}})
    assert created.status_code == 200, created.text
    assert created.json()["method"] == {"type": "dpo", "dpo": {"hyperparameters": {
        "n_epochs": 2, "batch_size": 4, "learning_rate_multiplier": 1.0, "beta": 0.2}}}
    assert created.json()["hyperparameters"]["beta"] == 0.2
    job = await wait_for_job(client, created.json()["id"], lambda j: j["status"] in FINAL,
                             timeout=300)
    assert job["status"] == "succeeded", (job["message"], job["error"])
    log = [line["text"] for line in (await client.get(
        f"/v1/fine_tuning/jobs/{job['id']}/log")).json()["data"]]
    figures = [line for line in log if line.startswith("Step 10/10: reward accuracy ")]
    assert len(figures) == 1, log
    assert "reward margin" in figures[0] and "rewards/chosen" in figures[0]
    assert "Step 10/10: loss " in "\n".join(log)
    assert job["error"] is None and "JOB_RESTARTED" not in await event_types(client, job["id"])
    assert await platform_failures(client) == failures


async def event_types(client: httpx.AsyncClient, job_id: str) -> list[str]:
    events = (await client.get(f"/v1/fine_tuning/jobs/{job_id}/events",
                               params={"limit": 100, "order": "asc", "type": "message"},
                               )).json()["data"]
    return [event["alallo_type"] for event in events]


async def test_prompts_that_fill_the_context_are_refused_at_create_naming_the_line(
        client: httpx.AsyncClient) -> None:
    pairs = (await upload(client, content=seen_pairs(2) + seen_pairs(3, system=LONG_SYSTEM),
                          name="pairs.jsonl")).json()["id"]
    await assert_refused_and_nothing_stored(client, {
        "model": "alallo/tiny-gpt2", "training_file": pairs, "method": "dpo"}, {
        "code": "invalid_request", "param": "training_file",
        "message": "line 3: the prompt is 267 tokens and the model's context is 256, so "
                   "neither answer fits and the example cannot train: shorten the prompt "
                   "(fewer or shorter messages), or choose a model with a longer context; "
                   "2 more lines cannot train (lines 4 and 5)"})


@pytest.fixture
def readable_model() -> Iterator[Path]:
    """The tiny model in a directory of the server's own that every user may read (the
    trainer may run as another user than the tests: docs/security.md)."""
    from alallo.trainers.tiny import build_tiny_gpt2

    folder = Path(tempfile.mkdtemp(prefix="alallo-test-model-"))
    try:
        model = build_tiny_gpt2(folder / "my-tiny")  # built in a private folder, renamed
        for path in (folder, model, *model.iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield model
    finally:
        shutil.rmtree(folder)


async def test_where_the_server_cannot_count_the_trainer_fails_the_job_as_the_users_error(
        client: httpx.AsyncClient, readable_model: Path) -> None:
    # A model directory of the server's own: it renders no chat template but alallo's
    # (alallo.trainers._encoders), so the trainer's check decides, before training.
    model = readable_model
    failures = await platform_failures(client)
    pairs = (await upload(client, content=seen_pairs(2) + seen_pairs(2, system=LONG_SYSTEM),
                          name="pairs.jsonl")).json()["id"]
    created = await client.post("/v1/fine_tuning/jobs", json={
        "model": str(model), "training_file": pairs, "method": "dpo",
        "hyperparameters": {"max_steps": 2}})
    assert created.status_code == 200, created.text
    job = await wait_for_job(client, created.json()["id"], lambda j: j["status"] in FINAL,
                             timeout=180)
    assert job["status"] == "failed", job
    assert job["message"] == (
        "Training failed: line 3: the prompt is 267 tokens and the model's context is 256, "
        "so neither answer fits and the example cannot train: shorten the prompt (fewer or "
        "shorter messages), or choose a model with a longer context; 1 more line cannot "
        "train (line 4)")
    types = await event_types(client, job["id"])
    assert types[-1] == "JOB_USER_ERROR" and "JOB_RESTARTED" not in types, types
    assert job["price"]["charged"] - job["price"]["refunded"] == 0
    assert await platform_failures(client) == failures


async def test_a_file_given_to_the_other_method_is_refused_saying_so(
        client: httpx.AsyncClient) -> None:
    pairs = (await upload(client, content=openai_pairs(4), name="pairs.jsonl")).json()["id"]
    examples = (await upload(client, EXAMPLES / "sample.jsonl")).json()["id"]
    for path in ("/v1/fine_tuning/jobs", "/v1/fine_tuning/estimates"):
        supervised = await client.post(path, json={"model": "alallo/tiny-gpt2",
                                                   "training_file": pairs})
        assert supervised.status_code == 400, supervised.text
        assert supervised.json()["error"] == {
            "code": "invalid_request", "param": "training_file", "type": "invalid_request_error",
            "message": "method supervised trains on examples with their answers (text, "
                       "messages ending with the assistant's, or prompt and completion); "
                       f"{pairs} holds preference pairs: use method dpo"}
        dpo = await client.post(path, json={"model": "alallo/tiny-gpt2",
                                            "training_file": examples, "method": "dpo"})
        assert dpo.status_code == 400 and dpo.json()["error"]["param"] == "training_file"
        assert dpo.json()["error"]["message"].startswith("method dpo trains on preference pairs")
    mismatched = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": pairs,
        "method": {"type": "dpo", "supervised": {"hyperparameters": {"n_epochs": 1}}}})
    assert mismatched.status_code == 400, mismatched.text
    assert mismatched.json()["error"]["message"].startswith(
        "method.supervised does not go with method type 'dpo'")
    beta = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": examples,
        "hyperparameters": {"beta": 0.1}})
    assert beta.status_code == 400 and beta.json()["error"]["param"] == "hyperparameters"


@pytest.mark.parametrize(("content", "message"), [
    (b'{"prompt": "Q", "chosen": "A"}\n', 'line 1: missing column "rejected"'),
    (b'{"prompt": "Q", "chosen": "A", "rejected": "B"}\n{"prompt": "Q", "chosen": 3, '
     b'"rejected": "B"}\n', 'line 2: column "chosen" must be a string'),
    (openai_pairs(1) + b'{"input": {"messages": [{"role": "user", "content": "Q"}]}, '
                       b'"preferred_output": [{"role": "assistant", "content": "A"}]}\n',
     'line 2: missing column "non_preferred_output"'),
    (b'{"input": {"messages": []}, "preferred_output": [], "non_preferred_output": []}\n',
     'line 1: missing column "input.messages"'),
    (b'{"input": {"messages": [{"role": "user", "content": "Q"}]}, "preferred_output": '
     b'[{"role": "user", "content": "A"}], "non_preferred_output": [{"role": "assistant", '
     b'"content": "B"}]}\n', "line 1: preferred_output[0].role must be one of assistant"),
    # Issue 31: an equal pair has nothing to teach.
    (openai_pairs(2) + b'{"input": {"messages": [{"role": "user", "content": "Q"}]}, '
                       b'"preferred_output": [{"role": "assistant", "content": "A"}], '
                       b'"non_preferred_output": [{"content": "A", "role": "assistant"}]}\n',
     'line 3: "preferred_output" and "non_preferred_output" are the same answer, so the pair '
     "has nothing to teach: prefer one answer over a different one"),
    (b'{"prompt": "Q", "chosen": "A", "rejected": "B"}\n{"prompt": "Q", "chosen": "A", '
     b'"rejected": "A"}\n', 'line 2: "chosen" and "rejected" are the same answer'),
])
async def test_a_bad_preference_file_is_refused_naming_the_line(
        client: httpx.AsyncClient, content: bytes, message: str) -> None:
    refused = await upload(client, content=content, name="pairs.jsonl")
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["message"].startswith(message), refused.text


async def test_the_estimate_counts_dpos_two_sequences_and_its_reference(
        client: httpx.AsyncClient) -> None:
    data = openai_pairs(48)
    lines = data.count(b"\n")
    # Examples of the same bytes and count, for a supervised job: text padded to the size.
    pad = (len(data) - lines * len(b'{"text": ""}\n')) // lines
    text = b"".join(json.dumps({"text": "x" * pad}).encode() + b"\n" for _ in range(lines))
    text += b"\n" * (len(data) - len(text))  # blank lines are not examples
    pairs = (await upload(client, content=data, name="pairs.jsonl")).json()["id"]
    plain = (await upload(client, content=text, name="text.jsonl")).json()["id"]

    async def high_s(**spec: Any) -> float:  # steps enough that their time outweighs start-up
        answer = await client.post("/v1/fine_tuning/estimates", json={
            "model": "alallo/tiny-gpt2", "hyperparameters": {"max_steps": 100_000}, **spec})
        assert answer.status_code == 200, answer.text
        return float(answer.json()["time"]["high_s"])

    supervised = await high_s(training_file=plain)
    dpo = await high_s(training_file=pairs, method="dpo")
    # On the tiny model a step's fixed cost weighs most: measured, DPO's steps take 1.2x.
    assert 1.15 * supervised < dpo < 2.5 * supervised, (dpo, supervised)
