"""What the transformers worker (:mod:`alallo.trainers.generate`, which alone imports this:
torch's home, as ``_trl_*`` are trl.py's) does to each step's logits and with its tokens:
OpenAI's ``logit_bias`` and penalties, log-probabilities, and a token's text and bytes as
OpenAI shows them."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["Logprobs", "Penalties", "token_text"]


class Penalties:
    """OpenAI's ``logit_bias``, ``presence_penalty`` and ``frequency_penalty`` on the logits
    of each step (a ``transformers`` logits processor), as OpenAI states them ("Parameter
    details", Text generation guide) and vLLM applies them: ``logit[j] += bias[j] -
    count[j] * frequency - (count[j] > 0) * presence``, ``count[j]`` the times token ``j`` was
    generated so far (the prompt's tokens not counted).

    Args:
        bias: token id → bias (-100 to 100).
        presence, frequency: the penalties (-2 to 2).
        prompt_tokens: where the generated tokens start in ``input_ids``.
    """

    def __init__(self, bias: dict[int, float], presence: float, frequency: float,
                 prompt_tokens: int) -> None:
        self.bias = bias
        self.presence = presence
        self.frequency = frequency
        self.prompt_tokens = prompt_tokens

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.bias:
            ids = torch.tensor(list(self.bias), device=scores.device)
            scores[:, ids] += torch.tensor(list(self.bias.values()), device=scores.device,
                                           dtype=scores.dtype)
        generated = input_ids[:, self.prompt_tokens:]
        if (self.presence or self.frequency) and generated.shape[1]:
            counts = torch.zeros_like(scores).scatter_add_(
                1, generated, torch.ones_like(generated, dtype=scores.dtype))
            scores -= counts * self.frequency + (counts > 0).to(scores.dtype) * self.presence
        return scores


class Logprobs:
    """Keeps each step's log-probabilities on ``generation.step_logprobs`` (a ``transformers``
    logits processor placed first: the model's own, before ``logit_bias``, penalties and
    temperature, as vLLM's ``raw_logprobs``)."""

    def __init__(self, generation: Any) -> None:
        self.generation = generation

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        self.generation.step_logprobs = torch.log_softmax(scores[0].float(), dim=-1)
        return scores


def _byte_level() -> dict[str, int]:
    """GPT-2's byte-level alphabet, character → byte (``bytes_to_unicode`` of OpenAI's
    gpt-2 ``encoder.py``, which byte-level BPE tokenizers share: GPT-2, Llama 3, Qwen)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


_BYTE_LEVEL = _byte_level()


def token_text(tokenizer: Any, token_id: int) -> dict[str, Any]:
    """A token's ``token`` and ``bytes`` as OpenAI gives them: its text, or ``bytes:\\xNN``
    for a token that is part of a character (its bytes then say which; joined, the bytes of
    an answer's tokens are its text)."""
    text = tokenizer.decode([token_id])
    if "\ufffd" not in text:
        return {"token": text, "bytes": list(text.encode())}
    piece = tokenizer.convert_ids_to_tokens(token_id)
    if (hexadecimal := re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece)) is not None:
        raw = bytes([int(hexadecimal[1], 16)])  # SentencePiece's byte fallback
    elif all(c in _BYTE_LEVEL for c in piece):
        raw = bytes(_BYTE_LEVEL[c] for c in piece)
    else:
        raw = text.encode()
    return {"token": "bytes:" + "".join(f"\\x{b:02x}" for b in raw), "bytes": list(raw)}
