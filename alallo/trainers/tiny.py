"""The built-in tiny models, built offline with random weights.

``alallo/tiny-gpt2`` is a GPT-2-shaped causal LM small enough to fine-tune on a
laptop CPU in seconds (two layers of width 64, about 130k parameters), so the
whole path from upload to a trained model can run in tests and demos with no
download. ``alallo/tiny-llama`` is Llama-shaped (two layers of width 128, four
heads of 32, about 360k parameters): vLLM serves LoRA adapters of Llama models
and not of GPT-2's, and its CPU attention needs heads of 32 or more (issue 33).

Its tokenizer is byte-level: the 256 byte symbols of GPT-2's
``bytes_to_unicode`` table are the vocabulary, with no merges, plus
``<|endoftext|>`` as the end-of-sequence and padding token. Every string
therefore tokenizes to one token per UTF-8 byte, and nothing needs training.
A small chat template makes ``messages`` data work too.

The GPT-2-shaped model starts as a writer of ASCII text: a byte that is none (a control
character but tab and newline, or one of 0x80 and above) starts 10 logits below the
others. Random weights alone make every byte about equally likely, and 160 of the 256 are
no text by themselves, so its answers were mojibake, after a short fine-tune too (issue 35;
``_prefer_text_bytes`` says how).

torch and transformers are imported inside :func:`build_tiny` only, so
importing this module (and calling :func:`ensure_model` on a path) stays cheap.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from transformers import GPT2LMHeadModel

__all__ = [
    "CHAT_TEMPLATE",
    "CONTEXT_LENGTH",
    "EOS_TOKEN",
    "TINY_GPT2",
    "TINY_LLAMA",
    "TINY_MODELS",
    "build_tiny",
    "build_tiny_gpt2",
    "byte_level_tokenizer",
    "ensure_model",
]

TINY_GPT2 = "alallo/tiny-gpt2"
"""The catalogue name of the built-in GPT-2-shaped model."""
TINY_LLAMA = "alallo/tiny-llama"
"""The catalogue name of the built-in Llama-shaped model."""
TINY_MODELS = (TINY_GPT2, TINY_LLAMA)
"""The built-in models: one tokenizer (byte-level) and chat template, 256 tokens of context."""

EOS_TOKEN = "<|endoftext|>"
"""End-of-sequence token; also the padding token (id 256)."""

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] }}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
    "{{ '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
"""Jinja chat template: ``<|role|>`` header lines; assistant turns end with EOS."""

_TEXT_BYTES = frozenset({*range(0x20, 0x7F), 0x09, 0x0A})
"""The bytes of ASCII text: the printable ones, tab and newline."""
_NOT_TEXT_LOGIT = -10.0
"""Where a built GPT-2 model's logit of a byte outside :data:`_TEXT_BYTES` starts, against
about 0 for the others: each is e^-10 (about 1/22000) as likely as a text byte."""
_PRIOR_SCALE = 10.0
"""The constant the final LayerNorm writes in its first dimension (:func:`_prefer_text_bytes`);
each byte's embedding there is its starting logit over it: 0, or -1 beside the others'
0.02. A larger one would make that -1 smaller, but a fine-tune moves each weight by
about its learning rate a step (Adam), so these logits would move that many times faster."""

_N_LAYER = 2
_N_HEAD = 2
_N_EMBD = 64
_N_POSITIONS = 256
CONTEXT_LENGTH = _N_POSITIONS
"""The model's context in tokens (its ``n_positions``)."""


def _bytes_to_unicode() -> dict[int, str]:
    # GPT-2's table (openai/gpt-2 encoder.py): printable bytes map to
    # themselves, the rest to code points from 256 up, so no byte becomes
    # whitespace or a control character in the vocabulary.
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table: dict[int, str] = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def build_tiny_gpt2(path: Path, *, seed: int = 0) -> Path:
    """Build ``alallo/tiny-gpt2`` into ``path`` (:func:`build_tiny`)."""
    return build_tiny(TINY_GPT2, path, seed=seed)


def build_tiny(name: str, path: Path, *, seed: int = 0) -> Path:
    """Build the tiny model ``name`` (one of :data:`TINY_MODELS`) and its tokenizer into
    ``path``, unless it exists.

    The model is built in a temporary sibling directory and renamed into
    place, so a reader never sees half a model and two processes building at
    once both end up with one complete directory (the loser of the rename
    discards its copy).

    Args:
        path: The model directory to create; its parent is created if needed.
        seed: Seed for the random weights: the same seed gives the same model.

    Returns:
        ``path``, holding ``config.json``, ``model.safetensors`` and the
        tokenizer files, loadable with ``AutoModelForCausalLM`` and
        ``AutoTokenizer``.

    Raises:
        OSError: The directory could not be written.
        ValueError: ``name`` is no built-in model.
    """
    if name not in TINY_MODELS:
        raise ValueError(f"no built-in model {name!r}: expected one of {TINY_MODELS}")
    if (path / "config.json").is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        _write_model(tmp, name, seed=seed)
        # Readable by all, as a model folder is: mkdtemp's 0700, and the 0600 transformers
        # writes model.safetensors with (a temporary file renamed), would hide the model from
        # the trainers of a root server (another user: an ACL entry is capped by the
        # file's group bits) when the server built it first, to count tokens or to serve it.
        tmp.chmod(0o755)
        for file in tmp.iterdir():
            file.chmod(0o644)
        try:
            os.rename(tmp, path)
        except OSError:
            # Someone else finished first (the target is a non-empty dir).
            if not (path / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def byte_level_tokenizer() -> Tokenizer:
    """The model's tokenizer (the ``tokenizers`` package's, no torch): one token per UTF-8
    byte, ``<|endoftext|>`` the special token :data:`EOS_TOKEN` (id 256). The model's
    ``tokenizer.json`` is this one saved; the server counts tokens with it before the
    model is built (:mod:`alallo.trainers._lengths`).

    Raises:
        ImportError: the ``tokenizers`` package is not installed (``alallo[train]``).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    byte_symbols = _bytes_to_unicode()
    vocab = {symbol: i for i, symbol in enumerate(byte_symbols[b] for b in range(256))}
    vocab[EOS_TOKEN] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([EOS_TOKEN])
    return backend


def _write_model(directory: Path, name: str, *, seed: int) -> None:
    import torch
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )

    backend = byte_level_tokenizer()
    eos_id = backend.token_to_id(EOS_TOKEN)
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=backend,
        eos_token=EOS_TOKEN,
        bos_token=EOS_TOKEN,
        pad_token=EOS_TOKEN,
        unk_token=None,
        model_max_length=_N_POSITIONS,
    )
    tokenizer.chat_template = CHAT_TEMPLATE

    ids = {"bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": eos_id}
    torch.manual_seed(seed)
    if name == TINY_LLAMA:
        model: GPT2LMHeadModel | LlamaForCausalLM = LlamaForCausalLM(LlamaConfig(
            vocab_size=backend.get_vocab_size(), hidden_size=2 * _N_EMBD,
            intermediate_size=4 * _N_EMBD, num_hidden_layers=_N_LAYER,
            num_attention_heads=4, num_key_value_heads=4,
            max_position_embeddings=_N_POSITIONS, tie_word_embeddings=True, **ids))
    else:
        model = GPT2LMHeadModel(GPT2Config(
            vocab_size=backend.get_vocab_size(), n_positions=_N_POSITIONS, n_embd=_N_EMBD,
            n_layer=_N_LAYER, n_head=_N_HEAD, **ids))
        _prefer_text_bytes(model)
    model.generation_config.pad_token_id = eos_id
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def _prefer_text_bytes(model: GPT2LMHeadModel) -> None:
    """Make the GPT-2 ``model`` (the byte-level vocabulary, token ``b`` the byte ``b``) start
    :data:`_NOT_TEXT_LOGIT` below for every byte outside :data:`_TEXT_BYTES`, ``<|endoftext|>``
    and the text bytes unchanged.

    Why: its logits are its tied embeddings (standard deviation 0.02, so norms near 0.16)
    against the final LayerNorm's output (norm near 8), within about ±1.3 of each other
    whatever comes before, so a random model writes control characters and lone bytes of
    0x80 and above (mojibake) five times in eight. Fine-tuning all the weights unlearns
    them slowly: fully trained on the sample for 240 to 360 steps, it still wrote such a
    byte in a quarter to a half of its answers of 64 tokens (docs/performance.md). A LoRA
    adapter cannot at all: it trains neither the embeddings nor the final LayerNorm, the
    two this range comes from.

    How: GPT-2's output layer has no bias, but the final LayerNorm has one. Its first
    dimension is made a constant (weight 0, bias :data:`_PRIOR_SCALE`), so each token's
    embedding in that dimension, times the constant, is a bias of its logit: 0 for text,
    ``_NOT_TEXT_LOGIT / _PRIOR_SCALE`` for the others. Both stay trainable, so a full
    fine-tune on other text (UTF-8 beyond ASCII) still learns to write it; an adapter
    hardly does. Llama's RMSNorm has no bias to carry this, so ``alallo/tiny-llama`` starts
    from its random weights as they are.
    """
    import torch

    not_text = torch.tensor([b not in _TEXT_BYTES for b in range(256)]
                            + [False] * (model.config.vocab_size - 256))
    with torch.no_grad():
        final_norm = model.transformer.ln_f
        final_norm.weight[0] = 0.0
        final_norm.bias[0] = _PRIOR_SCALE
        embedding = model.transformer.wte.weight
        embedding[:, 0] = 0.0
        embedding[not_text, 0] = _NOT_TEXT_LOGIT / _PRIOR_SCALE


def ensure_model(name_or_path: str, models_dir: Path) -> Path:
    """Resolve a model name to a local model directory, building the tiny one.

    Args:
        name_or_path: ``"alallo/tiny-gpt2"``, or the path of an existing local
            Hugging Face model directory.
        models_dir: Where built-in models live; ``alallo/tiny-gpt2`` becomes
            ``models_dir / "alallo--tiny-gpt2"``, built on first use.

    Returns:
        The model directory.

    Raises:
        ValueError: ``name_or_path`` is neither the built-in name nor an
            existing directory (models are never downloaded).
    """
    if name_or_path in TINY_MODELS:
        return build_tiny(name_or_path, models_dir / name_or_path.replace("/", "--"))
    local = Path(name_or_path).expanduser()
    if local.is_dir():
        return local
    raise ValueError(
        f"unknown model {name_or_path!r}: expected one of {TINY_MODELS} or an existing local "
        "model directory (models are not downloaded)"
    )


if __name__ == "__main__":  # python -m alallo.trainers.tiny NAME DIR: build it (the server's way)
    import sys

    build_tiny(sys.argv[1], Path(sys.argv[2]))
