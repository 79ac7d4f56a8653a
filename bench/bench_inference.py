"""Completions: first-token latency and tokens/s of the tiny model through alallo's
``/v1/completions`` (streamed over HTTP), against ``transformers`` generate called directly
in this process on the same weights, in the same run.

Run: ``.venv/bin/python bench/bench_inference.py`` (``--quick``: 10 requests a side
instead of 20: the median of 5 swung 0.77-0.88 on a noisy 2-core VM; ``--json FILE``
appends the rows to FILE). The two sides run in turn, a request and a direct generation,
so that both meet the same machine. Both generate greedily, ``max_tokens`` 200 after the
same prompt, on one CPU thread (what the worker uses for a model this small), with the
model loaded before timing starts (the first request loads it into the worker and is not
timed). Tokens/s counts the completion's tokens over the
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


class Direct:
    """``transformers`` generate in this process, on the model the server serves."""

    def __init__(self, model_dir: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(1)
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir).eval()

    def run(self) -> tuple[float, float]:
        """One generation: seconds to the first piece, and tokens/s."""
        from transformers.generation.streamers import BaseStreamer

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

        started = time.perf_counter()
        streamer = FirstPiece()
        inputs = self.tokenizer(PROMPT, return_tensors="pt")
        with self.torch.inference_mode():
            out = self.model.generate(**inputs, max_new_tokens=MAX_TOKENS, do_sample=False,
                                      streamer=streamer,
                                      pad_token_id=self.tokenizer.eos_token_id)
        seconds = time.perf_counter() - started
        tokens = out.shape[1] - inputs["input_ids"].shape[1]
        assert streamer.at is not None
        return streamer.at - started, tokens / seconds


def through_alallo(client: httpx.Client) -> tuple[float, float]:
    """One streamed ``/v1/completions``: seconds to the first piece of text, and tokens/s."""
    body = {"model": "alallo/tiny-gpt2", "prompt": PROMPT, "max_tokens": MAX_TOKENS,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
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
    return first, tokens / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 requests a side instead of 20")
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    runs = 10 if args.quick else 20
    served_first, served_rate, direct_first, direct_rate = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="alallo-bench-inference-") as scratch:
        with BenchServer(Path(scratch) / "data") as server, httpx.Client(
                base_url=server.url, headers=server.headers, timeout=300) as client:
            through_alallo(client)  # loads the model into its worker: not timed
            direct = Direct(Path(scratch) / "data" / "models" / "alallo--tiny-gpt2")
            direct.run()  # warms the caches: not timed
            for _ in range(runs):  # in turn, so that both sides meet the same machine
                first, rate = through_alallo(client)
                served_first.append(first)
                served_rate.append(rate)
                first, rate = direct.run()
                direct_first.append(first)
                direct_rate.append(rate)
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
