"""Checking JSONL training files."""

from __future__ import annotations

import json

import pytest

from alallo import InvalidFile
from alallo.jobs._training_file import check_jsonl

pytestmark = pytest.mark.unit


def lines(*rows: object) -> bytes:
    return "\n".join(json.dumps(r) for r in rows).encode() + b"\n"


@pytest.mark.parametrize(
    ("data", "fmt", "count"),
    [
        (lines({"text": "a"}, {"text": "b"}), "text", 2),
        (lines({"prompt": "1+1=", "completion": "2"}), "prompt_completion", 1),
        (lines({"messages": [{"role": "user", "content": "hi"},
                             {"role": "assistant", "content": "yo"}]}), "messages", 1),
        (b'\xef\xbb\xbf{"text": "bom"}\n\n{"text": "blank line above"}', "text", 2),
        # OpenAI's RFT rows: the conversation ends before the answer; the grader's fields
        (lines({"messages": [{"role": "developer", "content": "Be brief."},
                             {"role": "user", "content": "Capital of France?"}],
                "answer": "Paris"},
               {"messages": [{"role": "user", "content": "Hi"},
                             {"role": "assistant", "content": "Hello"},
                             {"role": "user", "content": "And?"}], "answer": {"any": "json"}}),
         "reinforcement", 2),
    ],
)
def test_valid_files_report_format_and_count(data: bytes, fmt: str, count: int) -> None:
    checked = check_jsonl(data)
    assert (checked.format, checked.line_count) == (fmt, count)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (lines({"text": "a"}) + b"[1]\n", "line 2: expected a JSON object, got list"),
        (lines(*[{"text": str(i)} for i in range(6)]) + b'{"bad": 1}\n', 'line 7: missing column "text"'),
        (lines({"text": 1}), 'line 1: column "text" must be a string'),
        (lines({"prompt": "p"}), 'line 1: missing column "completion"'),
        (lines({"messages": []}), 'line 1: missing column "messages"'),
        (lines({"messages": [{"role": "robot", "content": "x"}]}), "line 1: messages[0].role"),
        (b"{oops\n", "line 1: not valid JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"", "no examples"),
        (lines({"other": 1}), 'line 1: missing column "text", "messages"'),
        (lines({"messages": [{"role": "user", "content": "hi"},
                             {"role": "assistant", "content": "yo"}]},
               {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]}),
         'line 2: no assistant message: each conversation needs at least one message with role '
         '"assistant"'),
        (lines({"messages": [{"role": "user", "content": "q"}]},
               {"messages": [{"role": "user", "content": "q"},
                             {"role": "assistant", "content": "a"}]}),
         "line 2: the conversation ends with the assistant's answer: reinforcement data ends "
         "before it"),
        (lines({"messages": [{"role": "user", "content": "q"}]}, {"messages": []}),
         'line 2: missing column "messages"'),
        (lines({"messages": [{"role": "user", "content": "hi"},
                             {"role": "assistant", "content": "yo"}]},
               {"messages": [{"role": "developer", "content": "d"},
                             {"role": "assistant", "content": "yo"}]}),
         "line 2: messages[0].role must be one of assistant, system, tool, user"),
    ],
)
def test_bad_files_name_the_line(data: bytes, message: str) -> None:
    with pytest.raises(InvalidFile) as caught:
        check_jsonl(data)
    assert message in caught.value.message
    assert caught.value.param == "file"
