"""The model catalogue's names (:mod:`alallo.capacity._catalogue`): a name that is no
Hugging Face hub id is refused with what is wrong with it, before any hub is asked, and
the catalogue's rule agrees with the hub client's own (issue 31)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_hub import patch_hub_client
from hypothesis import given, settings
from hypothesis import strategies as st

from alallo import InvalidRequest
from alallo.capacity import HUB_ID, Catalogue, find_on_hub
from alallo.capacity._catalogue import hub_id_problem

pytestmark = pytest.mark.unit

MALFORMED = [
    ("models/alallo--tiny-gpt2", "the name has -- in it ('--' stands for '/' in the Hugging "
                                 "Face cache's folder names: 'alallo/tiny-gpt2'?)"),
    ("acme/" + "x" * 10_000, "too long: the name has 10000 characters, at most 96"),
    ("acme/tiny model", "the name has characters a hub id cannot have (' '): letters, "
                        "digits and '_', '.', '-' only"),
    ("acme/tiny@" + "r" * 300, "too long: the revision has 300 characters, at most 255"),
    ("a/b/c", "a hub id is ORG/NAME, with one '/' (this has 2)"),
    ("acme/-tiny", "the name starts or ends with '-' or '.'"),
    ("ac..me/tiny", "the organisation has .. in it"),
    ("acme/tiny.git", "the name ends in '.git'"),
    ("acme/tiny@", "the revision after '@' is empty"),
]


@pytest.mark.parametrize(("name", "reason"), MALFORMED)
def test_a_malformed_hub_id_is_refused_saying_what_is_wrong(name: str, reason: str) -> None:
    assert hub_id_problem(name) == reason
    with pytest.raises(InvalidRequest) as refused:
        Catalogue().resolve(name)
    assert refused.value.param == "model"
    assert refused.value.message.endswith(f"is not a Hugging Face hub id: {reason}")
    assert len(refused.value.message) < 400, "a long name is cut, not repeated whole"


def test_a_path_too_long_for_the_file_system_is_refused_not_a_server_error() -> None:
    with pytest.raises(InvalidRequest) as refused:
        Catalogue().resolve("/" + "x" * 10_000)
    assert refused.value.param == "model" and "File name too long" in refused.value.message


@pytest.mark.parametrize(("name", "reason"), MALFORMED[:3])
def test_the_hub_is_not_asked_about_a_malformed_id(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, reason: str) -> None:
    patch_hub_client(monkeypatch, "http://127.0.0.1:9", tmp_path / "hf")  # nothing listens
    with pytest.raises(InvalidRequest) as refused:  # not Unavailable: no retry makes it right
        find_on_hub(name, None)
    assert refused.value.param == "model" and refused.value.message.endswith(reason)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="aZ09-_./@ é", min_size=1, max_size=12)
       | st.builds("{}/{}".format, st.text("ab-._", max_size=98), st.text("ab-._", max_size=98)))
def test_the_catalogue_rule_is_the_hubs(name: str) -> None:
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    problem = hub_id_problem(name)
    assert (HUB_ID.match(name) is not None) == (problem is None), (name, problem)
    repo = name.partition("@")[0]
    try:
        validate_repo_id(repo)
        hub_says_valid = repo.count("/") == 1
    except HFValidationError:
        hub_says_valid = False
    if problem is None:
        assert hub_says_valid, name  # what the catalogue lets through, the hub client takes
    elif hub_says_valid and repo.isascii():
        assert "revision" in problem, (name, problem)  # only the revision can be wrong then


@pytest.mark.parametrize("name", ["alallo/tiny-gpt3", "Alallo/tiny-llama", "alallo/tiny gpt2"])
def test_a_typo_among_the_built_in_models_is_no_hub_id_and_names_the_closest(name: str) -> None:
    catalogue = Catalogue()
    assert not catalogue.hub_may_have(name)
    with pytest.raises(InvalidRequest) as refused:
        catalogue.resolve(name)
    assert refused.value.param == "model"
    assert refused.value.message.startswith(
        f"unknown model {name!r}: alallo/ names this server's built-in models, none on "
        "the Hugging Face hub; the closest known: 'alallo/tiny-")
    assert catalogue.hub_may_have("acme/tiny-gpt3") and not catalogue.hub_may_have("tiny")


def test_a_built_in_name_like_none_lists_the_built_in_models_once() -> None:
    with pytest.raises(InvalidRequest) as refused:
        Catalogue().resolve("alallo/qqqqqqqqqqqqqq")
    assert refused.value.message == (
        "unknown model 'alallo/qqqqqqqqqqqqqq': alallo/ names this server's built-in models, "
        "none on the Hugging Face hub; they are alallo/tiny-gpt2, alallo/tiny-llama")
