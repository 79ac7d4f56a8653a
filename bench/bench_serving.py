"""Serving: tokens/s and time to first token of four LoRA models of one base, through
alallo's ``/v1/completions`` (its vLLM engine), against vLLM's own OpenAI server with the
same adapters and the same flags, and against alallo's transformers engine, in one run.

Run: ``.venv/bin/python bench/bench_serving.py`` (``--quick``: 2 rounds a side instead of
6; ``--json FILE`` appends the rows to FILE). Needs vLLM's environment
(``python -m alallo.serving.install``, which ``make test`` runs).

What it does: a bench server (:mod:`_server`) trains four tiny LoRA models of
``alallo/tiny-llama`` (real TRL jobs, a letter each); the adapters it gives for download are
loaded into a vLLM server started here with :func:`alallo.serving.server_command` (what alallo
starts); a copy of the data dir is served by a second bench server with
``serving_engine=transformers``. Each round sends ``N`` streamed requests (32 new tokens
at most, greedy, spread over the four models in turn) with ``C`` at once, for C = 1, 16 and
64, to each side in turn, so that every side meets the same machine (the other side's vLLM
engine stopped meanwhile: its worker busy-polls a core even idle); tokens/s is the
completion tokens of the round over its wall time, first token the time to the first chunk
with text. Targets (issue 33): ≥ 0.9× vLLM at 16 and 64; ≥ 1.0× the better of vLLM and
transformers at 1. Beside them, the CPU time alallo's server spends per 1,000 tokens (what it
adds in front of the engine), against what vLLM's own API server spends: on two cores the
engine itself swings 2-4× between identical rounds (its core and worker spin with
``sched_yield`` while requests flow), so that figure is the steadier measure of alallo's cost.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import trio
from _results import report, row
from _server import BenchServer

from alallo.serving import VllmEnvironment, default_venv, server_command, server_env
from alallo.settings import Settings

BASE = "alallo/tiny-llama"
PROMPT = "Tell me"
MAX_TOKENS = 32
LEVELS = (1, 16, 64)


def train(client: httpx.Client) -> list[str]:
    """Four LoRA models of the base, each taught to answer with its letter; their ids."""
    jobs = []
    for letter in "abcd":
        lines = "\n".join(json.dumps({"prompt": p, "completion": letter * 40})
                          for p in ["Tell me", "Hello", "Say", "Write"] * 3)
        file_id = client.post("/v1/files", files={"file": (f"{letter}.jsonl", lines.encode())},
                              data={"purpose": "fine-tune"}).json()["id"]
        job = client.post("/v1/fine_tuning/jobs", json={
            "model": BASE, "training_file": file_id, "suffix": letter, "seed": 1,
            "hyperparameters": {"batch_size": 4, "max_steps": 20, "learning_rate": 0.02}})
        jobs.append(job.json()["id"])
    models = []
    for job_id in jobs:
        while (job := client.get(f"/v1/fine_tuning/jobs/{job_id}").json())["status"] not in (
                "succeeded", "failed", "cancelled"):
            time.sleep(0.5)
        assert job["status"] == "succeeded", job
        models.append(job["fine_tuned_model"])
    return models


def download(client: httpx.Client, model: str, into: Path) -> Path:
    """The model's adapter, unpacked into ``into``; its folder."""
    archive = client.get(f"/v1/models/{model}/content", params={"format": "adapter"})
    with tarfile.open(fileobj=io.BytesIO(archive.content)) as tar:
        tar.extractall(into, filter="data")
    (folder,) = {p.parent for p in into.rglob("adapter_config.json")}
    return folder


class VllmServer:
    """vLLM's own OpenAI server on the base, started as alallo starts it."""

    def __init__(self, model_dir: Path, log: Path) -> None:
        settings = Settings(data_dir=log.parent)
        environment = VllmEnvironment(settings.vllm_venv or default_venv())
        with socket_port() as port:
            self.url = f"http://127.0.0.1:{port}"
            command = [*server_command(environment, settings, model_dir, BASE, 16),
                       "--host", "127.0.0.1", "--port", str(port)]
        self.process = subprocess.Popen(command, stdout=log.open("wb"),
                                        stderr=subprocess.STDOUT, env=server_env(settings),
                                        start_new_session=True)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"vLLM stopped; see {log}"
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.5)
        raise RuntimeError("vLLM did not start in 600 s")

    def load(self, name: str, adapter: Path) -> None:
        answer = httpx.post(f"{self.url}/v1/load_lora_adapter",
                            json={"lora_name": name, "lora_path": str(adapter)}, timeout=120)
        assert answer.status_code == 200, answer.text

    def stop(self) -> None:
        os.killpg(self.process.pid, 9)
        self.process.wait()


class socket_port:
    """A free port on 127.0.0.1 (``with socket_port() as port``)."""

    def __enter__(self) -> int:
        import socket
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return int(probe.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        pass


_TEXT = re.compile(rb'"text": ?"[^"]')
"""A chunk with text (a completion's piece that is not empty)."""
_USAGE = re.compile(rb'"usage": ?\{')
"""The usage chunk (vLLM writes JSON without spaces, alallo's transformers engine with)."""


async def one(client: httpx.AsyncClient, model: str) -> tuple[float, int]:
    """One streamed request: seconds to its first text, completion tokens. The stream is
    read as bytes and only its usage chunk parsed, so that the client costs both sides
    little of the two cores they share."""
    started = time.perf_counter()
    first: float | None = None
    tokens = 0
    body = b""
    async with client.stream("POST", "/v1/completions", json={
            "model": model, "prompt": PROMPT, "max_tokens": MAX_TOKENS, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}) as response:
        assert response.status_code == 200, await response.aread()
        async for data in response.aiter_raw():
            if first is None and _TEXT.search(data):
                first = time.perf_counter() - started
            if _USAGE.search(data) or body:
                body += data
    for line in body.split(b"\n"):
        if _USAGE.search(line):
            tokens = json.loads(line.removeprefix(b"data: "))["usage"]["completion_tokens"]
    assert first is not None and tokens > 0
    return first, tokens


async def round_(url: str, headers: dict[str, str], models: list[str], concurrency: int,
                 requests: int) -> tuple[float, list[float]]:
    """``requests`` requests, ``concurrency`` at once: tokens/s and each first-token time."""
    firsts: list[float] = []
    total = 0
    queue = list(range(requests))
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=600,
                                 limits=limits) as client:
        async def worker() -> None:
            nonlocal total
            while queue:
                index = queue.pop()
                first, tokens = await one(client, models[index % len(models)])
                firsts.append(first)
                total += tokens

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(worker)
        elapsed = time.perf_counter() - started
    return total / elapsed, firsts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds a side instead of 6")
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    rounds = 2 if args.quick else 6
    env = {"ALALLO_SERVING_ENGINE": "auto", "ALALLO_MAX_CONCURRENT_JOBS": "4",
           "ALALLO_INFERENCE_MAX_MODELS": "4"}  # a worker per model on transformers
    rates: dict[tuple[str, int], list[float]] = {}
    cpu: dict[tuple[str, int], list[float]] = {}
    """CPU ms per 1,000 tokens of the server in front of the engine (alallo's; vLLM's own
    API server), by side and concurrency."""
    firsts: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="alallo-bench-serving-") as scratch_dir:
        scratch = Path(scratch_dir)
        with BenchServer(scratch / "data", env) as server, httpx.Client(
                base_url=server.url, headers=server.headers, timeout=600) as client:
            models = train(client)
            adapters = [download(client, m, scratch / f"adapter-{i}")
                        for i, m in enumerate(models)]
        shutil.copytree(scratch / "data", scratch / "copy")
        vllm = VllmServer(scratch / "data" / "models" / BASE.replace("/", "--"),
                          scratch / "vllm.log")
        engines: dict[str, int] = {}
        try:
            for model, adapter in zip(models, adapters, strict=True):
                vllm.load(model, adapter)
            with BenchServer(scratch / "data", env) as alallo, BenchServer(
                    scratch / "copy", {**env, "ALALLO_SERVING_ENGINE": "transformers"}
                    ) as transformers:
                sides = {"alallo": (alallo.url, alallo.headers), "vllm": (vllm.url, {}),
                         "transformers": (transformers.url, transformers.headers)}
                for name, (url, headers) in sides.items():  # loads the engines: not timed
                    trio.run(round_, url, headers, models, 1, 4)  # transformers' workers
                    trio.run(round_, url, headers, models, 16, 16)  # and vLLM's engine
                engines = {"alallo": engine_group(scratch / "data"),
                           "vllm": os.getpgid(vllm.process.pid)}
                fronts = {"alallo": psutil.Process(alallo.process.pid),  # what each side puts
                          "vllm": psutil.Process(vllm.process.pid)}  # before the engine
                for concurrency in LEVELS:
                    requests = max(8, 2 * concurrency)
                    for _ in range(rounds):
                        for name, (url, headers) in sides.items():
                            if name == "transformers" and concurrency > 1:
                                continue  # one request at a time per model: not a peer here
                            alone(name, engines)
                            spent = cpu_s(fronts.get(name))
                            started = time.perf_counter()
                            rate, times = trio.run(round_, url, headers, models, concurrency,
                                                   requests)
                            if name in fronts:
                                tokens = rate * (time.perf_counter() - started)
                                cpu.setdefault((name, concurrency), []).append(
                                    (cpu_s(fronts[name]) - spent) / tokens * 1e6)
                            rates.setdefault((name, concurrency), []).append(rate)
                            firsts.setdefault((name, concurrency), []).extend(times)
        finally:
            alone(None, engines)
            vllm.stop()
    result = []
    for concurrency in LEVELS:
        ours = statistics.median(rates[("alallo", concurrency)])
        theirs = statistics.median(rates[("vllm", concurrency)])
        if concurrency == 1:
            on_transformers = statistics.median(rates[("transformers", 1)])
            result.append(row("serving: 4 LoRA models, 1 request at a time (vs better of "
                              "vLLM, transformers)", ours, "t/s", max(theirs, on_transformers),
                              1.0))
            result.append(row("serving: 1 at a time, vLLM's server (vs alallo's transformers "
                              "engine)", theirs, "t/s", on_transformers, None))
        else:
            result.append(row(f"serving: 4 LoRA models, {concurrency} at once (vs vLLM)",
                              ours, "t/s", theirs, 0.9))
        if concurrency > 1:
            result.append(row(
                f"serving: CPU ms per 1k tokens, alallo's server in front of vLLM's, "
                f"{concurrency} at once (vs vLLM's API server)",
                statistics.median(cpu[("alallo", concurrency)]), "ms",
                statistics.median(cpu[("vllm", concurrency)]), None))
        for q, label in ((50, "p50"), (99, "p99")):
            mine = percentile(firsts[("alallo", concurrency)], q) * 1000
            base = percentile(firsts[("vllm", concurrency)], q) * 1000
            result.append(row(f"serving: first token {label}, {concurrency} at once (vs vLLM)",
                              mine, "ms", base, None))
    return report(result, args.json)


def cpu_s(process: psutil.Process | None) -> float:
    """CPU seconds ``process`` and its threads have used (0 for None)."""
    if process is None:
        return 0.0
    times = process.cpu_times()
    return float(times.user + times.system)


def engine_group(data: Path) -> int:
    """The process group of the vLLM engine the bench server of ``data`` started."""
    models = str(data / "models")
    for process in psutil.process_iter(["cmdline"]):
        command = process.info["cmdline"] or []
        if "vllm.entrypoints.openai.api_server" in command and \
                any(part.startswith(models) for part in command):
            return os.getpgid(process.pid)
    raise RuntimeError("alallo started no vLLM engine")


def alone(side: str | None, engines: dict[str, int]) -> None:
    """Let only ``side``'s vLLM engine run (SIGCONT), the others' stopped (SIGSTOP): an
    engine's CPU worker busy-polls a core even idle, so on two cores an engine of the other
    side would take half of the machine from the side measured. ``None``: all run again."""
    for name, group in engines.items():
        os.killpg(group, signal.SIGCONT if side in (None, name) else signal.SIGSTOP)
    time.sleep(0.5)  # a stopped worker leaves the core; one continued takes it back


def percentile(values: list[float], q: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


if __name__ == "__main__":
    sys.exit(main())
