"""Reinforcement fine-tuning (issue 34) with real TRL (``GRPOTrainer``) through the job
lifecycle: OpenAI's ``method: {"type": "reinforcement", "reinforcement": {"grader": ...}}``,
prompts checked at upload by line, the grader's rewards in the log, the metrics series,
the events and the results CSV; a job whose grader fails on some lines goes on, saying so
by line; the openai SDK creates one as it would at OpenAI."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from statistics import mean
from typing import Any

import httpx
import openai
import pytest
import trio
from support import FINAL, LiveServer, upload, wait_for_job

pytestmark = [pytest.mark.slow, pytest.mark.any_backend]  # training is the subject

LOWERCASE = """
def grade(sample, item):
    text = sample["output_text"]
    return sum(ch in item["letters"] for ch in text) / max(1, len(text))
"""
"""Partial credit: the share of the answer's characters that are lowercase letters. The tiny
model's vocabulary is 257 bytes: at first ~10 % of what it writes, and GRPO teaches it more."""

EXACT = {"type": "string_check", "name": "exact", "input": "{{ sample.output_text }}",
         "reference": "{{ item.answer }}", "operation": "eq"}


def prompts(count: int, **fields: Any) -> bytes:
    """OpenAI's RFT rows: a conversation ending before the answer, and the grader's fields."""
    return b"".join(json.dumps({
        "messages": [{"role": "developer", "content": "Answer in small letters."},
                     {"role": "user", "content": f"Say something, {i}."}],
        "answer": f"word {i}", **fields}).encode() + b"\n" for i in range(count))


def rewards(log: list[str]) -> list[float]:
    """The mean rewards the log reports, step by step."""
    return [float(line.split("reward ")[1].split()[0]) for line in log
            if ": reward " in line]


async def log_of(client: httpx.AsyncClient, job_id: str) -> list[str]:
    response = await client.get(f"/v1/fine_tuning/jobs/{job_id}/log", params={"limit": 1000})
    return [line["text"] for line in response.json()["data"]]


async def trained(client: httpx.AsyncClient, data: bytes, grader: dict[str, Any],
                  **hyperparameters: Any) -> list[str]:
    """The log of a reinforcement job of the tiny model on ``data`` with ``grader``, run to
    its success."""
    training = (await upload(client, content=data, name="prompts.jsonl")).json()
    created = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": training["id"], "method": {
            "type": "reinforcement", "reinforcement": {
                "grader": grader, "hyperparameters": hyperparameters}}})
    assert created.status_code == 200, created.text
    job = await wait_for_job(client, created.json()["id"], lambda j: j["status"] in FINAL,
                             timeout=300)
    assert job["status"] == "succeeded", (job["message"], job["error"])
    return await log_of(client, job["id"])


async def test_a_python_grader_teaches_the_tiny_model_and_the_user_watches_the_reward(
        client: httpx.AsyncClient) -> None:
    training = (await upload(client, content=prompts(32, letters="abcdefghijklmnopqrstuvwxyz"),
                             name="prompts.jsonl")).json()
    assert training["format"] == "reinforcement"
    validation = (await upload(client, content=prompts(4, letters="abcdefghijklmnopqrstuvwxyz"),
                               name="validation.jsonl")).json()
    grader = {"type": "python", "name": "lowercase", "source": LOWERCASE}
    created = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": training["id"],
        "validation_file": validation["id"], "adapter": "full", "seed": 0,
        "method": {"type": "reinforcement", "reinforcement": {"grader": grader, "hyperparameters": {
            "max_steps": 100, "batch_size": 2, "learning_rate_multiplier": 20,
            "max_completion_tokens": 16, "eval_interval": 50, "eval_samples": 2,
            "compute_multiplier": "auto", "reasoning_effort": "auto"}}}})
    assert created.status_code == 200, created.text
    assert created.json()["method"] == {"type": "reinforcement", "reinforcement": {
        "grader": grader, "hyperparameters": {
            "n_epochs": 7, "batch_size": 2, "learning_rate_multiplier": 20.0,
            "compute_multiplier": 1.0, "eval_interval": 50, "eval_samples": 2,
            "reasoning_effort": "default"}}}
    job = await wait_for_job(client, created.json()["id"], lambda j: j["status"] in FINAL,
                             timeout=600)
    assert job["status"] == "succeeded", (job["message"], job["error"])

    log = await log_of(client, job["id"])
    assert "Loaded 32 training prompts" in log
    reported = rewards(log)
    assert len(reported) == 10, log  # every 10 steps
    # GRPO on a fixed seed: the answers' share of lowercase letters climbs.
    assert mean(reported[-3:]) > mean(reported[:3]) + 0.2, reported
    assert [line for line in log if "validation reward" in line][-1].startswith(
        "Step 100/100: validation reward ")

    series = (await client.get(f"/v1/fine_tuning/jobs/{job['id']}/metrics",
                               params={"limit": 1000})).json()["data"]
    rows = {row["step"]: row for row in series}
    assert rows[100]["reward"] == pytest.approx(reported[-1], abs=1e-4)
    assert rows[100]["scores"]["lowercase"] == pytest.approx(reported[-1], abs=1e-3)
    assert rows[100]["valid_reward"] is not None and rows[100]["reward_std"] is not None
    assert rows[100]["scores"]["valid.lowercase"] == pytest.approx(rows[100]["valid_reward"],
                                                                   abs=1e-3)

    events = (await client.get(f"/v1/fine_tuning/jobs/{job['id']}/events",
                               params={"limit": 100})).json()["data"]
    metrics = [e for e in events if e["type"] == "metrics" and "reward" in e["data"]]
    assert metrics and metrics[0]["message"].startswith("Step 100/100: training loss=")
    assert "reward=" in metrics[0]["message"] and "lowercase" in metrics[0]["data"]["scores"]

    results = await client.get(f"/v1/files/{job['result_files'][0]}/content")
    table = list(csv.DictReader(io.StringIO(results.text)))
    assert {"train_reward", "train_reward_std", "valid_reward", "score_lowercase"} \
        <= set(table[0])
    assert float(table[-1]["train_reward"]) == pytest.approx(reported[-1], abs=1e-4)


@pytest.fixture
def sdk(live_server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=live_server.api_key,
                       max_retries=0) as client:
        yield client


async def test_a_string_check_job_through_the_openai_sdk(
        sdk: openai.OpenAI, client: httpx.AsyncClient) -> None:
    training = (await upload(client, content=prompts(8), name="prompts.jsonl")).json()
    job = await trio.to_thread.run_sync(lambda: sdk.fine_tuning.jobs.create(
        model="alallo/tiny-gpt2", training_file=training["id"], seed=3,
        method={"type": "reinforcement", "reinforcement": {
            "grader": EXACT, "hyperparameters": {"n_epochs": 1, "batch_size": 4}}}))
    assert job.method is not None and job.method.type == "reinforcement"
    assert job.method.reinforcement is not None
    assert job.method.reinforcement.grader.type == "string_check"
    finished = await wait_for_job(client, job.id, lambda j: j["status"] in FINAL, timeout=300)
    assert finished["status"] == "succeeded", (finished["message"], finished["error"])
    again = await trio.to_thread.run_sync(lambda: sdk.fine_tuning.jobs.retrieve(job.id))
    assert again.status == "succeeded" and again.trained_tokens is not None
    assert again.method.reinforcement.hyperparameters.compute_multiplier == 1.0  # type: ignore[union-attr]
    log = await log_of(client, job.id)
    assert rewards(log) == [0.0], log  # two steps; the random model never says "word 3"
    run = await trio.to_thread.run_sync(lambda: sdk.fine_tuning.alpha.graders.run(
        grader=EXACT, model_sample="word 3", item={"answer": "word 3"}))
    assert run.reward == 1.0  # what the trainer scores a right answer


FAILING = {  # a python grader failing on the rows whose n is 0, and the reason it gives
    "raises": ("def grade(sample, item):\n    return 1 / item['n']\n",
               "ZeroDivisionError: division by zero"),
    "reads /etc/passwd": ("def grade(sample, item):\n"
                          "    return 1 if item['n'] else len(open('/etc/passwd').read())\n",
                          "PermissionError: [Errno 13] Permission denied: '/etc/passwd'"),
}


@pytest.mark.parametrize("failing", sorted(FAILING))
async def test_a_grader_that_fails_on_some_lines_scores_them_0_and_the_log_names_them(
        client: httpx.AsyncClient, failing: str) -> None:
    source, reason = FAILING[failing]
    rows = b"".join(json.dumps({"messages": [{"role": "user", "content": f"Count {n}."}],
                                "n": n}).encode() + b"\n" for n in (1, 0, 2, 0))
    grader = {"type": "multi", "name": "both", "calculate_output": "exact + inverse",
              "graders": {"exact": {**EXACT, "reference": "{{ item.n }}"},
                          "inverse": {"type": "python", "name": "inverse", "source": source}}}
    log = await trained(client, rows, grader, max_steps=4, batch_size=2,
                        max_completion_tokens=8)
    failed = sorted(line for line in log if "the grader scored an answer 0" in line)
    assert failed == [f"Line {line}: the grader scored an answer 0: {reason}"
                      for line in (2, 4)], log
    last = [line for line in log if ": reward " in line][-1]
    assert "; graders: exact 0.0000, inverse " in last, last


@pytest.mark.parametrize(("body", "param", "message"), [
    ({"method": "reinforcement"}, "grader", "method reinforcement needs a grader"),
    ({"method": {"type": "reinforcement"}}, "method.reinforcement",
     "method reinforcement needs method.reinforcement.grader"),
    ({"method": {"type": "reinforcement", "reinforcement": {"grader": {
        "type": "score_model", "name": "judge", "model": "alallo/no-such-model",
        "input": [{"role": "user", "content": "{{ sample.output_text }}"}]}}}},
     "grader", "the score_model grader's model: unknown model 'alallo/no-such-model'"),
    ({"method": {"type": "reinforcement", "reinforcement": {"grader": {
        "type": "python", "name": "p", "source": "def score(sample, item): return 1"}}}},
     "grader", "grader.source: it defines no function grade(sample, item)"),
    ({"method": {"type": "reinforcement", "reinforcement": {"grader": EXACT, "hyperparameters": {
        "reasoning_effort": "high"}}}}, "hyperparameters", 'reasoning_effort "high"'),
    ({"method": "supervised", "grader": EXACT}, "grader",
     "a grader applies to method reinforcement only"),
])
async def test_a_reinforcement_job_asked_for_wrongly_is_refused_by_its_field(
        client: httpx.AsyncClient, body: dict[str, Any], param: str, message: str) -> None:
    training = (await upload(client, content=prompts(2), name="prompts.jsonl")).json()
    refused = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": training["id"], **body})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == param
    assert message in refused.json()["error"]["message"]
    assert (await client.get("/v1/fine_tuning/jobs")).json()["data"] == [] or all(
        j["training_file"] != training["id"]
        for j in (await client.get("/v1/fine_tuning/jobs")).json()["data"])


async def test_prompts_are_checked_by_line_and_told_from_the_other_methods_data(
        client: httpx.AsyncClient, file_id: str) -> None:
    answered = prompts(2) + json.dumps({"messages": [
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}).encode()
    bad = await upload(client, content=answered, name="mixed.jsonl")
    assert bad.status_code == 400, bad.text
    assert bad.json()["error"]["message"].startswith(
        "line 3: the conversation ends with the assistant's answer: reinforcement data ends "
        "before it")
    training = (await upload(client, content=prompts(2), name="prompts.jsonl")).json()
    supervised = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": training["id"]})
    assert supervised.status_code == 400, supervised.text
    assert supervised.json()["error"]["param"] == "training_file"
    assert supervised.json()["error"]["message"].endswith(
        f"{training['id']} holds prompts without answers: use method reinforcement")
    examples = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file_id, "method": {
            "type": "reinforcement", "reinforcement": {"grader": EXACT}}})
    assert examples.status_code == 400, examples.text
    assert examples.json()["error"]["message"].startswith(
        "method reinforcement trains on prompts: conversations that end before the answer")


async def test_the_estimate_counts_the_sampled_answers(client: httpx.AsyncClient) -> None:
    training = (await upload(client, content=prompts(16), name="prompts.jsonl")).json()

    async def minutes(**hyperparameters: Any) -> float:
        answer = await client.post("/v1/fine_tuning/estimates", json={
            "model": "alallo/tiny-gpt2", "training_file": training["id"], "method": {
                "type": "reinforcement", "reinforcement": {
                    "grader": EXACT, "hyperparameters": {"max_steps": 100,
                                                         **hyperparameters}}}})
        assert answer.status_code == 200, answer.text
        return float(answer.json()["time"]["high_s"])

    base = await minutes()
    assert await minutes(compute_multiplier=2) > base  # twice the answers a prompt
    assert await minutes(max_completion_tokens=512) > base  # longer answers


async def test_score_model_graders_judge_with_a_base_and_a_fine_tuned_model_of_the_account(
        client: httpx.AsyncClient, file_id: str) -> None:
    sft = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file_id,
        "hyperparameters": {"max_steps": 2}})
    fine_tuned = (await wait_for_job(client, sft.json()["id"],
                                     lambda j: j["status"] in FINAL))["fine_tuned_model"]
    assert fine_tuned is not None

    def judge(name: str, model: str) -> dict[str, Any]:
        return {"type": "score_model", "name": name, "model": model, "range": [0, 9],
                "sampling_params": {"temperature": 0, "max_completions_tokens": 8},
                "input": [{"role": "user", "content": "Rate 0-9: {{ sample.output_text }}"}]}

    both = {"type": "multi", "name": "judges", "calculate_output": "base + tuned",
            "graders": {"base": judge("base", "alallo/tiny-gpt2"),
                        "tuned": judge("tuned", fine_tuned)}}
    log = await trained(client, prompts(4), both, max_steps=2, batch_size=2,
                        max_completion_tokens=8)
    assert "Loading alallo/tiny-gpt2 to judge the answers (score_model)" in log
    assert f"Loading {fine_tuned} to judge the answers (score_model)" in log
    assert len(rewards(log)) == 1 and 0 <= rewards(log)[0] <= 18, log
    # Another account's model (or one deleted) answers as a name nobody has.
    nobody = fine_tuned.rsplit(":", 1)[0] + ":0000000000"
    refused = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": (await upload(
            client, content=prompts(2), name="p.jsonl")).json()["id"],
        "method": {"type": "reinforcement", "reinforcement": {"grader": judge("j", nobody)}}})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "grader"
    assert refused.json()["error"]["message"].startswith(
        f"the score_model grader's model: no model {nobody!r}"), refused.json()


async def test_graders_run_scores_with_the_judge_as_the_trainer_does(
        client: httpx.AsyncClient, live_server: LiveServer) -> None:
    from alallo.trainers import JudgeModel
    from alallo.trainers._trl_judge import LocalJudge
    from alallo.trainers.graders import GRADER, grade

    judge = {"type": "score_model", "name": "judge", "model": "alallo/tiny-gpt2",
             "range": [0, 9], "sampling_params": {"temperature": 0, "max_completions_tokens": 12},
             "input": [{"role": "user", "content": "Rate 0-9: {{ sample.output_text }}"}]}
    local = LocalJudge({"alallo/tiny-gpt2": JudgeModel(model=str(
        live_server.data_dir / "models" / "alallo--tiny-gpt2"))}, print, "cpu")
    for sample in ("word 1", "a longer answer, 42", "???"):
        served = (await client.post("/v1/fine_tuning/alpha/graders/run", json={
            "grader": judge, "model_sample": sample, "item": {}})).json()
        trained = await trio.to_thread.run_sync(
            lambda: grade(GRADER.validate_python(judge), sample, {}, judge=local))
        assert served["reward"] == trained.reward, (sample, served, trained)
        assert served["metadata"]["errors"] == trained.as_run()["metadata"]["errors"]


async def test_a_reinforcement_job_cancelled_mid_run_stops_and_pays_for_its_steps_only(
        client: httpx.AsyncClient) -> None:
    training = (await upload(client, content=prompts(8), name="prompts.jsonl")).json()
    created = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": training["id"], "method": {
            "type": "reinforcement", "reinforcement": {"grader": EXACT, "hyperparameters": {
                "max_steps": 5000, "batch_size": 2, "max_completion_tokens": 8}}}})
    assert created.status_code == 200, created.text
    job_id = created.json()["id"]
    await wait_for_job(client, job_id, lambda j: j["progress"]["step"] >= 3, timeout=300)
    cancelled = await client.post(f"/v1/fine_tuning/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    job = await wait_for_job(client, job_id, lambda j: j["status"] in FINAL, timeout=120)
    assert job["status"] == "cancelled" and job["progress"]["step"] < 5000
    assert 0 < job["price"]["charged"] < job["price"]["estimate"]["low"], job["price"]


async def test_a_prompt_that_fills_the_context_is_refused_at_create_naming_its_line(
        client: httpx.AsyncClient) -> None:
    # 324 tokens as the tiny model's chat template writes it: <|user|>, 300 x, <|assistant|>
    long = json.dumps({"messages": [{"role": "user", "content": "x" * 300}]}).encode() + b"\n"
    training = (await upload(client, content=prompts(2) + long, name="prompts.jsonl")).json()
    refused = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": training["id"], "method": {
            "type": "reinforcement", "reinforcement": {"grader": EXACT}}})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "training_file"
    assert refused.json()["error"]["message"].startswith(
        "line 3: the prompt is 324 tokens and the model's context is 256, so no token of the "
        "completion fits"), refused.json()
