"""Completions: first-token latency and tokens/s of the tiny model through alallo's
``/v1/completions`` (streamed over HTTP), against ``transformers`` generate called directly
in this process on the same weights, in the same run.

Run: ``.venv/bin/python bench/bench_inference.py`` (``--quick``: 3 requests a side
instead of 10; ``--json FILE`` appends the rows to FILE). Both sides generate greedily,
``max_tokens`` 200 after the same prompt, on one CPU thread (what the worker uses for a
model this small), with the model loaded before timing starts (the first request loads
it into the worker and is not timed). Tokens/s counts the completion's tokens over the
request's whole time; first token is the time to the first piece of text (the direct side
is timed to its streamer's first piece). Target: alallo ≥ 0.8× the direct tokens/s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _results import report, row
from _server import BenchServer

PROMPT = "Once upon a time"
MAX_TOKENS = 200


def direct(model_dir: Path, runs: int) -> tuple[list[float], list[float]]:
    """``transformers`` generate in this process: first-piece seconds and tokens/s."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.generation.streamers import BaseStreamer

    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()

    class FirstPiece(BaseStreamer):
        def __init__(self) -> None:
            self.calls = 0
            self.at: float | None = None

        def put(self, value: Any) -> None:
            self.calls += 1
            if self.calls == 2 and self.at is None:  # the first call is the prompt
                self.at = time.perf_counter()

        def end(self) -> None:
            pass

    firsts, rates = [], []
    for _ in range(runs + 1):
        started = time.perf_counter()
        streamer = FirstPiece()
        inputs = tokenizer(PROMPT, return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(**inputs, max_new_tokens=MAX_TOKENS, do_sample=False,
                                 streamer=streamer, pad_token_id=tokenizer.eos_token_id)
        seconds = time.perf_counter() - started
        tokens = out.shape[1] - inputs["input_ids"].shape[1]
        assert streamer.at is not None
        firsts.append(streamer.at - started)
        rates.append(tokens / seconds)
    return firsts[1:], rates[1:]  # the first run warms the caches


def through_alallo(server: BenchServer, runs: int) -> tuple[list[float], list[float]]:
    """Streamed ``/v1/completions``: first-piece seconds and tokens/s."""
    body = {"model": "alallo/tiny-gpt2", "prompt": PROMPT, "max_tokens": MAX_TOKENS,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    firsts, rates = [], []
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=300) as client:
        for _ in range(runs + 1):
            started = time.perf_counter()
            first: float | None = None
            tokens = 0
            with client.stream("POST", "/v1/completions", json=body) as response:
                response.raise_for_status()
                for line in response.iter_lines():
                    if not line.startswith("data: {"):
                        continue
                    chunk = json.loads(line.removeprefix("data: "))
                    if first is None and chunk["choices"] and chunk["choices"][0]["text"]:
                        first = time.perf_counter() - started
                    if chunk.get("usage"):
                        tokens = chunk["usage"]["completion_tokens"]
            seconds = time.perf_counter() - started
            assert first is not None and tokens > 0
            firsts.append(first)
            rates.append(tokens / seconds)
    return firsts[1:], rates[1:]  # the first request loads the model into its worker


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 requests a side instead of 10")
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    runs = 3 if args.quick else 10
    with tempfile.TemporaryDirectory(prefix="alallo-bench-inference-") as scratch:
        with BenchServer(Path(scratch) / "data") as server:
            served_first, served_rate = through_alallo(server, runs)
        direct_first, direct_rate = direct(
            Path(scratch) / "data" / "models" / "alallo--tiny-gpt2", runs)
    rate, base_rate = statistics.median(served_rate), statistics.median(direct_rate)
    first, base_first = statistics.median(served_first), statistics.median(direct_first)
    result = [
        row("inference: tiny model tokens/s, streamed (vs transformers)", rate, "t/s",
            base_rate, 0.8),
        row("inference: first token (vs transformers generate)", first * 1000, "ms",
            base_first * 1000, None),
    ]
    return report(result, args.json)


if __name__ == "__main__":
    sys.exit(main())
