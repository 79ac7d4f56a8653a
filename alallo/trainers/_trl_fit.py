"""A TRL run's data against the model's context: the longest sequence it trains, the
examples that cannot train (a user error naming their lines), those that are cut (said in
the log), and, after TRL has prepared the data, a check that it kept every example.

The server decides the same before the job runs where it can count tokens
(:mod:`alallo.trainers._lengths`); this is the guarantee where it cannot: a model whose
chat template only transformers renders, a server without the ``train`` extra, a file
written for the trainer by hand. Whatever TRL still leaves out (a rule of a later TRL this
code does not know) is named by its line too, from a ``line`` column that TRL carries
through its preparation and ``Trainer`` drops before batching (``remove_unused_columns``),
instead of ending in torch's ``num_samples=0``.

Part of :mod:`alallo.trainers.trl`; imported in the trainer's process only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._data import UserDataError
from ._lengths import context_length, fit_examples, lines_text
from ._protocol import Log, TrainerConfig
from ._trl_model import shortened
from ._trl_report import ProtocolOut

if TYPE_CHECKING:
    from datasets import Dataset  # type: ignore[import-untyped]
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["LINE", "TokenizerEncoder", "check_fit", "check_kept", "numbered", "sequence_length"]

LINE = "line"
"""The column that carries each example's line in its file through TRL's preparation."""


class TokenizerEncoder:
    """A transformers tokenizer as :class:`alallo.trainers._lengths.Encoder`: called as
    TRL 1.16 calls it (``trl.data_utils._tokenize``)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self._tokenizer = tokenizer
        self.eos_token: str = str(tokenizer.eos_token or "")

    def text(self, text: str) -> list[int]:
        return list(self._tokenizer(text=text)["input_ids"])

    def chat(self, messages: list[dict[str, str]], *, generation_prompt: bool) -> list[int]:
        from jinja2 import TemplateError

        try:
            encoded = self._tokenizer.apply_chat_template(
                messages, tokenize=True, return_dict=True, add_generation_prompt=generation_prompt)
        except TemplateError as exc:  # the template's raise_exception(...): its own words
            raise ValueError(shortened(str(exc))) from exc
        return list(encoded["input_ids"])


def sequence_length(config: TrainerConfig, model: PreTrainedModel, out: ProtocolOut) -> int:
    """The tokens a training sequence may hold: ``config.max_seq_length``, or the model's
    context (:func:`alallo.trainers._lengths.context_length`, as the server reads it), and
    never more than the model's positions (``max_position_embeddings``)."""
    wanted = config.max_seq_length or context_length(Path(config.model))
    model_max = getattr(model.config, "max_position_embeddings", None)
    if isinstance(model_max, int) and wanted > model_max:
        out(Log(text=f"max_seq_length {wanted} is over the model's limit, using {model_max}"))
        return model_max
    return wanted


def check_fit(rows: list[tuple[int, dict[str, Any]]], data_format: str,
              tokenizer: PreTrainedTokenizerBase, length: int, out: ProtocolOut, *,
              model_name: str, validation: bool = False) -> int:
    """Count the examples' tokens as TRL will; log which are cut to ``length``; return the
    most tokens of one example that fits (of a reinforcement prompt: the prompt's).

    Raises:
        UserDataError: an example cannot train (its prompt fills ``length``; a preference
            pair the same within it; a conversation the chat template refuses), naming its
            line (``validation file, line 3: ...`` for the validation file).
    """
    fit = fit_examples(rows, data_format, TokenizerEncoder(tokenizer), length)
    where = "validation file, " if validation else ""
    refusal = fit.refusal()
    if refusal is not None:
        raise UserDataError(where + refusal)
    note = fit.note(model_name)
    if note is not None:
        out(Log(text=("Validation file: " if validation else "") + note))
    return fit.longest


def numbered(rows: list[tuple[int, dict[str, Any]]]) -> Dataset:
    """The rows as a ``datasets.Dataset``, each with its line in :data:`LINE`."""
    from datasets import Dataset

    return Dataset.from_list([{**row, LINE: line} for line, row in rows])


def check_kept(prepared: Any, lines: list[int], length: int, *, validation: bool = False) -> None:
    """Every line of the file is still in TRL's prepared dataset.

    Raises:
        UserDataError: TRL left examples out, naming the first and counting the others.
    """
    kept = set(prepared[LINE]) if LINE in (prepared.column_names or ()) else set(lines)
    missing = [line for line in lines if line not in kept]
    if not missing:
        return
    others = f" (also {lines_text(missing[1:])})" if missing[1:] else ""
    raise UserDataError(
        f"{'validation file, ' if validation else ''}line {missing[0]}: nothing of this "
        f"example is left to train on within the model's context of {length} tokens, so "
        f"it cannot train{others}: shorten it, or choose a model with a longer context")
