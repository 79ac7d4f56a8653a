"""Finding a model on the Hugging Face hub, when a job names one the cache lacks.

:func:`find_on_hub` asks the hub (``HfApi.model_info``) for the model at the revision the job
names (its default branch otherwise) and reads its ``config.json`` into a scratch directory
(not the cache: a snapshot holding only its config would pass for a cached model). The answer
is a :class:`CatalogueModel` with ``on_hub`` set: its commit hash pinned as the job's
revision, its size from the hub's safetensors index, its context from its config. The
weights themselves are downloaded by the trainer when the run starts
(:mod:`alallo.trainers._hub`). Blocking: call it in a worker thread.

Each way of not finding the model is told in its own words (HTTP 422, ``param="model"``):
not a hub id at all (:func:`~alallo.capacity._catalogue.hub_id_problem`, decided before
the hub is asked), not on the hub, no such revision, gated (and whether the server has a
token), and this server not reaching the hub: a 4xx as well, never a 5xx that a client (the
``openai`` SDK among them) would retry: the name cannot be checked, so the job cannot be
planned, and the message says so.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from .._errors import InvalidRequest
from ._catalogue import CatalogueModel, context_of, hub_id_problem, shown_name

__all__ = ["find_on_hub", "hub_reachable"]


def hub_reachable() -> bool:
    """Whether this server may ask the hub: ``huggingface_hub`` is installed and
    ``HF_HUB_OFFLINE`` is not set."""
    try:
        from huggingface_hub import constants
    except ImportError:
        return False
    return not constants.HF_HUB_OFFLINE


def find_on_hub(name: str, token: str | None) -> CatalogueModel:
    """The hub model ``name`` (``org/name`` or ``org/name@revision``), pinned to its commit.

    Raises:
        InvalidRequest: not a hub id (saying what is wrong with it), not on the hub, no
            such revision, gated, or the hub cannot be reached or answered with an error
            of its own (``param="model"``).
    """
    import httpx2  # huggingface_hub's HTTP client: its transport errors are its own
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if (problem := hub_id_problem(name)) is not None:
        raise InvalidRequest(f"unknown model {shown_name(name)}: not a Hugging Face hub id: "
                             f"{problem}", param="model")
    repo, _, revision = name.partition("@")
    try:
        info = HfApi().model_info(repo, revision=revision or None, token=token)
        sha = info.sha or ""
        with tempfile.TemporaryDirectory(prefix="alallo-hub-") as scratch:
            config = Path(hf_hub_download(repo, "config.json", revision=sha, token=token,
                                          local_dir=scratch))
            context = context_of(json.loads(config.read_text()))
    except GatedRepoError:
        how = ("the server's token (ALALLO_HF_TOKEN) has not been granted access: ask for it "
               "on the model's page" if token else
               "the operator sets ALALLO_HF_TOKEN to the token of an account granted access")
        raise InvalidRequest(f"{repo!r} is gated on the Hugging Face hub: {how}",
                             param="model") from None
    except RevisionNotFoundError:
        raise InvalidRequest(f"{repo!r} has no revision {revision!r} on the Hugging Face hub",
                             param="model") from None
    except RepositoryNotFoundError:
        raise InvalidRequest(f"no model {repo!r} on the Hugging Face hub (or it is private: "
                             "the operator's ALALLO_HF_TOKEN must see it)",
                             param="model") from None
    except EntryNotFoundError:
        raise InvalidRequest(f"{repo!r} has no config.json: not a transformers model",
                             param="model") from None
    except HFValidationError as exc:  # a rule of the hub's client that hub_id_problem lacks
        raise InvalidRequest(f"{shown_name(name)} is not a Hugging Face hub id: {exc}",
                             param="model") from None
    except (HfHubHTTPError, httpx2.HTTPError, OSError, ValueError) as exc:
        raise InvalidRequest(
            f"{repo!r} is neither in this server's Hugging Face cache nor on a hub it can "
            f"reach now ({type(exc).__name__}: {exc}): the operator downloads it "
            f"(huggingface-cli download {repo})", param="model") from None
    parameters = info.safetensors.total if info.safetensors is not None else 0
    return CatalogueModel(id=name, parameters=parameters, context_length=context,
                          revision=sha, on_hub=True)
