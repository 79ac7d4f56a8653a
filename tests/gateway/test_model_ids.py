"""A model id that no retry can make right answers 400 saying what is wrong with it, on a
server that asks the hub about models its cache lacks (issue 31: it answered 503 "try
again", and a client that retries a 5xx looped). The hub is a closed port: nothing here may
reach it, and nothing does. A typo among the built-in models (``alallo/``) never asks the
hub: it answers 400 naming the closest models the server knows (issue 35)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from support import EXAMPLES, LiveServer, upload

pytestmark = pytest.mark.any_backend  # the catalogue's check, not the store's

MALFORMED = {
    "models/alallo--tiny-gpt2": "the name has -- in it ('--' stands for '/' in the Hugging "
                                "Face cache's folder names: 'alallo/tiny-gpt2'?)",
    "acme/" + "x" * 10_000: "too long: the name has 10000 characters",
    "acme/tiny model!": "the name has characters a hub id cannot have (' ', '!')",
}


async def test_a_malformed_model_id_answers_400_naming_the_problem_never_503(
        server_factory: Callable[..., LiveServer]) -> None:
    server = server_factory(HF_HUB_OFFLINE="0", HF_ENDPOINT="http://127.0.0.1:9")
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers,
                                 timeout=30) as client:
        file_id = (await upload(client, EXAMPLES / "sample.jsonl")).json()["id"]
        for model, words in MALFORMED.items():
            for path in ("/v1/fine_tuning/estimates", "/v1/fine_tuning/jobs"):
                answer = await client.post(path, json={"model": model, "training_file": file_id})
                assert answer.status_code == 400, (model[:40], answer.text[:300])
                error = answer.json()["error"]
                assert error["param"] == "model"
                assert "is not a Hugging Face hub id: " in error["message"], error["message"]
                assert words in error["message"]
        assert (await client.get("/v1/fine_tuning/jobs")).json()["data"] == []


async def test_a_hub_id_the_server_cannot_check_is_refused_naming_the_closest_models(
        server_factory: Callable[..., LiveServer]) -> None:
    # It answered 503, which the openai SDK retries (issue 32): no retry can check it.
    server = server_factory(HF_HUB_OFFLINE="0", HF_ENDPOINT="http://127.0.0.1:9")
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers,
                                 timeout=30) as client:
        file_id = (await upload(client, EXAMPLES / "sample.jsonl")).json()["id"]
        answer = await client.post("/v1/fine_tuning/jobs", json={
            "model": "acme/tiny-gpt2", "training_file": file_id})
        assert 400 <= answer.status_code < 500, answer.text
        error = answer.json()["error"]
        assert error["param"] == "model"
        assert error["message"].startswith("'acme/tiny-gpt2' is neither in this server's "
                                           "Hugging Face cache nor on a hub it can reach now")
        assert "; the closest known: 'alallo/tiny-gpt2'" in error["message"], error["message"]
        # A typo among the built-in models is no hub id: the hub is not asked (it would
        # say it cannot be reached), the closest built-in names are (issue 35).
        for path in ("/v1/fine_tuning/estimates", "/v1/fine_tuning/jobs"):
            await _typo_is_refused_naming_the_built_in_models(client, path, file_id)
        assert (await client.get("/v1/fine_tuning/jobs")).json()["data"] == []


async def test_an_offline_server_names_the_closest_models_for_a_typo_or_a_missing_hub_id(
        client: httpx.AsyncClient, file_id: str) -> None:
    # HF_HUB_OFFLINE=1 (the tests' setting): it read as an outage (issue 35).
    for path in ("/v1/fine_tuning/estimates", "/v1/fine_tuning/jobs"):
        await _typo_is_refused_naming_the_built_in_models(client, path, file_id)
        answer = await client.post(path, json={"model": "acme/tiny-gpt2",
                                               "training_file": file_id})
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["param"] == "model"
        assert error["message"].startswith("'acme/tiny-gpt2' is not in this server's "
                                           "Hugging Face cache (the operator downloads it")
        assert "; the closest known: 'alallo/tiny-gpt2'" in error["message"], error["message"]


async def _typo_is_refused_naming_the_built_in_models(client: httpx.AsyncClient, path: str,
                                                      file_id: str) -> None:
    answer = await client.post(path, json={"model": "alallo/tiny-gpt3",
                                           "training_file": file_id})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == "model"
    assert error["message"].startswith(
        "unknown model 'alallo/tiny-gpt3': alallo/ names this server's built-in models, "
        "none on the Hugging Face hub; the closest known: 'alallo/tiny-gpt2'"), error["message"]
