"""``alallo chat`` keeps going: old turns are dropped to fit the model's context, and an
error is one red line after which the next turn is read (against a scripted fake server
that counts a word as a token)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from alallo.cli import app
import test_cli
from test_cli import FakeServer, error

pytestmark = pytest.mark.unit
_clean_env = test_cli._clean_env  # fixtures shared with test_cli
server = test_cli.server

CONTEXT = 60
"""The fake model's context, in words."""
DIM, RED = "\x1b[2m", "\x1b[31m"


def words(messages: list[dict[str, str]]) -> int:
    return sum(len(message["content"].split()) + 1 for message in messages)


def fake_model(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    prompt = words(body["messages"])
    if prompt + body["max_tokens"] > CONTEXT:  # as alallo's generator words it
        return error(400, "invalid_request", f"this model's context is {CONTEXT} tokens, and "
                     f"the prompt alone is {prompt}", "messages")
    answer = f"heard {body['messages'][-1]['content'].split()[0]}"
    return httpx.Response(200, json={"choices": [{"message": {"role": "assistant",
                                                              "content": answer}}]})


def talk(*lines: str, system: str | None = "Be brief.") -> Any:
    args = ["chat", "some/model", "--max-tokens", "4", *(["--system", system] if system else [])]
    return CliRunner().invoke(app, args, input="".join(f"{line}\n" for line in lines),
                              env={"COLUMNS": "80", "FORCE_COLOR": "1", "TERM": "xterm"})


def sent(server: FakeServer) -> list[list[dict[str, str]]]:
    return [json.loads(r.content)["messages"] for r in server.requests
            if r.url.path == "/v1/chat/completions"]


def test_ten_turns_outgrow_the_context_and_the_chat_drops_the_oldest(server: FakeServer) -> None:
    server.on("POST", "/v1/chat/completions", fake_model)
    turns = [f"turn{n} " + "and some more words " * 2 for n in range(10)]
    result = talk(*turns)
    assert result.exit_code == 0, result.output
    assert [f"heard turn{n}" in result.stdout for n in range(10)] == [True] * 10
    assert f"{DIM}(dropped the oldest turn to fit the model's context of {CONTEXT} tokens)" \
        in result.stdout
    assert result.stderr == ""
    answered = [messages for messages in sent(server) if words(messages) + 4 <= CONTEXT]
    assert len(answered) == 10
    assert all(messages[0] == {"role": "system", "content": "Be brief."} for messages in answered)
    assert [m["role"] for m in answered[-1]][:3] == ["system", "user", "assistant"]
    assert answered[-1][-1]["content"] == turns[-1]
    assert not any(turns[0] == m["content"] for m in answered[-1])


def test_an_error_is_one_red_line_and_the_next_turn_is_read(server: FakeServer) -> None:
    answers = iter([error(503, "unavailable", "the model is loading: try again in 5 s")])

    def flaky(request: httpx.Request) -> httpx.Response:
        return next(answers, None) or fake_model(request)

    server.on("POST", "/v1/chat/completions", flaky)
    result = talk("first", "second", system=None)
    assert result.exit_code == 1, "a turn failed: a script notices"
    assert result.stderr.count("\n") == 1
    assert f"{RED}Error: the model is loading: try again in 5 s" in result.stderr
    assert "heard second" in result.stdout and "heard first" not in result.stdout
    assert sent(server)[-1] == [{"role": "user", "content": "second"}], \
        "the failed turn is not sent again"


def test_a_turn_longer_than_the_context_alone_is_refused_and_the_chat_goes_on(
        server: FakeServer) -> None:
    server.on("POST", "/v1/chat/completions", fake_model)
    result = talk("hello", "word " * CONTEXT, "after", "/exit", "never sent")
    assert result.exit_code == 1
    assert "Error: this model's context is 60 tokens, and the prompt alone is" in result.stderr
    assert "(param: messages)" in result.stderr
    assert "heard hello" in result.stdout and "heard after" in result.stdout
    assert all("never" not in m["content"] for messages in sent(server) for m in messages)
