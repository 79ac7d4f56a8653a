"""``/v1/chat/completions`` and ``/v1/completions`` on a base model, through the ``openai``
SDK as its users call it, streaming and not; the text is what ``transformers`` generates
from the same weights; refusals name the field (issue 17). The fine-tuned model's answers
are in test_models_out.py, another account's model in test_tenants.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from support import LiveServer, server_env
from typer.testing import CliRunner

from alallo.cli import app

pytestmark = pytest.mark.any_backend  # the ledger's SQL is the store's subject, tested on both

TINY = "alallo/tiny-gpt2"
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]


@pytest.fixture
def sdk(live_server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=live_server.api_key,
                       max_retries=0, timeout=120) as client:
        yield client


def reference(live_server: LiveServer, *, messages: list[dict[str, str]] | None = None,
              prompt: str | None = None, max_tokens: int) -> tuple[str, int, int]:
    """``transformers`` greedy generate on the server's tiny model: text, prompt and
    completion tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory = live_server.data_dir / "models" / "alallo--tiny-gpt2"
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForCausalLM.from_pretrained(directory)
    if messages is not None:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        inputs = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    else:
        inputs = tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=max_tokens, do_sample=False,
                             pad_token_id=tokenizer.eos_token_id)
    prompt_tokens = inputs["input_ids"].shape[1]
    generated = out[0, prompt_tokens:]
    return tokenizer.decode(generated, skip_special_tokens=True), prompt_tokens, len(generated)


def test_chat_through_the_openai_sdk_streaming_and_not(sdk: openai.OpenAI,
                                                        live_server: LiveServer) -> None:
    answer = sdk.chat.completions.create(model=TINY, messages=CHAT,  # type: ignore[arg-type]
                                         max_tokens=8, temperature=0)
    text, prompt_tokens, completion_tokens = reference(live_server, messages=CHAT, max_tokens=8)
    assert answer.id.startswith("chatcmpl-") and answer.object == "chat.completion"
    assert answer.model == TINY
    (choice,) = answer.choices
    assert choice.message.role == "assistant" and choice.message.content == text
    assert choice.finish_reason == ("length" if completion_tokens == 8 else "stop")
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (
        prompt_tokens, completion_tokens)
    assert answer.usage.total_tokens == prompt_tokens + completion_tokens

    chunks = list(sdk.chat.completions.create(
        model=TINY, messages=CHAT, max_tokens=8, temperature=0,  # type: ignore[arg-type]
        stream=True, stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert "".join(pieces) == text and len(pieces) >= 3, "the role, the text, the finish"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == choice.finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == completion_tokens

    # Without max_tokens, as many as the model's context (256 tokens) leaves.
    unbounded = sdk.chat.completions.create(model=TINY, messages=CHAT,  # type: ignore[arg-type]
                                            temperature=0)
    assert unbounded.usage is not None and unbounded.usage.total_tokens <= 256
    assert unbounded.usage.completion_tokens >= completion_tokens


def test_text_completion_and_a_stop_sequence(sdk: openai.OpenAI,
                                             live_server: LiveServer) -> None:
    answer = sdk.completions.create(model=TINY, prompt="Once upon", max_tokens=12, temperature=0)
    text, _, _ = reference(live_server, prompt="Once upon", max_tokens=12)
    assert answer.object == "text_completion" and answer.choices[0].text == text
    streamed = "".join(c.choices[0].text for c in sdk.completions.create(
        model=TINY, prompt="Once upon", max_tokens=12, temperature=0, stream=True))
    assert streamed == text
    stop = text[3:5]
    assert len(stop) == 2, text
    cut = sdk.completions.create(model=TINY, prompt="Once upon", max_tokens=12,
                                 temperature=0, stop=[stop])
    assert cut.choices[0].text == text[:text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


@pytest.mark.parametrize(("body", "status", "param"), [
    ({"model": "nobody/nothing", "messages": CHAT}, 404, "model"),
    ({"model": "/etc", "messages": CHAT}, 404, "model"),  # a path on the server is no model
    ({"model": TINY, "messages": CHAT, "max_tokens": 100_000}, 400, "max_tokens"),
    ({"model": TINY, "messages": CHAT, "n": 2}, 400, "n"),
    ({"model": TINY, "messages": []}, 400, "messages"),
    ({"model": TINY, "messages": [{"role": "bot", "content": "x"}]}, 400, "messages.0.role"),
    ({"model": TINY, "messages": CHAT, "temperature": 3}, 400, "temperature"),
    ({"model": TINY, "messages": CHAT, "stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
    # Longer than the model's context (256 tokens): refused before a stream starts.
    ({"model": TINY, "messages": [{"role": "user", "content": "x" * 300}], "stream": True},
     400, "messages"),
    ({"model": TINY, "messages": CHAT, "max_tokens": 250, "stream": True}, 400, "max_tokens"),
])
def test_a_bad_request_is_refused_naming_the_field(live_server: LiveServer, body: dict[str, Any],
                                                   status: int, param: str) -> None:
    response = httpx.post(f"{live_server.url}/v1/chat/completions", json=body,
                          headers=live_server.headers, timeout=120)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["param"] == param


@pytest.mark.parametrize(("create", "param"), [
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "tools"),
    ({"logprobs": True, "top_logprobs": 2}, "logprobs"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"frequency_penalty": 0.5}, "frequency_penalty"),
    ({"store": True}, "store"),
    ({"extra_body": {"not_an_openai_parameter": 1}}, "not_an_openai_parameter"),
])
def test_a_parameter_the_server_cannot_honour_is_refused_naming_it(
        sdk: openai.OpenAI, create: dict[str, Any], param: str) -> None:
    # Issue 32: they were dropped, and the answer looked like one that honoured them.
    with pytest.raises(openai.APIStatusError) as refused:
        sdk.chat.completions.create(model=TINY, messages=CHAT, max_tokens=2,  # type: ignore[arg-type]
                                    **create)
    assert 400 <= refused.value.status_code < 500
    assert refused.value.param == param and param in refused.value.message, refused.value


def test_a_parameter_sent_with_the_value_that_asks_for_nothing_is_taken(
        sdk: openai.OpenAI) -> None:
    answer = sdk.chat.completions.create(
        model=TINY, messages=CHAT, max_tokens=2, temperature=0,  # type: ignore[arg-type]
        tools=[], logprobs=False, frequency_penalty=0, presence_penalty=0.0, store=False,
        response_format={"type": "text"}, user="someone", parallel_tool_calls=True)
    assert answer.choices[0].message.content is not None
    text = sdk.completions.create(model=TINY, prompt="Hello", max_tokens=2, temperature=0,
                                  echo=False, best_of=1, logprobs=0, user="someone")
    assert text.choices[0].text is not None
    with pytest.raises(openai.APIStatusError) as refused:
        sdk.completions.create(model=TINY, prompt="Hello", max_tokens=2, echo=True)
    assert refused.value.param == "echo"


def test_tokens_are_charged_at_the_operators_price(server_factory: Any) -> None:
    server = server_factory(ALALLO_INFERENCE_PRICE_PER_1M_TOKENS="1000")
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=120) as client:
        balance = local_balance(server)
        answer = client.post("/v1/completions", json={"model": TINY, "prompt": "Hi",
                                                      "max_tokens": 4})
    assert answer.status_code == 200, answer.text
    tokens = answer.json()["usage"]["total_tokens"]
    assert tokens > 0
    assert local_balance(server) == pytest.approx(balance - tokens * 1000 / 1e6)


def local_balance(server: LiveServer) -> float:
    """The local account's balance, as ``alallo accounts list --json`` tells the operator."""
    result = CliRunner().invoke(app, ["accounts", "list", "--json", "--data-dir",
                                      str(server.data_dir)], env=server_env(server.data_dir))
    assert result.exit_code == 0, result.output
    (account,) = json.loads(result.stdout)["data"]
    return float(account["balance"])


def test_a_model_served_by_transformers_says_why_a_parameter_needs_vllm(
        sdk: openai.OpenAI) -> None:
    # Issue 33: this server has vLLM switched off (the suite's ALALLO_SERVING_ENGINE), so
    # even the Llama-shaped tiny model is on transformers, and says so.
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.completions.create(model="alallo/tiny-llama", prompt=["Hello", "Hi"], max_tokens=2)
    assert refused.value.param == "prompt"
    message = refused.value.message
    assert "served by transformers" in message and "ALALLO_SERVING_ENGINE" in message, message
    answer = sdk.completions.create(model="alallo/tiny-llama", prompt="Hello", max_tokens=3,
                                    temperature=0)
    assert answer.model == "alallo/tiny-llama"
    assert answer.usage is not None and answer.usage.completion_tokens == 3
