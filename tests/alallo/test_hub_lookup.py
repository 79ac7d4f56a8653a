"""Finding a model on the Hugging Face hub when the cache lacks it: every answer, with a
token and without (:func:`alallo.capacity.find_on_hub`, against ``tests/fake_hub.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_hub import FakeHub, patch_hub_client, serve_fake_hub

from alallo import InvalidRequest
from alallo.capacity import find_on_hub

pytestmark = pytest.mark.unit

TOKEN = "hf_" + "t" * 34


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": 64}))
    weights = tmp_path / "weights-only"
    weights.mkdir()
    (weights / "README.md").write_text("no config")
    hub = FakeHub()
    sha = hub.add_repo("acme/open", model)
    hub.add_repo("acme/gated", model, gated_token=TOKEN)
    hub.add_repo("acme/readme", weights)
    with serve_fake_hub(hub) as url:
        patch_hub_client(monkeypatch, url, tmp_path / "hf")
        yield sha


def test_a_model_is_found_pinned_to_its_commit(hub: str, tmp_path: Path) -> None:
    found = find_on_hub("acme/open", None)
    assert (found.id, found.revision, found.context_length, found.on_hub) == (
        "acme/open", hub, 64, True)
    assert find_on_hub(f"acme/open@{hub}", None).revision == hub
    assert not (tmp_path / "hf" / "hub" / "models--acme--open").exists(), \
        "its config was read aside: the cache does not hold a model without weights"
    assert find_on_hub("acme/gated", TOKEN).revision == hub


@pytest.mark.parametrize(("name", "token", "words"), [
    ("acme/none", None, "no model 'acme/none' on the Hugging Face hub"),
    ("acme/open@v2", None, "'acme/open' has no revision 'v2' on the Hugging Face hub"),
    ("acme/gated", None, "'acme/gated' is gated on the Hugging Face hub: the operator sets "
                         "ALALLO_HF_TOKEN"),
    ("acme/gated", "hf_wrong", "'acme/gated' is gated on the Hugging Face hub: the server's "
                               "token (ALALLO_HF_TOKEN) has not been granted access"),
    ("acme/readme", None, "'acme/readme' has no config.json"),
    ("not a hub id", None, "unknown model 'not a hub id'"),
])
def test_what_cannot_be_had_is_said(hub: str, name: str, token: str | None, words: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        find_on_hub(name, token)
    assert refused.value.param == "model" and refused.value.message.startswith(words)


def test_a_hub_that_does_not_answer_is_a_refusal_no_retry_can_change(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Not a 503: a client (the openai SDK) retries a 5xx, and the name stays unchecked.
    patch_hub_client(monkeypatch, "http://127.0.0.1:9", tmp_path / "hf")  # nothing listens
    with pytest.raises(InvalidRequest, match="'acme/x' is neither in this server's Hugging "
                                             "Face cache nor on a hub it can reach now") as e:
        find_on_hub("acme/x", None)
    assert e.value.param == "model" and "huggingface-cli download acme/x" in e.value.message
