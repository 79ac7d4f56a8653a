"""``alallo chat MODEL``: talk to a model, a fine-tuned one or a base one, turn by turn
(``POST /v1/chat/completions``)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from alallo.cli._common import ApiKeyOption, UrlOption, console, open_client

__all__ = ["chat"]

_CONTROLS = {code: "\ufffd" for code in (*range(0x20), 0x7f) if chr(code) not in "\n\t"}
"""Control characters a model may produce (a random one does): shown as U+FFFD, never
sent to the terminal, where they would move the cursor or change its state."""


def _printable(text: str) -> str:
    return text.translate(_CONTROLS)


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
    read is a turn."""
    out = console()
    interactive = sys.stdin.isatty()
    messages: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []
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
            answer = client.chat_completion(model, messages, max_tokens=max_tokens,
                                            temperature=temperature)
            reply = _printable(answer["choices"][0]["message"]["content"] or "")
            messages.append({"role": "assistant", "content": reply})
            out.print(reply, markup=False, highlight=False)
