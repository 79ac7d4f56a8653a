"""Reading a JSONL training file for a trainer, checked against its format.

The runtime checks files on upload (``alallo/_files.py``), but a trainer
reads its file again, against the ``data_format`` it was told, and must turn
a bad line into a *user* error rather than crash: the file may have been
uploaded in another format, or written by hand for a custom trainer.

Rows are JSON objects, one a line (blank lines are skipped), in one of the
formats TRL's ``SFTTrainer`` accepts:

- ``text``: ``{"text": "..."}``, a language-modelling example;
- ``messages``: ``{"messages": [{"role": ..., "content": ...}, ...]}``, a
  conversation, rendered with the model's chat template;
- ``prompt_completion``: ``{"prompt": "...", "completion": "..."}``, trained
  on the completion only;

and, for TRL's ``DPOTrainer``, preference pairs (``preference``, OpenAI's;
``chosen_rejected``, TRL's), whose two answers must differ: an equal pair has nothing to
teach, so it is the user's error, as on upload; and, for reinforcement fine-tuning (TRL's
``GRPOTrainer``), OpenAI's prompts (``reinforcement``): a conversation ending before the
answer, with the whole row kept as ``item`` for the grader (``{{ item.answer }}``).

Columns other than the format's are dropped. :func:`read_rows` needs nothing
but the standard library, so the simulated trainer shares it without
importing ``datasets``; :func:`load_training_dataset` imports ``datasets``
when called.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from alallo._json import NestingTooDeep, loads

if TYPE_CHECKING:
    from datasets import Dataset  # type: ignore[import-untyped]

__all__ = [
    "DataFormat",
    "UserDataError",
    "file_hash",
    "load_training_dataset",
    "parse_rows",
    "read_numbered_rows",
    "read_rows",
    "tree_hash",
]

DataFormat = Literal["text", "messages", "prompt_completion", "preference", "chosen_rejected",
                     "reinforcement"]

_ROLES = frozenset({"system", "user", "assistant", "tool"})
_PROMPT_ROLES = _ROLES | {"developer"}
_HASH_CHARS = 16
_CHUNK = 1 << 20


class UserDataError(ValueError):
    """The training data cannot be used as given; the user must fix it.

    The message names the line (1-based) and the column at fault, e.g.
    ``line 3: missing column "text"``. Trainers report it as an ``error``
    line of kind ``user``.
    """


def read_rows(path: Path, data_format: DataFormat) -> list[dict[str, Any]]:
    """Read and check every row of a JSONL training file.

    Args:
        path: The JSONL file.
        data_format: The format every row must have.

    Returns:
        One dict per example, holding only the format's columns: ``text``;
        ``messages`` (a list of ``{"role", "content"}``); ``prompt`` and
        ``completion``; or, for preference pairs, ``prompt``, ``chosen`` and ``rejected``
        (strings, or for OpenAI's ``preference`` format lists of messages: the
        conversation, and the preferred and the other answer); for ``reinforcement``,
        ``messages`` and ``item`` (the whole row, as the grader reads it).

    Raises:
        UserDataError: The file is not UTF-8, holds no example, or a line is
            not a JSON object with the format's columns of the right types, or is a
            preference pair whose two answers are equal.
        OSError: The file cannot be read.
    """
    return [row for _, row in read_numbered_rows(path, data_format)]


def read_numbered_rows(path: Path, data_format: DataFormat) -> list[tuple[int, dict[str, Any]]]:
    """:func:`read_rows`, each row with its line in the file (1-based; blank lines count),
    so that what is found later names the line.

    Raises:
        UserDataError, OSError: As :func:`read_rows`.
    """
    return parse_rows(path.read_bytes(), data_format)


def parse_rows(data: bytes, data_format: DataFormat) -> list[tuple[int, dict[str, Any]]]:
    """:func:`read_numbered_rows` of a file's bytes.

    Raises:
        UserDataError: As :func:`read_rows`.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserDataError(f"the training file is not UTF-8 text (byte {exc.start})") from exc
    rows: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            rows.append((number, _check_row(_parse(line, number), data_format, number)))
    if not rows:
        raise UserDataError("the training file has no examples: expected one JSON object per line")
    return rows


def load_training_dataset(path: Path, data_format: DataFormat) -> Dataset:
    """Read a JSONL training file into an in-memory ``datasets.Dataset``.

    Its columns are the ones TRL's ``SFTTrainer`` expects for the format (see
    :func:`read_rows`); nothing is written to the ``datasets`` cache.

    Raises:
        UserDataError: As :func:`read_rows`.
        OSError: The file cannot be read.
    """
    from datasets import Dataset

    return Dataset.from_list(read_rows(path, data_format))


def file_hash(path: Path) -> str:
    """A short stable digest of a file's bytes: the first 16 hex digits of its SHA-256.

    Raises:
        OSError: The file cannot be read.
    """
    return _sha256(path).hex()[:_HASH_CHARS]


def tree_hash(directory: Path, *, skip: tuple[str, ...] = ()) -> str:
    """A short stable digest of the files under a directory (16 hex digits of SHA-256).

    It covers each file's path relative to ``directory`` and its bytes, in
    path order, so it does not depend on where the directory is.

    Args:
        directory: The directory to digest, e.g. a saved model.
        skip: File-name prefixes to leave out, e.g. ``("optimizer.pt",)``.

    Raises:
        OSError: A file cannot be read.
    """
    digest = hashlib.sha256()
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not path.name.startswith(skip):
            digest.update(path.relative_to(directory).as_posix().encode() + b"\0")
            digest.update(_sha256(path))
    return digest.hexdigest()[:_HASH_CHARS]


def _sha256(path: Path) -> bytes:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.digest()


def _parse(line: str, number: int) -> dict[str, Any]:
    try:
        row = loads(line)
    except NestingTooDeep as exc:
        raise UserDataError(f"line {number}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise UserDataError(f"line {number}: not valid JSON ({exc.msg})") from exc
    if not isinstance(row, dict):
        raise UserDataError(f"line {number}: expected a JSON object, got {_kind(row)}")
    return row


def _check_row(row: dict[str, Any], data_format: DataFormat, number: int) -> dict[str, Any]:
    if data_format == "text":
        return {"text": _string(row, "text", number)}
    if data_format == "prompt_completion":
        return {
            "prompt": _string(row, "prompt", number),
            "completion": _string(row, "completion", number),
        }
    if data_format == "chosen_rejected":
        pair = {column: _string(row, column, number) for column in ("prompt", "chosen", "rejected")}
        return _different(pair, number, '"chosen" and "rejected"')
    if data_format == "preference":
        given = row.get("input")
        if not isinstance(given, dict):
            raise UserDataError(f'line {number}: column "input" must be an object with '
                                f'"messages", got {_kind(given)}')
        return _different(
            {"prompt": _messages(given, number, column="messages", shown="input.messages"),
             "chosen": _messages(row, number, column="preferred_output"),
             "rejected": _messages(row, number, column="non_preferred_output")},
            number, '"preferred_output" and "non_preferred_output"')
    if data_format == "reinforcement":
        messages = _messages(row, number, roles=_PROMPT_ROLES)
        if messages[-1]["role"] == "assistant":
            raise UserDataError(f"line {number}: the conversation ends with the assistant's "
                                "answer: reinforcement data ends before it (the model writes "
                                "the answer, the grader scores it)")
        return {"messages": messages, "item": row}
    return {"messages": _messages(row, number)}


def _different(pair: dict[str, Any], number: int, columns: str) -> dict[str, Any]:
    if pair["chosen"] == pair["rejected"]:
        raise UserDataError(f"line {number}: {columns} are the same answer, so the pair has "
                            "nothing to teach: prefer one answer over a different one")
    return pair


def _string(row: dict[str, Any], column: str, number: int) -> str:
    if column not in row:
        raise UserDataError(f'line {number}: missing column "{column}"')
    value = row[column]
    if not isinstance(value, str):
        raise UserDataError(
            f'line {number}: column "{column}" must be a string, got {_kind(value)}'
        )
    return value


def _messages(row: dict[str, Any], number: int, *, column: str = "messages",
              shown: str | None = None, roles: frozenset[str] = _ROLES,
              ) -> list[dict[str, str]]:
    shown = shown or column
    if column not in row:
        raise UserDataError(f'line {number}: missing column "{shown}"')
    messages = row[column]
    if not isinstance(messages, list) or not messages:
        raise UserDataError(
            f'line {number}: column "{shown}" must be a non-empty list, got {_kind(messages)}'
        )
    checked: list[dict[str, str]] = []
    for index, message in enumerate(messages):
        where = f'line {number}: column "{shown}", item {index}'
        if not isinstance(message, dict):
            raise UserDataError(f"{where}: expected an object, got {_kind(message)}")
        role = message.get("role")
        if role not in roles:
            raise UserDataError(
                f'{where}: "role" must be one of {", ".join(sorted(roles))}, got {role!r}'
            )
        content = message.get("content")
        if not isinstance(content, str):
            raise UserDataError(f'{where}: "content" must be a string, got {_kind(content)}')
        checked.append({"role": role, "content": content})
    return checked


def _kind(value: object) -> str:
    if isinstance(value, list) and not value:
        return "an empty list"
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)
