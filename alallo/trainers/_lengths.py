"""How a file's examples fit a model's context: TRL's own length rules, written once for
the trainer and for the server that checks a job before it runs.

TRL 1.16 cuts every training sequence to ``max_length`` tokens (``truncation_mode=
"keep_start"``: the start is kept) and, before that, leaves out the examples that would
keep nothing to learn from:

- ``SFTTrainer`` tokenizes ``text`` (with the end-of-sequence token appended) and
  ``messages`` (the chat template) and cuts them; nothing is left out: every token is a
  label. ``prompt_completion`` trains on the completion (with its end-of-sequence token)
  only, and an example whose prompt alone fills ``max_length`` keeps no label: TRL drops it
  ("Dropping fully masked examples").
- ``DPOTrainer`` tokenizes the prompt (conversations: with the generation prompt), and the
  prompt followed by each answer; the answers start where those diverge
  (``common_prefix_length``). An example whose prompt alone fills ``max_length`` is
  dropped ("Dropping fully truncated examples"): neither answer has a token left. When
  both sequences are the same within ``max_length`` (the answers differ only after it)
  the pair teaches nothing.

TRL drops such examples silently; a dataset it empties ends in ``ValueError:
num_samples should be a positive integer value, but got num_samples=0`` from torch's
sampler, which says nothing of the data. So alallo decides from these rules first:
an example that cannot train is the user's to fix and is named by its line
(:attr:`Fit.problems`), and one that is cut is trained on its first ``max_length``
tokens and said so (:attr:`Fit.note`), as OpenAI truncates examples longer than the
model's context. The trainer counts with the model's tokenizer (transformers); the server
with an :class:`Encoder` of its own (the ``tokenizers`` package), where it can.

Imports nothing but the standard library: the server uses it without torch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = ["DEFAULT_CONTEXT", "Encoder", "Fit", "context_length", "fit_examples", "lines_text"]

DEFAULT_CONTEXT = 2048
"""A model's context when its ``config.json`` names none (as the catalogue reads it)."""
_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "n_ctx")
_LINES_SHOWN = 10


class Encoder(Protocol):
    """A model's tokenizer as TRL calls it.

    ``eos_token`` is the end-of-sequence token's text. ``text`` is ``tokenizer(text=s)``:
    the ids with the tokenizer's own special tokens (a BOS where it adds one). ``chat`` is
    ``tokenizer.apply_chat_template(messages, tokenize=True)``: the chat template rendered
    (with the assistant's header at the end when ``generation_prompt``), then tokenized
    without adding special tokens; it raises ``ValueError`` (the template's words) when
    the template refuses the conversation.
    """

    eos_token: str

    def text(self, text: str) -> list[int]: ...

    def chat(self, messages: list[dict[str, str]], *, generation_prompt: bool) -> list[int]: ...


@dataclass(frozen=True)
class Fit:
    """How the examples of one file fit ``max_length`` tokens.

    Attributes:
        max_length: the tokens a training sequence may hold (the model's context).
        examples: the examples counted.
        truncated: the lines (1-based) of the examples longer than ``max_length``, which
            train on their first ``max_length`` tokens.
        longest: the tokens of the longest example that trains (prompt and its longer
            answer).
        dropped: the lines whose prompt fills ``max_length``, which TRL leaves out.
        problems: each line that cannot train, and why (``"line 7: ..."``), in line order.
    """

    max_length: int
    examples: int
    truncated: tuple[int, ...] = ()
    longest: int = 0
    dropped: tuple[int, ...] = ()
    problems: tuple[tuple[int, str], ...] = field(default=())

    def note(self, model: str) -> str | None:
        """The sentence that says which examples are cut, or None when none is."""
        if not self.truncated:
            return None
        return (f"{len(self.truncated)} of {self.examples} examples are longer than "
                f"{model}'s context of {self.max_length} tokens (the longest: {self.longest}) "
                f"and train on their first {self.max_length} tokens only: "
                f"{lines_text(self.truncated)}")

    def refusal(self) -> str | None:
        """The first problem, with the count of the others, or None when every example can
        train: ``"line 7: ...; 2 more lines cannot train (lines 9, 12)"``."""
        if not self.problems:
            return None
        (_, first), rest = self.problems[0], self.problems[1:]
        if not rest:
            return first
        return (f"{first}; {len(rest)} more {'line' if len(rest) == 1 else 'lines'} cannot "
                f"train ({lines_text([line for line, _ in rest])})")


def lines_text(lines: Sequence[int]) -> str:
    """``"lines 2, 5 and 9"``, the first ten and a count of the rest."""
    shown = [str(line) for line in lines[:_LINES_SHOWN]]
    more = len(lines) - len(shown)
    if more:
        return f"lines {', '.join(shown)} and {more} more"
    if len(shown) == 1:
        return f"line {shown[0]}"
    return f"lines {', '.join(shown[:-1])} and {shown[-1]}"


def context_length(model_dir: Path) -> int:
    """The model's context in tokens from its ``config.json`` (``max_position_embeddings``,
    ``n_positions`` or ``n_ctx``; :data:`DEFAULT_CONTEXT` when it names none), as the
    server's catalogue reads it, so that both check against the same length.

    Raises:
        OSError: the file cannot be read.
    """
    config = json.loads((model_dir / "config.json").read_text())
    for key in _CONTEXT_KEYS:
        value = config.get(key) if isinstance(config, dict) else None
        if isinstance(value, int):
            return value
    return DEFAULT_CONTEXT


def fit_examples(rows: Iterable[tuple[int, Mapping[str, Any]]], data_format: str,
                 encoder: Encoder, max_length: int) -> Fit:
    """Count the tokens of every example as TRL will, and say which are cut and which cannot
    train (see the module's docstring).

    Args:
        rows: ``(line, row)`` pairs, each row holding its format's columns as
            :func:`alallo.trainers._data.read_rows` returns them.
        data_format: the file's format (``text``, ``messages``, ``prompt_completion``,
            ``preference``, ``chosen_rejected`` or ``reinforcement``).
        encoder: the model's tokenizer.
        max_length: the tokens a sequence may hold.
    """
    truncated: list[int] = []
    dropped: list[int] = []
    problems: list[tuple[int, str]] = []
    longest = examples = 0
    for line, row in rows:
        examples += 1
        try:
            prompt, sequences = _tokens(row, data_format, encoder)
        except ValueError as exc:
            problems.append((line, f"line {line}: the model's chat template refuses this "
                                   f"conversation: {exc}"))
            continue
        total = max(len(ids) for ids in sequences)
        if prompt >= max_length:
            dropped.append(line)
            problems.append((line, _no_room(line, prompt, max_length, pair=len(sequences) == 2)))
        elif len(sequences) == 2 and sequences[0][:max_length] == sequences[1][:max_length]:
            problems.append((line, (
                f"line {line}: the preferred and the non-preferred answer are the same "
                + (f"within the model's context of {max_length} tokens (they differ only "
                   "after it), " if total > max_length else "once tokenized, ")
                + "so the pair has nothing to teach: give two different answers, or shorten "
                "the prompt")))
        else:
            longest = max(longest, total)
            if total > max_length:
                truncated.append(line)
    return Fit(max_length=max_length, examples=examples, truncated=tuple(truncated),
               longest=longest, dropped=tuple(dropped), problems=tuple(problems))


def _no_room(line: int, prompt: int, max_length: int, *, pair: bool) -> str:
    answer = "neither answer" if pair else "no token of the completion"
    return (f"line {line}: the prompt is {prompt} tokens and the model's context is "
            f"{max_length}, so {answer} fits and the example cannot train: shorten the "
            "prompt (fewer or shorter messages), or choose a model with a longer context")


def _tokens(row: Mapping[str, Any], data_format: str,
            encoder: Encoder) -> tuple[int, list[list[int]]]:
    """The prompt's tokens (0 when all of the example is learnt) and the token ids of the
    example's sequences (one; two for a preference pair: the prompt with each answer)."""
    eos = encoder.eos_token
    if data_format == "text":
        return 0, [encoder.text(_ended(row["text"], eos))]
    if data_format == "messages":
        return 0, [encoder.chat(list(row["messages"]), generation_prompt=False)]
    if data_format == "reinforcement":  # the answer is the model's: only the prompt is known
        prompt = encoder.chat(list(row["messages"]), generation_prompt=True)
        return len(prompt), [prompt]
    if data_format == "prompt_completion":
        prompt = encoder.text(row["prompt"])
        whole = encoder.text(row["prompt"] + _ended(row["completion"], eos))
        return _common_prefix(prompt, whole), [whole]
    if data_format == "chosen_rejected":
        prompt = encoder.text(row["prompt"])
        pair = [encoder.text(row["prompt"] + _ended(row[side], eos))
                for side in ("chosen", "rejected")]
    else:  # preference: conversations, no end-of-sequence token added (TRL)
        prompt = encoder.chat(list(row["prompt"]), generation_prompt=True)
        pair = [encoder.chat([*row["prompt"], *row[side]], generation_prompt=False)
                for side in ("chosen", "rejected")]
    return min(_common_prefix(prompt, ids) for ids in pair), pair


def _ended(text: str, eos: str) -> str:
    return text if text.endswith(eos) else text + eos


def _common_prefix(ids: list[int], other: list[int]) -> int:
    """TRL's ``common_prefix_length``: where the prompt's tokens and the whole example's
    part (a chat template may end the prompt alone differently)."""
    count = 0
    for a, b in zip(ids, other, strict=False):
        if a != b:
            break
        count += 1
    return count
