"""The tokenizers the server counts a job's tokens with before it runs
(:mod:`alallo.trainers._lengths`), without torch or transformers.

A model's is the ``tokenizers`` package's ``Tokenizer`` (Rust; loading a
``tokenizer.json`` takes milliseconds), which is what transformers 5 itself tokenizes with
(``TokenizersBackend``): ``text`` is its ``encode`` with the tokenizer's special tokens, as
``tokenizer(text=...)``. The built-in model's is written out: its tokenizer
(:func:`alallo.trainers.tiny.byte_level_tokenizer`) gives each UTF-8 byte its value as id
and ``<|endoftext|>`` 256, which Python's ``bytes`` does in C, where ``tokenizers`` took
0.2-0.5 ms a 300-byte line (a vocabulary without merges is its slow case): 100,000 lines in
seconds instead of a minute (the tests compare both with the model's own tokenizer). Chat
templates are rendered for the built-in model only, whose
template is alallo's own (:data:`alallo.trainers.tiny.CHAT_TEMPLATE`), with Jinja's
sandbox as transformers renders it (``trim_blocks``, ``lstrip_blocks``, the special tokens
as variables). Another model's template is code from its repository, which the trainer runs
in its own process; in the server it would run beside every account's requests, and
matching transformers' rendering of every template (its extensions and helpers) would be a
second implementation to keep in step. So for another model the server counts the formats
without a template (``text``, ``prompt_completion``, ``chosen_rejected``) and leaves
conversations to the trainer's own check (:mod:`alallo.trainers._trl_fit`).

Why not transformers' ``AutoTokenizer``: importing transformers costs the server about
2.3 s and some 600 modules, and it is the ``train`` extra's; ``tokenizers`` comes with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._lengths import Encoder
from .tiny import CHAT_TEMPLATE, EOS_TOKEN

if TYPE_CHECKING:
    from jinja2 import Template
    from tokenizers import Tokenizer

__all__ = ["CHAT_FORMATS", "counting_encoder", "has_chat_template"]

CHAT_FORMATS = frozenset({"messages", "preference", "reinforcement"})
"""The formats rendered with the model's chat template."""
TINY_EOS_ID = 256
"""The built-in model's ``<|endoftext|>`` (after the 256 bytes)."""


class _Counting:
    """A ``tokenizers.Tokenizer`` as an :class:`~alallo.trainers._lengths.Encoder`; the
    built-in model's bytes when ``tokenizer`` is None."""

    def __init__(self, tokenizer: Tokenizer | None, eos_token: str, template: Template | None,
                 special: dict[str, str]) -> None:
        self._tokenizer = tokenizer
        self.eos_token = eos_token
        self._template = template
        self._special = special

    def text(self, text: str) -> list[int]:
        if self._tokenizer is None:
            return _tiny_ids(text)
        return list(self._tokenizer.encode(text).ids)

    def chat(self, messages: list[dict[str, str]], *, generation_prompt: bool) -> list[int]:
        if self._template is None:
            raise LookupError("this encoder renders no chat template")
        from jinja2 import TemplateError

        try:
            rendered = self._template.render(messages=messages,
                                             add_generation_prompt=generation_prompt,
                                             **self._special)
        except TemplateError as exc:
            raise ValueError(str(exc)) from exc
        if self._tokenizer is None:
            return _tiny_ids(rendered)
        return list(self._tokenizer.encode(rendered, add_special_tokens=False).ids)


def _tiny_ids(text: str) -> list[int]:
    """The built-in model's token ids: each UTF-8 byte's value, :data:`TINY_EOS_ID` for
    ``<|endoftext|>`` (a special token, matched wherever it stands)."""
    ids: list[int] = []
    for index, part in enumerate(text.split(EOS_TOKEN)):
        if index:
            ids.append(TINY_EOS_ID)
        ids.extend(part.encode())
    return ids


def counting_encoder(model_dir: Path | None, *, built_in: bool,
                     data_format: str) -> Encoder | None:
    """The encoder that counts ``data_format`` examples for the model, or None where the
    server cannot count them (the trainer then decides): no ``tokenizer.json`` in
    ``model_dir``, a conversation format for a model other than the built-in, or the
    ``tokenizers`` package missing (a server without ``alallo[train]``). Blocking (reads
    files): run it in a worker thread.

    Args:
        model_dir: the model's directory (its tokenizer files), or None when the server
            has none.
        built_in: the model is ``alallo/tiny-gpt2`` (its tokenizer is built here, whether
            or not a trainer has built the model yet).
    """
    try:
        if built_in:
            from jinja2.sandbox import ImmutableSandboxedEnvironment

            template = ImmutableSandboxedEnvironment(
                trim_blocks=True, lstrip_blocks=True).from_string(CHAT_TEMPLATE)
            special = {"eos_token": EOS_TOKEN, "bos_token": EOS_TOKEN, "pad_token": EOS_TOKEN}
            return _Counting(None, EOS_TOKEN, template, special)
        if model_dir is None or data_format in CHAT_FORMATS \
                or not (model_dir / "tokenizer.json").is_file():
            return None
        from tokenizers import Tokenizer
    except ImportError:
        return None
    eos = _token(_tokenizer_config(model_dir).get("eos_token"))
    if eos is None:
        return None
    return _Counting(Tokenizer.from_file(str(model_dir / "tokenizer.json")), eos, None, {})


def has_chat_template(model_dir: Path | None, *, built_in: bool) -> bool | None:
    """Whether the model's tokenizer has a chat template (transformers 5 saves it as
    ``chat_template.jinja``, earlier versions in ``tokenizer_config.json``); None when the
    server cannot tell (no tokenizer files here). Blocking."""
    if built_in:
        return True
    if model_dir is None or not (model_dir / "tokenizer_config.json").is_file():
        return None
    return (any((model_dir / name).is_file()
                for name in ("chat_template.jinja", "chat_template.json"))
            or (model_dir / "additional_chat_templates").is_dir()
            or bool(_tokenizer_config(model_dir).get("chat_template")))


def _tokenizer_config(model_dir: Path) -> dict[str, Any]:
    try:
        config = json.loads((model_dir / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def _token(value: object) -> str | None:
    """A special token as ``tokenizer_config.json`` writes it: its text, or an object with
    its ``content``."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None
