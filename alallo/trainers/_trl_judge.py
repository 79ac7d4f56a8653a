"""The judge of a reinforcement job's ``score_model`` graders: the model the grader names,
loaded in the trainer beside the one it trains, answering the grader's messages with
transformers' ``generate`` (issue 34).

Why in the trainer rather than through the server's chat completions, as ``graders/run``
asks: a trainer holds no key of the account (keys are never stored in the clear, and every
trainer runs as one user), and a judge here needs no network from a trainer's node. The
judge is a model the account may use (checked at create, resolved again at each launch: a
base model, or a fine-tuned one as its LoRA adapter on its base), the one ``graders/run``
would ask under that name; its answer is parsed by the same code
(:func:`alallo.trainers.graders.grade`).

Sampling follows the grader's ``sampling_params``, as the chat completions request they make
(:meth:`~alallo.trainers.graders.SamplingParams.as_chat`): ``temperature`` (default 1; 0 is
greedy), ``top_p``, ``max_completion_tokens`` (default 64, within the judge's context) and
``seed``. The judge's draws come
from a fork of torch's random state, so they leave the training's own random stream as it
was.

Part of :mod:`alallo.trainers.trl`; imported in the trainer's process only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._protocol import JudgeModel, Log
from ._trl_report import ProtocolOut
from .tiny import TINY_MODELS, build_tiny

__all__ = ["LocalJudge"]

_DEFAULT_ANSWER_TOKENS = 64


class LocalJudge:
    """``judge(model, messages, sampling_params) -> answer`` over local models
    (:data:`alallo.trainers.graders.Judge`).

    Args:
        models: each judge's name and files (``TrainerConfig.judges``).
        out: where the log line of each judge's loading goes.
        device: the torch device the judges run on (the trained model's).
    """

    def __init__(self, models: dict[str, JudgeModel], out: ProtocolOut, device: Any) -> None:
        self._models = models
        self._out = out
        self._device = device
        self._loaded: dict[str, tuple[Any, Any]] = {}

    def __call__(self, model: str, messages: list[dict[str, Any]],
                 params: dict[str, Any]) -> str:
        import torch

        judge, tokenizer = self._load(model)
        prompt = _prompt(tokenizer, messages)
        ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).to(self._device)
        room = int(getattr(judge.config, "max_position_embeddings", 0) or 0) \
            - ids["input_ids"].shape[1]
        wanted = int(params.get("max_completion_tokens") or _DEFAULT_ANSWER_TOKENS)
        answer_tokens = max(1, min(wanted, room)) if room > 0 else wanted
        temperature = float(params.get("temperature", 1.0))
        sampling: dict[str, Any] = ({"do_sample": False} if temperature <= 0 else {
            "do_sample": True, "temperature": temperature,
            "top_p": float(params.get("top_p", 1.0)), "top_k": 0})
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            if params.get("seed") is not None:
                torch.manual_seed(int(params["seed"]))
            output = judge.generate(**ids, max_new_tokens=answer_tokens,
                                    pad_token_id=tokenizer.pad_token_id
                                    or tokenizer.eos_token_id, **sampling)
        return str(tokenizer.decode(output[0, ids["input_ids"].shape[1]:],
                                    skip_special_tokens=True))

    def _load(self, name: str) -> tuple[Any, Any]:
        if name not in self._loaded:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            files = self._models.get(name)
            if files is None:  # resolved at launch: a grader changed behind the job's back
                raise RuntimeError(f"no judge {name} was given to this run")
            if files.tiny in TINY_MODELS and not (Path(files.model) / "config.json").is_file():
                build_tiny(files.tiny, Path(files.model))
            self._out(Log(text=f"Loading {name} to judge the answers (score_model)"))
            tokenizer = AutoTokenizer.from_pretrained(files.model)
            judge = AutoModelForCausalLM.from_pretrained(files.model)
            if files.adapter is not None:  # a fine-tuned model: its LoRA adapter on its base
                from peft import PeftModel

                judge = PeftModel.from_pretrained(judge, files.adapter)
            judge = judge.to(self._device).eval()
            self._loaded[name] = (judge, tokenizer)
        return self._loaded[name]


def _prompt(tokenizer: Any, messages: list[dict[str, Any]]) -> str:
    """The messages as the judge's chat template writes them, ready for its answer; joined
    as lines where it has none."""
    plain = [{"role": str(m.get("role", "user")), "content": str(m.get("content", ""))}
             for m in messages]
    if tokenizer.chat_template:
        return str(tokenizer.apply_chat_template(plain, tokenize=False,
                                                 add_generation_prompt=True))
    return "\n".join(m["content"] for m in plain) + "\n"
