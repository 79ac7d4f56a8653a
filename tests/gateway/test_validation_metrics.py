"""Validation and the metrics users judge a run by, with real TRL (issue 18): a validation
file evaluated at every checkpoint and at the end, its figures in the log, the events, the
checkpoints' ``metrics``, the metrics series and the stream; the metrics CSV of a succeeded
job; early stopping that ends with the best checkpoint, charged for the steps it ran."""

from __future__ import annotations

import csv
import io
import json
import math
import random
from typing import Any

import httpx
import pytest
from support import FINAL, read_stream, upload, wait_for_job

pytestmark = [pytest.mark.slow, pytest.mark.any_backend]  # training is the subject


def texts(count: int, *, seed: int | None = None) -> bytes:
    """``count`` short ``text`` examples: one repeated pattern, or with ``seed`` strings of
    unrelated words a model trained on the pattern gets no better at."""
    if seed is None:
        rows = [f"Example {i}: the cat sat on mat number {i}." for i in range(count)]
    else:
        words = ("zebra", "quantum", "violet", "ocean", "7", "##", "pine", "ledger", "orbit")
        pick = random.Random(seed)
        rows = [" ".join(pick.choice(words) for _ in range(12)) for _ in range(count)]
    return b"".join(json.dumps({"text": row}).encode() + b"\n" for row in rows)


async def _events(client: httpx.AsyncClient, job_id: str) -> list[dict[str, Any]]:
    answer = await client.get(f"/v1/fine_tuning/jobs/{job_id}/events",
                              params={"limit": 1000, "order": "asc", "type": "message"})
    return list(answer.json()["data"])


async def test_a_validation_file_is_evaluated_at_each_checkpoint_and_reported_everywhere(
        client: httpx.AsyncClient) -> None:
    training = (await upload(client, content=texts(32))).json()["id"]
    validation = (await upload(client, content=texts(8, seed=1), name="valid.jsonl")).json()
    created = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": training,
        "validation_file": validation["id"],
        "hyperparameters": {"max_steps": 20, "logging_steps": 5}})
    assert created.status_code == 200, created.text
    assert created.json()["hyperparameters"]["eval_steps"] == 10  # at every checkpoint
    job_id = created.json()["id"]
    job = await wait_for_job(client, job_id, lambda j: j["status"] in FINAL, timeout=300)
    assert job["status"] == "succeeded", job

    # The series: a row per logged step, validation figures where it evaluated.
    series = (await client.get(f"/v1/fine_tuning/jobs/{job_id}/metrics")).json()
    assert series["object"] == "list" and series["has_more"] is False
    rows = {row["step"]: row for row in series["data"]}
    assert sorted(rows) == [5, 10, 15, 20]
    for row in rows.values():
        assert row["object"] == "fine_tuning.job.metrics"
        assert math.isfinite(row["train_loss"]) and 0 <= row["train_mean_token_accuracy"] <= 1
        assert row["learning_rate"] > 0 and row["grad_norm"] >= 0 and row["tokens_per_s"] > 0
    evaluated = [step for step, row in rows.items() if row["valid_loss"] is not None]
    assert evaluated == [10, 20]
    assert 0 <= rows[10]["valid_mean_token_accuracy"] <= 1
    assert rows[20]["full_valid_loss"] == rows[20]["valid_loss"]  # the model's, at the end
    later = (await client.get(f"/v1/fine_tuning/jobs/{job_id}/metrics",
                              params={"after": 10})).json()["data"]
    assert [row["step"] for row in later] == [15, 20]

    # The checkpoints carry OpenAI's metrics, the same figures.
    checkpoints = (await client.get(f"/v1/fine_tuning/jobs/{job_id}/checkpoints")).json()
    assert [c["step_number"] for c in checkpoints["data"]] == [20, 10]
    for checkpoint in checkpoints["data"]:
        metrics, row = checkpoint["metrics"], rows[checkpoint["step_number"]]
        assert metrics["valid_loss"] == row["valid_loss"] and math.isfinite(metrics["valid_loss"])
        assert metrics["train_loss"] == row["train_loss"]
        assert metrics["valid_mean_token_accuracy"] == row["valid_mean_token_accuracy"]
        assert metrics["train_mean_token_accuracy"] == row["train_mean_token_accuracy"]

    # The log and the events say each evaluation.
    log = [line["text"] for line in (await client.get(
        f"/v1/fine_tuning/jobs/{job_id}/log")).json()["data"]]
    assert f"Step 10/20: validation loss {rows[10]['valid_loss']:.4f}, mean token accuracy " \
           f"{rows[10]['valid_mean_token_accuracy']:.4f}" in log
    events = await _events(client, job_id)
    assert "VALIDATION_DATA_DOWNLOAD_COMPLETE" in [e["alallo_type"] for e in events]
    evals = [e for e in events if e["alallo_type"] == "EVAL_COMPLETE"]
    assert [e["step"] for e in evals] == [10, 20]
    assert evals[0]["data"]["valid_loss"] == rows[10]["valid_loss"]
    assert evals[0]["message"].startswith("Evaluation at step 10: validation loss ")

    # The metrics CSV, a file of the account like any other.
    assert len(job["result_files"]) == 1
    result = (await client.get(f"/v1/files/{job['result_files'][0]}")).json()
    assert (result["purpose"], result["format"], result["line_count"]) == (
        "fine-tune-results", "csv", 4)
    content = await client.get(f"/v1/files/{result['id']}/content")
    table = list(csv.DictReader(io.StringIO(content.text)))
    assert [int(r["step"]) for r in table] == [5, 10, 15, 20]
    for r in table:
        assert float(r["train_loss"]) == rows[int(r["step"])]["train_loss"]
        assert float(r["train_accuracy"]) == rows[int(r["step"])]["train_mean_token_accuracy"]
    assert [float(r["valid_loss"]) for r in table if r["valid_loss"]] == [
        c["metrics"]["valid_loss"] for c in reversed(checkpoints["data"])]
    as_training = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": result["id"]})
    assert as_training.status_code == 400
    assert as_training.json()["error"]["param"] == "training_file"
    assert "results file, not training data" in as_training.json()["error"]["message"]

    # The stream carries a metrics item per report, and resumes after one without a gap.
    items = await read_stream(client, job_id)
    metrics = [(seq, data) for kind, seq, data in items if kind == "metrics"]
    assert [data["step"] for _, data in metrics] == [5, 10, 10, 15, 20, 20, 20]
    assert "valid_loss" in metrics[2][1] and "train_loss" not in metrics[2][1]
    resumed = await read_stream(client, job_id, last_event_id=metrics[1][0])
    assert [seq for _, seq, _ in resumed] == [seq for _, seq, _ in items
                                               if seq > metrics[1][0]][:len(resumed)]
    assert [d["step"] for k, _, d in resumed if k == "metrics"] == [10, 15, 20, 20, 20]


async def test_early_stopping_ends_with_the_best_checkpoint_and_charges_the_steps_run(
        client: httpx.AsyncClient) -> None:
    training = (await upload(client, content=texts(32))).json()["id"]
    validation = (await upload(client, content=texts(8, seed=2), name="valid.jsonl")).json()
    created = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": training,
        "validation_file": validation["id"],
        "early_stopping": {"patience": 2, "min_delta": 0.001},
        # A seed of its own (a job draws one when none is given): with another, a step may
        # improve on the best by less than min_delta, so TRL's best is its last step.
        "seed": 42,
        "hyperparameters": {"max_steps": 200, "eval_steps": 2, "logging_steps": 5,
                            "learning_rate": 0.01}})
    assert created.status_code == 200, created.text
    assert created.json()["early_stopping"] == {"patience": 2, "min_delta": 0.001}
    job = await wait_for_job(client, created.json()["id"], lambda j: j["status"] in FINAL,
                             timeout=300)
    assert job["status"] == "succeeded", job
    stopped = job["progress"]["step"]
    assert stopped < 200 and job["progress"] == {**job["progress"], "max_steps": stopped,
                                                  "percent": 100.0}
    done = [e for e in await _events(client, job["id"]) if e["alallo_type"] == "TRAINING_COMPLETE"]
    assert len(done) == 1 and done[0]["step"] == stopped
    assert done[0]["message"].startswith(f"Training stopped early at step {stopped} of 200: "
                                         "the validation loss did not improve for 2 ")
    best = int(done[0]["message"].rsplit(" ", 1)[1])
    rows = {r["step"]: r for r in (await client.get(
        f"/v1/fine_tuning/jobs/{job['id']}/metrics")).json()["data"]}
    valid = {step: row["valid_loss"] for step, row in rows.items() if row["valid_loss"]}
    assert best == min(valid, key=lambda step: valid[step]) and best < stopped
    # Patience: the evaluations after the best did not beat it by min_delta.
    assert all(valid[step] > valid[best] - 0.001 for step in valid if step > best)
    assert len([step for step in valid if step > best]) == 2
    assert rows[best]["full_valid_loss"] == valid[best]  # the model is the best checkpoint
    # Each checkpoint's own training loss, logged at its step (not only every 5 steps).
    assert all(rows[step]["train_loss"] is not None for step in valid)
    # Charged for the steps it ran: the same price per step as a job that ran them all.
    assert job["price"]["charged"] > 0


async def test_validation_settings_without_a_validation_file_are_refused(
        client: httpx.AsyncClient) -> None:
    training = (await upload(client, content=texts(8))).json()["id"]
    for extra, param, words in (
            ({"early_stopping": {"patience": 2}}, "early_stopping", "give a validation_file"),
            ({"hyperparameters": {"eval_steps": 5}}, "hyperparameters",
             "eval_steps needs a validation_file")):
        answer = await client.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": training, **extra})
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["param"] == param
        assert words in answer.json()["error"]["message"]
    bad = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": training, "validation_file": training,
        "early_stopping": {"patience": 0}})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "early_stopping.patience"
