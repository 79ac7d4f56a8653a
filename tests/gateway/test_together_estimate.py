"""Together's price estimate, ``POST /v1/fine-tunes/estimate-price`` (what Together's SDK
asks before ``fine_tuning.create``), in Together's shapes and from alallo's own estimate."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support import EXAMPLES, LiveServer

AVAILABLE = {"estimation_available", "allowed_to_proceed", "estimated_total_price",
             "estimated_train_token_count", "estimated_eval_token_count", "user_limit"}
"""Together's ``AvailableEstimate``."""


@pytest.fixture
def api(live_server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server.url, headers=live_server.headers, timeout=60) as c:
        yield c


@pytest.fixture
def file_id(api: httpx.Client) -> str:
    with (EXAMPLES / "sample.jsonl").open("rb") as f:
        return str(api.post("/v1/files", files={"file": ("sample.jsonl", f)},
                            data={"purpose": "fine-tune"}).json()["id"])


def together(api: httpx.Client, **request: Any) -> httpx.Response:
    return api.post("/v1/fine-tunes/estimate-price", json=request)


def test_the_estimate_is_togethers_shape_with_alallos_figures(api: httpx.Client,
                                                               file_id: str) -> None:
    # What Together's SDK sends for a LoRA SFT job of 2 epochs.
    answer = together(api, training_file=file_id, model="alallo/tiny-gpt2", n_epochs=2,
                      n_evals=0, training_method={"method": "sft", "train_on_inputs": "auto"},
                      training_type={"type": "Lora", "lora_r": 8, "lora_alpha": 16,
                                     "lora_dropout": 0.0, "lora_trainable_modules": "all-linear"})
    assert answer.status_code == 200, answer.text
    estimate = answer.json()
    assert set(estimate) == AVAILABLE and estimate["estimation_available"] is True
    ours = api.post("/v1/fine_tuning/estimates", json={
        "model": "alallo/tiny-gpt2", "training_file": file_id,
        "hyperparameters": {"n_epochs": 2, "lora_rank": 8, "lora_alpha": 16}}).json()
    assert estimate["estimated_total_price"] == ours["price"]["high"]
    assert estimate["estimated_train_token_count"] == ours["train_tokens"] > 0
    assert estimate["allowed_to_proceed"] is ours["allowed_to_proceed"]
    assert estimate["estimated_eval_token_count"] == 0
    account = api.get("/v1/account").json()
    assert estimate["user_limit"] == account["billing_limit"]

    # Twice the epochs: twice the tokens; full training and evaluations counted too.
    four = together(api, training_file=file_id, model="alallo/tiny-gpt2", n_epochs=4).json()
    assert four["estimated_train_token_count"] == pytest.approx(
        2 * estimate["estimated_train_token_count"], rel=0.05)
    full = together(api, training_file=file_id, model="alallo/tiny-gpt2",
                    training_type={"type": "Full"}, validation_file=file_id, n_evals=3).json()
    assert full["estimated_eval_token_count"] > 0


def test_a_job_no_node_can_run_is_togethers_unavailable_estimate(api: httpx.Client,
                                                                  file_id: str) -> None:
    answer = together(api, training_file=file_id, model="meta-llama/Llama-3.1-70B",
                      training_type={"type": "Full"})
    assert answer.status_code == 200, answer.text
    estimate = answer.json()
    assert estimate["estimation_available"] is False
    assert estimate["unavailable_reason"].startswith("Not available right now.")
    assert set(estimate) == {"estimation_available", "unavailable_reason"}


@pytest.mark.parametrize(("request_", "param"), [
    ({"training_file": None}, "training_file"),
    ({"model": ""}, "model"),
    ({"n_evals": 2}, "n_evals"),
    ({"training_type": {"type": "Qlora"}}, "training_type"),
    ({"packing": True}, "packing"),
    ({"training_method": {"method": "sft", "train_on_inputs": True}},
     "training_method.train_on_inputs"),
    ({"training_file": "file-nope"}, "training_file"),
])
def test_a_bad_request_is_refused_naming_the_field(api: httpx.Client, file_id: str,
                                                   request_: dict[str, Any], param: str) -> None:
    body = {key: value for key, value in
            {"training_file": file_id, "model": "alallo/tiny-gpt2", **request_}.items()
            if value is not None}
    answer = together(api, **body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"].startswith(param)


async def test_both_clients_ask_it(live_server: LiveServer, file_id: str) -> None:
    from alallo import AsyncClient, Client

    request = {"training_file": file_id, "model": "alallo/tiny-gpt2", "n_epochs": 1}
    with Client(live_server.url, api_key=live_server.api_key) as client:
        answer = client.together_estimate(**request)
    async with AsyncClient(live_server.url, api_key=live_server.api_key) as aclient:
        assert await aclient.together_estimate(**request) == answer
    assert set(answer) == AVAILABLE and answer["estimated_train_token_count"]
