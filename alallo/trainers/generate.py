"""``python -m alallo.trainers.generate --model DIR [--adapter DIR] [--tiny NAME]``: one loaded
model answering generation requests, one at a time, as JSON lines on stdin and stdout.

The server's inference worker (:mod:`alallo.runtime._inference`) starts one such process per
loaded model, so that ``transformers`` and torch never run in the server's event loop. It
loads the model (with the LoRA adapter applied by ``peft`` when one is given; bf16 on a GPU
that has it), then says ``{"ready": {"context_length": N, "chat_template": bool,
"device": "cpu"|"cuda"}}`` or ``{"error": "..."}`` and exits 1.

Requests (stdin), one per line::

    {"id": "chatcmpl-…", "messages": [{"role", "content"}, ...] | null, "prompt": str | null,
     "max_tokens": int | null, "limit": int, "temperature": float, "top_p": float,
     "stop": [str], "seed": int | null}

(``max_tokens`` null: as many as the context leaves, up to ``limit``.)
    {"cancel": "chatcmpl-…"}

Answers (stdout): ``{"id", "index": i, "text": "..."}`` as choice ``i``'s text is generated
(never the part of it that may begin a stop sequence; with ``"logprobs"``, the pieces' tokens in
OpenAI's chat shape: ``[{"token", "logprob", "bytes", "top_logprobs"}, ...]``), the ``n``
choices one after the other;
then ``{"id", "done": {"choices": [{"index", "finish_reason": "stop"|"length"}, ...],
"prompt_tokens": n, "completion_tokens": m}}`` (m: of all choices), or ``{"id", "error":
"...", "param": ...}``.
Messages go through the tokenizer's chat template (``apply_chat_template`` with the
generation prompt). End of stdin ends the process (after the requests it holds): it never outlives the server.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ._env import quiet_process
from ._generate_logits import Logprobs, Penalties, token_text

__all__ = ["main", "safe_end", "sampling_options"]

_write_lock = threading.Lock()

PIECE_INTERVAL_S = 0.01
"""Text is sent at most this often (s): the tokens of a fast model go in pieces of a few,
a slow model's one by one; the first piece goes at once."""


def _say(**message: Any) -> None:
    with _write_lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def safe_end(text: str, stops: list[str]) -> tuple[int, bool]:
    """How much of ``text`` may be sent, and whether a stop sequence was reached.

    Returns ``(end, stopped)``: ``text[:end]`` holds no stop sequence and does not end
    with the beginning of one (that part waits for the next tokens); ``stopped`` when a
    stop sequence occurs, ``end`` then being where the first one starts.
    """
    found = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    if found:
        return min(found), True
    end = len(text)
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:size]):
                end = min(end, len(text) - size)
                break
    return end, False


def sampling_options(request: dict[str, Any]) -> dict[str, Any]:
    """``model.generate``'s sampling arguments for a request's ``temperature`` (default 1)
    and ``top_p`` (default 1): greedy at temperature 0, else sampling from the whole
    vocabulary as OpenAI's API and vLLM do. ``top_k`` is 0 (off) in so many words:
    transformers otherwise keeps only the 50 likeliest tokens (its default ``top_k``,
    ``GenerationConfig._get_default_generation_params``), which no request asked for."""
    temperature = float(request.get("temperature", 1.0))
    if temperature <= 0:
        return {"do_sample": False}
    return {"do_sample": True, "temperature": temperature, "top_k": 0,
            "top_p": float(request.get("top_p", 1.0))}


class _Generation:
    """One request's state, fed the generated token ids (``transformers``' streamer
    interface: ``put`` and ``end``) and asked by the stopping criterion whether to stop.

    Text is decoded incrementally, as Hugging Face's text-generation-inference does
    (``decode_token``): each new token decodes a window from the token before the last
    piece sent, and the piece is what that window adds, so a step costs a few tokens'
    decoding however long the answer grows, and a character split across tokens waits
    for its last byte. Pieces go out at most every :data:`PIECE_INTERVAL_S`.
    """

    def __init__(self, request_id: str, tokenizer: Any, stops: list[str],
                 cancelled: set[str], index: int = 0, top: int | None = None) -> None:
        self.id = request_id
        self.index = index
        self._top = top
        """None: no logprobs; else the chosen token's and the ``top`` likeliest each step."""
        self.step_logprobs: Any = None
        """The log-probabilities of the step under way (set by :class:`_Logprobs`)."""
        self._logprobs: list[dict[str, Any]] = []  # of the tokens not sent yet
        self._tokenizer = tokenizer
        self._stops = stops
        self._longest_stop = max((len(s) for s in stops), default=0)
        self._cancelled = cancelled
        self._prompt_seen = False
        self._ids: list[int] = []
        self._prefix = self._read = 0  # the decode window: ids[prefix:read] was read
        self.text = ""  # decoded so far
        self.sent = 0  # how much of it was sent
        self._last_sent = -PIECE_INTERVAL_S  # the first piece goes at once
        self.stopped = False

    def put(self, value: Any) -> None:
        if not self._prompt_seen:  # generate() first hands over the prompt
            self._prompt_seen = True
            return
        self._ids += value.reshape(-1).tolist()
        if self._top is not None and self.step_logprobs is not None \
                and self._ids[-1] not in self._tokenizer.all_special_ids:
            self._logprobs.append(self._entry(self._ids[-1]))
        self._decode(final=False)
        self._send(final=False)

    def end(self) -> None:
        self._decode(final=True)
        self._send(final=True)

    def should_stop(self) -> bool:
        return self.stopped or self.id in self._cancelled

    def _decode(self, final: bool) -> None:
        decode = self._tokenizer.decode
        before = decode(self._ids[self._prefix:self._read], skip_special_tokens=True)
        now = decode(self._ids[self._prefix:], skip_special_tokens=True)
        if len(now) > len(before) and (final or not now.endswith("\ufffd")):
            self.text += now[len(before):]
            self._prefix, self._read = self._read, len(self._ids)

    def _send(self, final: bool) -> None:
        if self.stopped:
            return
        since = max(0, self.sent - self._longest_stop)
        end, stopped = safe_end(self.text[since:], self._stops)
        end = len(self.text) if final and not stopped else since + end
        self.stopped = stopped
        now = time.monotonic()
        if end > self.sent and (final or stopped or now - self._last_sent >= PIECE_INTERVAL_S):
            piece: dict[str, Any] = {"index": self.index, "text": self.text[self.sent:end]}
            if self._top is not None:
                piece["logprobs"], self._logprobs = self._logprobs, []
            _say(id=self.id, **piece)
            self.sent, self._last_sent = end, now

    def _entry(self, token: int) -> dict[str, Any]:
        """The token just generated, in OpenAI's chat shape: ``{"token", "logprob", "bytes",
        "top_logprobs": [{"token", "logprob", "bytes"}, ...]}``."""
        import torch

        logprobs = self.step_logprobs
        top = torch.topk(logprobs, self._top) if self._top else None
        return {**token_text(self._tokenizer, token), "logprob": float(logprobs[token]),
                "top_logprobs": [{**token_text(self._tokenizer, int(i)), "logprob": float(v)}
                                 for v, i in zip(*top, strict=True)] if top is not None else []}


class _Model:
    """The loaded model and tokenizer, and how to run one request on them."""

    def __init__(self, model_dir: Path, adapter: Path | None, tiny: str | None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if tiny and not (model_dir / "config.json").is_file():
            from alallo.trainers.tiny import build_tiny
            build_tiny(tiny, model_dir)
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = (torch.bfloat16 if self.device == "cuda" and torch.cuda.is_bf16_supported()
                 else torch.float32)
        tokenizer_dir = adapter if adapter and (adapter / "tokenizer_config.json").is_file() \
            else model_dir
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        model: Any = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
        if adapter is not None:
            from peft import PeftModel
            model = PeftModel.from_pretrained(model, adapter)
        self.model: Any = model.to(self.device).eval()
        if self.device == "cpu" and "OMP_NUM_THREADS" not in os.environ \
                and model.num_parameters() < 50_000_000:
            torch.set_num_threads(1)  # small matrices: one thread is as fast, and shares well
        config = model.config
        self.vocabulary = int(model.get_output_embeddings().weight.shape[0])
        """Token ids the model scores (``logit_bias`` keys must be below it)."""
        self.context_length = int(getattr(config, "max_position_embeddings", None)
                                  or getattr(config, "n_positions", None)
                                  or self.tokenizer.model_max_length)

    def run(self, request: dict[str, Any], cancelled: set[str]) -> None:
        import torch
        from transformers import LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

        request_id = request["id"]
        if request.get("messages") is not None:
            if not self.tokenizer.chat_template:
                _say(id=request_id, param="messages", error=(
                    "this model has no chat template; send a prompt to /v1/completions"))
                return
            text = self.tokenizer.apply_chat_template(
                request["messages"], tokenize=False, add_generation_prompt=True)
            inputs = self.tokenizer(text, return_tensors="pt", add_special_tokens=False)
        else:
            inputs = self.tokenizer(request["prompt"], return_tensors="pt")
        prompt_tokens = int(inputs["input_ids"].shape[1])
        room = self.context_length - prompt_tokens
        field = "messages" if request.get("messages") is not None else "prompt"
        if room <= 0:
            _say(id=request_id, param=field, error=(
                f"this model's context is {self.context_length} tokens, and the prompt alone "
                f"is {prompt_tokens}"))
            return
        asked = request.get("max_tokens")
        if asked is None:  # as many as the context leaves, up to the server's limit
            max_tokens = min(int(request.get("limit") or room), room)
        elif int(asked) > room:
            _say(id=request_id, param="max_tokens", error=(
                f"this model's context is {self.context_length} tokens, but "
                f"{prompt_tokens + int(asked)} were asked for ({prompt_tokens} in the prompt, "
                f"{asked} to generate)"))
            return
        else:
            max_tokens = int(asked)
        bias = {int(token): float(value) for token, value in
                (request.get("logit_bias") or {}).items()}
        if (unknown := [t for t in bias if not 0 <= t < self.vocabulary]):
            _say(id=request_id, param="logit_bias", error=(
                f"token {unknown[0]} is not in this model's vocabulary (0 to "
                f"{self.vocabulary - 1})"))
            return
        penalties = [Penalties(bias, float(request.get("presence_penalty") or 0),
                                float(request.get("frequency_penalty") or 0), prompt_tokens)] \
            if bias or request.get("presence_penalty") or request.get("frequency_penalty") \
            else []
        if request.get("seed") is not None:
            torch.manual_seed(int(request["seed"]))
        sampling = sampling_options(request)
        pad = self.tokenizer.pad_token_id
        top = request.get("logprobs")

        class _Stop(StoppingCriteria):  # its text reached a stop sequence, or it was cancelled
            def __init__(self, generation: _Generation) -> None:
                self.generation = generation

            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> bool:
                return self.generation.should_stop()

        choices, generated = [], 0
        for index in range(int(request.get("n") or 1)):  # one after the other, as they stream
            generation = _Generation(request_id, self.tokenizer, list(request.get("stop") or []),
                                     cancelled, index, None if top is None else int(top))
            stop = _Stop(generation)
            with torch.inference_mode():
                output = self.model.generate(
                    **inputs.to(self.device), max_new_tokens=max_tokens, streamer=generation,
                    stopping_criteria=StoppingCriteriaList([stop]),
                    logits_processor=LogitsProcessorList(
                        ([Logprobs(generation)] if top is not None else []) + penalties),
                    pad_token_id=pad if pad is not None else self.tokenizer.eos_token_id,
                    **sampling)
            completion_tokens = int(output.shape[1]) - prompt_tokens
            eos = self.tokenizer.eos_token_id
            ended = generation.stopped or (completion_tokens and int(output[0, -1]) == eos)
            choices.append({"index": index, "finish_reason":
                            "stop" if ended or completion_tokens < max_tokens else "length"})
            generated += completion_tokens
            if request_id in cancelled:
                break
        _say(id=request_id, done={"choices": choices, "prompt_tokens": prompt_tokens,
                                  "completion_tokens": generated})


def _read_requests(requests: queue.Queue[dict[str, Any] | None], cancelled: set[str]) -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "cancel" in message:
            cancelled.add(str(message["cancel"]))
        else:
            requests.put(message)
    requests.put(None)  # the server let go of this model, or is gone


def main(argv: list[str] | None = None) -> int:
    """Load the model, say ready, answer requests until stdin ends."""
    parser = argparse.ArgumentParser(prog="alallo.trainers.generate")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--adapter", type=Path)
    parser.add_argument("--tiny", metavar="NAME", help="build the built-in tiny model NAME "
                        "into --model when it is not there yet")
    args = parser.parse_args(argv)
    # Offline, as every trainer: the model is a local folder, and nothing imported may fetch
    # code from the hub (bitsandbytes asks it for a CPU kernel on AVX-512 BF16 machines).
    quiet_process()
    try:
        from alallo.trainers._trl_model import quiet_libraries
        quiet_libraries()
        model = _Model(args.model, args.adapter, args.tiny)
    except (OSError, ValueError, ImportError) as exc:
        _say(error=f"{type(exc).__name__}: {exc}")
        return 1
    _say(ready={"context_length": model.context_length,
                "chat_template": bool(model.tokenizer.chat_template), "device": model.device})
    requests: queue.Queue[dict[str, Any] | None] = queue.Queue()
    cancelled: set[str] = set()
    threading.Thread(target=_read_requests, args=(requests, cancelled), daemon=True).start()
    while True:
        request = requests.get()
        if request is None:
            return 0
        try:
            model.run(request, cancelled)
        except Exception as exc:  # one request's fault (out of memory, a bad template)
            _say(id=request.get("id"), error=f"{type(exc).__name__}: {exc}")
        cancelled.discard(str(request.get("id")))


if __name__ == "__main__":
    sys.exit(main())
