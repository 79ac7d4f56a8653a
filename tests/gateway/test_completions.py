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
    ({"model": TINY, "messages": CHAT, "n": 0}, 400, "n"),
    ({"model": TINY, "messages": CHAT, "top_logprobs": 2}, 400, "top_logprobs"),
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
    ({"response_format": {"type": "json_object"}}, "response_format"),
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


def test_logit_bias_and_the_penalties_are_openais_on_transformers(
        sdk: openai.OpenAI, live_server: LiveServer) -> None:
    """Each step's logits get ``bias[j] - count[j] * frequency - (count[j] > 0) * presence``
    (OpenAI's formula; the count is of generated tokens): checked against a greedy loop
    written here from that formula, on the server's weights."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    sdk.completions.create(model=TINY, prompt="Hello", max_tokens=1)  # its files, built
    directory = live_server.data_dir / "models" / "alallo--tiny-gpt2"
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForCausalLM.from_pretrained(directory)
    (token,) = tokenizer("x", add_special_tokens=False).input_ids

    def expected(bias: float, presence: float, frequency: float) -> str:
        ids = tokenizer("Hello", return_tensors="pt").input_ids
        generated: list[int] = []
        with torch.no_grad():
            for _ in range(12):
                logits = model(ids).logits[0, -1]
                logits[token] += bias
                for j in set(generated):
                    logits[j] -= generated.count(j) * frequency + presence
                generated.append(int(logits.argmax()))
                if generated[-1] == tokenizer.eos_token_id:
                    break
                ids = torch.cat([ids, torch.tensor([[generated[-1]]])], dim=1)
        return str(tokenizer.decode(generated, skip_special_tokens=True))

    for bias, presence, frequency in [(100, 0, 0), (6, 0, 2), (3, 2, 0), (0, 1.5, 1)]:
        answer = sdk.completions.create(
            model=TINY, prompt="Hello", max_tokens=12, temperature=0,
            logit_bias={str(token): bias} if bias else None,  # type: ignore[arg-type]
            presence_penalty=presence, frequency_penalty=frequency)
        assert answer.choices[0].text == expected(bias, presence, frequency), \
            (bias, presence, frequency)
    assert answer.choices[0].text != expected(0, 0, 0), "the penalties changed the answer"
    assert expected(100, 0, 0) == "x" * 12
    assert 0 < expected(6, 0, 2).count("x") < 12, "the frequency penalty let others win"
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.completions.create(model=TINY, prompt="Hello", max_tokens=2,
                               logit_bias={"99999999": 5})
    assert refused.value.param == "logit_bias" and "vocabulary" in refused.value.message


def test_n_choices_and_logprobs_on_transformers(sdk: openai.OpenAI,
                                                live_server: LiveServer) -> None:
    """``n`` answers (greedy: each the reference's), and each token's log-probability, the
    model's own (before sampling), in chat's and completions' shapes, streamed and not."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    sdk.completions.create(model=TINY, prompt="Hello", max_tokens=1)  # its files, built
    text, _, completion_tokens = reference(live_server, prompt="Hello", max_tokens=6)
    directory = live_server.data_dir / "models" / "alallo--tiny-gpt2"
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForCausalLM.from_pretrained(directory)
    ids = tokenizer("Hello", return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=6, do_sample=False,
                             pad_token_id=tokenizer.eos_token_id)
        steps = torch.log_softmax(model(out).logits[0, ids.shape[1] - 1:-1], dim=-1)
    chosen = out[0, ids.shape[1]:]
    expected = [float(steps[i, t]) for i, t in enumerate(chosen)]

    answer = sdk.completions.create(model=TINY, prompt="Hello", max_tokens=6, temperature=0,
                                    n=2, logprobs=2)
    assert [c.index for c in answer.choices] == [0, 1]
    assert [c.text for c in answer.choices] == [text, text]
    assert answer.usage is not None and answer.usage.completion_tokens == 2 * completion_tokens
    logprobs = answer.choices[1].logprobs
    assert logprobs is not None and len(logprobs.tokens or []) == len(expected)
    assert logprobs.token_logprobs == pytest.approx(expected, abs=1e-4)
    assert all(len(top) <= 3 and max(top.values()) == pytest.approx(lp, abs=1e-4)
               for top, lp in zip(logprobs.top_logprobs or [], expected, strict=True))
    sampled = sdk.completions.create(model=TINY, prompt="Hello", max_tokens=6, seed=3,
                                     temperature=1.5, logprobs=1).choices[0].logprobs
    assert sampled is not None and all(  # the chosen token is among them, as OpenAI's
        top[token] == lp for token, lp, top in zip(sampled.tokens or [], sampled.token_logprobs
                                                   or [], sampled.top_logprobs or [],
                                                   strict=True))
    offsets = logprobs.text_offset or []
    assert offsets[0] == 0 and offsets == sorted(offsets) and offsets[-1] < len(text)

    chat = sdk.chat.completions.create(model=TINY, messages=CHAT, max_tokens=5,  # type: ignore[arg-type]
                                       n=3, seed=7, logprobs=True, top_logprobs=1)
    assert sorted(c.index for c in chat.choices) == [0, 1, 2]
    for choice in chat.choices:
        content = choice.logprobs.content if choice.logprobs else None
        assert content and b"".join(bytes(t.bytes or []) for t in content).decode(
            errors="replace") == choice.message.content, "the tokens' bytes are the text"
        assert all(t.logprob <= 0 and len(t.top_logprobs) == 1 for t in content)
    again = sdk.chat.completions.create(model=TINY, messages=CHAT, max_tokens=5,  # type: ignore[arg-type]
                                        n=3, seed=7)
    assert [c.message.content for c in again.choices] == \
        [c.message.content for c in chat.choices], "the same seed, the same answers"

    stream = sdk.chat.completions.create(model=TINY, messages=CHAT, max_tokens=5,  # type: ignore[arg-type]
                                         n=3, seed=7, logprobs=True, stream=True,
                                         stream_options={"include_usage": True})
    texts: dict[int, str] = {}
    tokens: dict[int, bytes] = {}
    finished = set()
    for chunk in stream:
        for part in chunk.choices:
            texts[part.index] = texts.get(part.index, "") + (part.delta.content or "")
            if part.logprobs and part.logprobs.content:
                tokens[part.index] = tokens.get(part.index, b"") + b"".join(
                    bytes(t.bytes or []) for t in part.logprobs.content)
            if part.finish_reason:
                finished.add(part.index)
    assert finished == {0, 1, 2}
    assert [texts[i] for i in range(3)] == [c.message.content for c in chat.choices]
    assert [tokens[i].decode(errors="replace") for i in range(3)] == \
        [texts[i] for i in range(3)]


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
