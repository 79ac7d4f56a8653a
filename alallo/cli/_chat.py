"""``alallo chat MODEL``: talk to a model, a fine-tuned one or a base one, turn by turn
(``POST /v1/chat/completions``).

A chat keeps going whatever a turn meets: when the conversation outgrows the model's
context, the oldest turns are dropped until it fits (the system message stays), and an
error the server answers is one red line, after which the next turn is read. Only end of
input (Ctrl-D) or ``/exit`` ends it.

The turns to drop are found by asking: the server refuses a prompt longer than the
context (400) before generating anything, so a refused try costs one tokenization.
Counting up front was left out: ``GET /v1/models/{id}`` tells the context's length in
tokens, but only the server's tokenizer (and the model's chat template) can say how
many tokens a conversation is.
"""

from __future__ import annotations

import re
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from alallo.cli._common import ApiKeyOption, UrlOption, console, error_line, open_client
from alallo.client import AlalloClientError, ApiError, Client

__all__ = ["chat"]

_CONTROLS = {code: "\ufffd" for code in (*range(0x20), 0x7f) if chr(code) not in "\n\t"}
"""Control characters a model may produce (a random one does): shown as U+FFFD, never
sent to the terminal, where they would move the cursor or change its state."""

_CONTEXT = re.compile(r"context(?: length)? is (\d+) tokens")
"""How a prompt longer than the model's context is refused, its length in group 1: by
alallo's own engine ("this model's context is 256 tokens, and the prompt alone is 412")
or vLLM's ("This model's maximum context length is 256 tokens ...")."""

Message = dict[str, str]


def _printable(text: str) -> str:
    return text.translate(_CONTROLS)


def _too_long(exc: AlalloClientError) -> re.Match[str] | None:
    """Where ``exc`` refuses a conversation that does not fit, the match of its wording
    (the context's length in group 1); else None."""
    if not isinstance(exc, ApiError) or exc.status_code != 400:
        return None
    return _CONTEXT.search(exc.message)


def _drop_oldest_turn(messages: list[Message]) -> bool:
    """Drop the oldest turn (a user message and the answers up to the next one), the
    system message kept; False when only the turn being asked is left."""
    first = 1 if messages and messages[0]["role"] == "system" else 0
    users = [i for i, message in enumerate(messages) if i >= first and message["role"] == "user"]
    if len(users) < 2:
        return False
    del messages[first:users[1]]
    return True


def _answer(client: Client, model: str, messages: list[Message], out: Console,
            params: dict[str, Any]) -> str:
    """The model's answer to ``messages``, dropping old turns as the context needs."""
    dropped, context = 0, None
    try:
        while True:
            try:
                answer = client.chat_completion(model, messages, **params)
                break
            except AlalloClientError as exc:
                context = _too_long(exc)
                if context is None or not _drop_oldest_turn(messages):
                    raise
                dropped += 1
    finally:
        if dropped:
            turns = "turn" if dropped == 1 else f"{dropped} turns"
            length = f" of {context.group(1)} tokens" if context else ""
            out.print(f"(dropped the oldest {turns} to fit the model's context{length})",
                      markup=False, style="dim")
    return _printable(answer["choices"][0]["message"]["content"] or "")


def chat(
    model: Annotated[str, typer.Argument(help="A model id: your fine-tuned model (ft:…) or "
                                              "one from `alallo models`.")],
    system: Annotated[str | None, typer.Option(help="A system message to start with.")] = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="The longest answer, in tokens.")] = 128,
    temperature: Annotated[float, typer.Option(min=0.0, help="0: always the likeliest "
                                                             "token.")] = 0.0,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Talk to a model: each line you type is your turn, the model answers; the
    conversation goes on until end of input (Ctrl-D) or /exit. From a pipe, each line
    read is a turn.

    When the conversation outgrows the model's context, the oldest turns are dropped
    (a dim line says so); an error is shown in one red line and the chat goes on. The
    exit status is 1 when a turn failed, so that a script notices.
    """
    out = console()
    errors = Console(stderr=True, soft_wrap=True, highlight=False)
    interactive = sys.stdin.isatty()
    messages: list[Message] = [{"role": "system", "content": system}] if system else []
    params: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature}
    failed = False
    if interactive:
        out.print(f"Talking to {model}. /exit or Ctrl-D to stop.", markup=False, style="dim")
    with open_client(url, api_key) as client:
        while True:
            try:
                text = input("> " if interactive else "")
            except (EOFError, KeyboardInterrupt):
                break
            if text.strip() == "/exit":
                break
            if not text.strip():
                continue
            messages.append({"role": "user", "content": text})
            try:
                reply = _answer(client, model, messages, out, params)
            except AlalloClientError as exc:
                messages.pop()  # the turn is not kept: the next one is asked without it
                errors.print(Text(f"Error: {error_line(exc)}", style="red"))
                failed = True
                continue
            messages.append({"role": "assistant", "content": reply})
            out.print(reply, markup=False, highlight=False)
    if failed:
        raise typer.Exit(1)
