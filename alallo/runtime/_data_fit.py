"""Whether a job's data fits its model's context, decided when the job is estimated and
created, before it runs (issue 31: a DPO file whose prompts filled the context failed four
runs as alallo's fault).

The rules are TRL's (:mod:`alallo.trainers._lengths`), counted with the model's tokenizer
where the server has it (:func:`alallo.trainers.counting_encoder`). Two outcomes, chosen
by what the user loses:

- An example that cannot train (its prompt fills the context, so no answer token is left;
  a preference pair the same within the context; a conversation for a model without a chat
  template) is refused with its line: 422, ``param`` the file's field. TRL would drop it
  without a word, training on less than the user sent and, when every example goes, failing
  with nothing that points at the data. OpenAI's data check refuses lines with nothing to
  learn in the same way (a conversation without an assistant message).
- An example longer than the context is trained on its first tokens (TRL's ``keep_start``,
  and OpenAI's rule for examples over the limit) and said so: the estimate's ``warnings``
  and a ``WARNING`` event of the job name the lines. Refusing them would refuse every
  file with one long line, and the user keeps most of what they sent.

The server cannot count everywhere (no tokenizer files here, a chat template that is the
model's code, no ``train`` extra): then nothing is said here, and the trainer's own check
(:mod:`alallo.trainers._trl_fit`), which follows the same rules with transformers, fails
the job as the user's error naming the line, charged nothing.

Counting runs in a worker thread under a limiter of :data:`COUNTING_THREADS`, so a big
file never holds the event loop; an answer is kept per file content, model and length
(an estimate and then the job's creation count once). A file over :data:`COUNTED_BYTES`
is left to the trainer: measured on the built-in model (2 busy cores), 9 MB of DPO
conversations (20,000 pairs, three chat templates rendered each) took 6.7 s to parse and
count, 31 MB of ``text`` 5 s; a request should not wait longer.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import NamedTuple

import trio

from .._errors import InvalidRequest
from ..capacity import TINY_MODELS, CatalogueModel
from ..store import FileRow
from ..trainers import (
    CHAT_FORMATS,
    Encoder,
    Fit,
    UserDataError,
    counting_encoder,
    fit_examples,
    has_chat_template,
    parse_rows,
)
from ._training_files import TrainingFiles

__all__ = ["COUNTED_BYTES", "COUNTING_THREADS", "KEPT_ANSWERS", "DataFit"]

COUNTING_THREADS = 2
"""Worker threads that count tokens at once (each a file; the rest wait their turn)."""
KEPT_ANSWERS = 64
"""Counted files whose answer is kept (a few hundred bytes each)."""
COUNTED_BYTES = 8 * 1024 * 1024
"""The largest file counted before its job runs; the trainer checks larger ones."""
_KEPT_ENCODERS = 8


class _Answer(NamedTuple):
    refusal: str | None
    note: str | None


class DataFit:
    """Counts a job's examples against its model's context (see the module docstring).

    Args:
        files: the account's files, read to count them.
    """

    def __init__(self, files: TrainingFiles) -> None:
        self._files = files
        self._limiter = trio.CapacityLimiter(COUNTING_THREADS)
        self._encoders: OrderedDict[tuple[bool, str, bool], Encoder | None] = OrderedDict()
        self._answers: OrderedDict[tuple[str, ...], _Answer] = OrderedDict()

    async def check(self, account_id: str, model: CatalogueModel, file: FileRow,
                    field: str) -> str | None:
        """Check one file of a job against ``model``; return the note on the examples that
        are cut, or None.

        Raises:
            InvalidRequest: an example cannot train (the message names its line), or a
                conversation file for a model without a chat template (``param=field``).
        """
        built_in = model.id in TINY_MODELS
        chat = file.format in CHAT_FORMATS
        if chat and await trio.to_thread.run_sync(
                lambda: has_chat_template(model.local_path, built_in=built_in)) is False:
            raise InvalidRequest(
                f"model {model.id} has no chat template, so it cannot train on {file.format} "
                'data: use the "text" or "prompt_completion" format'
                + (' (for DPO, "prompt", "chosen" and "rejected")'
                   if file.format == "preference" else ""), param=field)
        key = (file.sha256, file.format, model.id, str(model.local_path),
               str(model.context_length))
        answer = self._answers.get(key)
        if answer is None:
            if file.bytes > COUNTED_BYTES:
                return None  # the trainer decides (module docstring)
            encoder = await self._encoder(model.local_path, built_in=built_in,
                                          data_format=file.format)
            if encoder is None:
                return None  # the trainer decides (module docstring)
            data = await self._files.content(account_id, file.id)
            answer = await trio.to_thread.run_sync(
                _count, data, file.format, encoder, model, limiter=self._limiter)
            self._answers[key] = answer
            while len(self._answers) > KEPT_ANSWERS:
                self._answers.popitem(last=False)
        if answer.refusal is not None:
            raise InvalidRequest(answer.refusal, param=field)
        return answer.note

    async def _encoder(self, model_dir: Path | None, *, built_in: bool,
                       data_format: str) -> Encoder | None:
        key = (built_in, str(model_dir), data_format in CHAT_FORMATS)
        if key not in self._encoders:
            self._encoders[key] = await trio.to_thread.run_sync(
                lambda: counting_encoder(model_dir, built_in=built_in, data_format=data_format),
                limiter=self._limiter)
            while len(self._encoders) > _KEPT_ENCODERS:
                self._encoders.popitem(last=False)
        return self._encoders[key]


def _count(data: bytes, data_format: str, encoder: Encoder, model: CatalogueModel) -> _Answer:
    """Blocking: parse the file's rows as the trainer does and count them."""
    try:
        rows = parse_rows(data, data_format)  # type: ignore[arg-type]
    except UserDataError as exc:  # e.g. an equal pair, uploaded before uploads refused it
        return _Answer(str(exc), None)
    fit: Fit = fit_examples(rows, data_format, encoder, model.context_length)
    return _Answer(fit.refusal(), fit.note(model.id))
