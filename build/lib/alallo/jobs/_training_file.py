"""Checking uploaded JSONL training files.

A training file is JSON Lines: one JSON object per line, every line of the
same format:

- ``text``: ``{"text": "..."}``
- ``messages``: ``{"messages": [{"role": "user"|"assistant"|"system", "content": "..."}, ...]}``
- ``prompt_completion``: ``{"prompt": "...", "completion": "..."}``

A ``messages`` line must hold at least one ``assistant`` message: the reply
the model learns to give (without one there is nothing to train on; OpenAI's
fine-tuning data check refuses such a line too, as
``example_missing_assistant_message`` in the OpenAI cookbook's
``Chat_finetuning_data_prep.ipynb``).

The format is taken from the first line and every later line must match it.
The first bad line is reported with its number (1-based), so a user can fix
it; nothing of a bad file is stored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from .._errors import InvalidFile
from .._json import NestingTooDeep, loads

__all__ = ["CheckedFile", "check_jsonl"]

Format = Literal["text", "messages", "prompt_completion"]
_ROLES = frozenset({"system", "user", "assistant", "tool"})


@dataclass(frozen=True)
class CheckedFile:
    """What a valid training file holds: its format and example count."""

    format: Format
    line_count: int


def check_jsonl(data: bytes) -> CheckedFile:
    """Check a JSONL training file.

    Blank lines are ignored. Returns the format and the number of examples.

    Raises:
        InvalidFile: the file is empty, not UTF-8, or a line is not a JSON
            object of the file's format; the message names the line
            (``param="file"``).
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidFile(f"the file is not UTF-8 text (byte {exc.start})", param="file") from exc
    fmt: Format | None = None
    count = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = loads(line)
        except NestingTooDeep as exc:
            raise InvalidFile(f"line {number}: {exc}", param="file") from exc
        except json.JSONDecodeError as exc:
            raise InvalidFile(f"line {number}: not valid JSON ({exc.msg})", param="file") from exc
        if not isinstance(row, dict):
            raise InvalidFile(
                f"line {number}: expected a JSON object, got {type(row).__name__}", param="file"
            )
        if fmt is None:
            fmt = _detect(row, number)
        _check_row(row, fmt, number)
        count += 1
    if fmt is None:
        raise InvalidFile("the file has no examples: expected one JSON object per line", param="file")
    return CheckedFile(format=fmt, line_count=count)


def _detect(row: dict[str, Any], number: int) -> Format:
    if "messages" in row:
        return "messages"
    if "prompt" in row or "completion" in row:
        return "prompt_completion"
    if "text" in row:
        return "text"
    raise InvalidFile(
        f'line {number}: missing column "text", "messages" or "prompt"/"completion"',
        param="file",
    )


def _check_row(row: dict[str, Any], fmt: Format, number: int) -> None:
    if fmt == "text":
        _string(row, "text", number)
    elif fmt == "prompt_completion":
        _string(row, "prompt", number)
        _string(row, "completion", number)
    else:
        messages = row.get("messages")
        if not isinstance(messages, list) or not messages:
            raise InvalidFile(
                f'line {number}: missing column "messages" (a non-empty list)', param="file"
            )
        for index, message in enumerate(messages):
            if not isinstance(message, dict):
                raise InvalidFile(f"line {number}: messages[{index}] is not an object", param="file")
            if message.get("role") not in _ROLES:
                raise InvalidFile(
                    f"line {number}: messages[{index}].role must be one of "
                    f"{', '.join(sorted(_ROLES))}",
                    param="file",
                )
            if not isinstance(message.get("content"), str):
                raise InvalidFile(
                    f"line {number}: messages[{index}].content must be a string", param="file"
                )
        if not any(message["role"] == "assistant" for message in messages):
            raise InvalidFile(
                f"line {number}: no assistant message: each conversation needs at least one "
                'message with role "assistant", the reply the model learns to give',
                param="file",
            )


def _string(row: dict[str, Any], column: str, number: int) -> None:
    if column not in row:
        raise InvalidFile(f'line {number}: missing column "{column}"', param="file")
    if not isinstance(row[column], str):
        raise InvalidFile(f'line {number}: column "{column}" must be a string', param="file")
