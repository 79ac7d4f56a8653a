"""Checking uploaded JSONL training files.

A training file is JSON Lines: one JSON object per line, every line of the
same format:

- ``text``: ``{"text": "..."}``
- ``messages``: ``{"messages": [{"role": "user"|"assistant"|"system", "content": "..."}, ...]}``
- ``prompt_completion``: ``{"prompt": "...", "completion": "..."}``
- ``preference`` (OpenAI's, for DPO): ``{"input": {"messages": [...]}, "preferred_output":
  [{"role": "assistant", "content": "..."}], "non_preferred_output": [...]}``
- ``chosen_rejected`` (TRL's, for DPO): ``{"prompt": "...", "chosen": "...", "rejected": "..."}``
- ``reinforcement`` (OpenAI's, for reinforcement fine-tuning): ``{"messages": [...], ...}``
  whose conversation ends *before* the answer (its last message is not the assistant's: the
  model writes the answer, and a grader scores it), with any other fields the grader reads as
  ``item.*`` (``{"messages": [...], "answer": "Paris"}``).

A file whose first line is a conversation ending before the answer is ``reinforcement``
data; one ending with the assistant's reply is ``messages``. A ``messages`` line must hold at least one ``assistant`` message: the reply
the model learns to give (without one there is nothing to train on; OpenAI's
fine-tuning data check refuses such a line too, as
``example_missing_assistant_message`` in the OpenAI cookbook's
``Chat_finetuning_data_prep.ipynb``).

A preference pair (either format) must prefer one answer over a *different* one: a line
whose two answers are equal has nothing to teach (DPO's loss of such a pair is a constant,
its gradient zero), so it is refused by its line like any other fault.

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

__all__ = ["PREFERENCE_FORMATS", "CheckedFile", "check_jsonl"]

Format = Literal["text", "messages", "prompt_completion", "preference", "chosen_rejected",
                 "reinforcement"]
PREFERENCE_FORMATS: frozenset[str] = frozenset({"preference", "chosen_rejected"})
"""The formats of preference pairs: what method ``dpo`` trains on, and only it."""
_ROLES = frozenset({"system", "user", "assistant", "tool"})
_PROMPT_ROLES = _ROLES | {"developer"}
"""Roles of reinforcement data: OpenAI's RFT examples give instructions as ``developer``."""


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
    if {"preferred_output", "non_preferred_output"} & row.keys():
        return "preference"
    if {"chosen", "rejected"} & row.keys():
        return "chosen_rejected"
    if "messages" in row:
        messages = row["messages"]
        ends = messages[-1] if isinstance(messages, list) and messages else None
        answered = isinstance(ends, dict) and ends.get("role") == "assistant"
        return "messages" if answered or ends is None else "reinforcement"
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
    elif fmt == "chosen_rejected":
        for column in ("prompt", "chosen", "rejected"):
            _string(row, column, number)
        _different(row, "chosen", "rejected", number)
    elif fmt == "preference":
        given = row.get("input")
        if not isinstance(given, dict):
            raise InvalidFile(f'line {number}: missing column "input" (an object with '
                              '"messages")', param="file")
        _messages(given.get("messages"), f"line {number}: input.messages",
                  f'line {number}: missing column "input.messages" (a non-empty list)')
        for column in ("preferred_output", "non_preferred_output"):
            _messages(row.get(column), f"line {number}: {column}",
                      f'line {number}: missing column "{column}" (a non-empty list of the '
                      "assistant's messages)", assistant=True)
        _different(row, "preferred_output", "non_preferred_output", number)
    elif fmt == "reinforcement":
        _messages(row.get("messages"), f"line {number}: messages",
                  f'line {number}: missing column "messages" (a non-empty list)',
                  roles=_PROMPT_ROLES)
        if row["messages"][-1]["role"] == "assistant":
            raise InvalidFile(
                f"line {number}: the conversation ends with the assistant's answer: "
                "reinforcement data ends before it (the model writes the answer, the grader "
                "scores it), as the file's first line does", param="file")
    else:
        _messages(row.get("messages"), f"line {number}: messages",
                  f'line {number}: missing column "messages" (a non-empty list)')
        if not any(message["role"] == "assistant" for message in row["messages"]):
            raise InvalidFile(
                f"line {number}: no assistant message: each conversation needs at least one "
                'message with role "assistant", the reply the model learns to give',
                param="file",
            )


def _messages(messages: Any, where: str, missing: str, *, assistant: bool = False,
              roles: frozenset[str] = _ROLES) -> None:
    """A non-empty list of ``{"role", "content"}`` messages (only the assistant's, when
    ``assistant``); the first fault named with ``where`` and its index, ``missing`` when
    there is no such list."""
    if not isinstance(messages, list) or not messages:
        raise InvalidFile(missing, param="file")
    roles = frozenset({"assistant"}) if assistant else roles
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidFile(f"{where}[{index}] is not an object", param="file")
        if message.get("role") not in roles:
            raise InvalidFile(f"{where}[{index}].role must be one of {', '.join(sorted(roles))}",
                              param="file")
        if not isinstance(message.get("content"), str):
            raise InvalidFile(f"{where}[{index}].content must be a string", param="file")


def _different(row: dict[str, Any], preferred: str, other: str, number: int) -> None:
    """The two answers of a preference pair differ (compared as the trainer reads them:
    the messages' roles and contents, nothing else)."""
    def answer(value: Any) -> Any:
        if isinstance(value, list):
            return [(message["role"], message["content"]) for message in value]
        return value

    if answer(row[preferred]) == answer(row[other]):
        raise InvalidFile(f'line {number}: "{preferred}" and "{other}" are the same answer, so '
                          "the pair has nothing to teach: prefer one answer over a different "
                          "one", param="file")


def _string(row: dict[str, Any], column: str, number: int) -> None:
    if column not in row:
        raise InvalidFile(f'line {number}: missing column "{column}"', param="file")
    if not isinstance(row[column], str):
        raise InvalidFile(f'line {number}: column "{column}" must be a string', param="file")
