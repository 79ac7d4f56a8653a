"""The model catalogue: which base models a job may name, and where they run.

A job names a built-in model, a local Hugging Face model directory by its absolute path, or
a Hugging Face hub id (``org/name``, optionally ``org/name@revision``) whose weights are in
this server's Hugging Face cache (``HF_HOME``): resolved with ``huggingface_hub`` from the
cache alone (``snapshot_download(..., local_files_only=True)``), so the answer is instant and
the same offline (``HF_HUB_OFFLINE=1``). The snapshot's commit hash is the model's revision:
a job records it, and a rerun trains the same weights. A hub id the cache lacks is looked up
on the hub by the runtime (:mod:`alallo.capacity._hub`) and :meth:`Catalogue.remember`-ed.

A name with a ``/`` that is no well-formed hub id (``models/alallo--tiny-gpt2``, a name of
10,000 characters, a space) is refused at once with what is wrong (:func:`hub_id_problem`):
it never reaches the hub, whose client would refuse it too, but as an error that read as
"try again".

Nor does a name of ``alallo/``, the built-in models' namespace (no hub repo): a typo there
(``alallo/tiny-gpt3``) is refused at once, naming the closest models this server knows, as
is any name found nowhere (``; the closest known: 'alallo/tiny-gpt2'``).
"""

from __future__ import annotations

import builtins
import contextlib
import difflib
import re
from dataclasses import dataclass, replace
from pathlib import Path

from .._errors import InvalidRequest

__all__ = ["HUB_ID", "TINY_GPT2", "TINY_LLAMA", "TINY_MODELS", "Catalogue", "CatalogueModel", "context_of", "hub_id_problem",
           "shown_name"]

TINY_GPT2 = "alallo/tiny-gpt2"
TINY_LLAMA = "alallo/tiny-llama"
TINY_MODELS = (TINY_GPT2, TINY_LLAMA)
"""The built-in models (:mod:`alallo.trainers.tiny`): built where they run, byte-level."""


@dataclass(frozen=True)
class CatalogueModel:
    """A base model.

    Attributes:
        id: the name a job spec uses (``alallo/tiny-gpt2``, or a local path).
        parameters: parameter count.
        context_length: longest sequence in tokens.
        runnable_here: whether this server's capacity can train it (set by the runtime
            from its pool).
        local_path: a local Hugging Face model directory, or None when alallo
            builds the model itself on first use.
    """

    id: str
    parameters: int
    context_length: int
    runnable_here: bool = True
    local_path: Path | None = None
    weights_here: bool = True
    """False for catalogue models whose weights this server does not have."""
    revision: str | None = None
    """A hub model's commit hash (its snapshot in the Hugging Face cache); None otherwise."""
    on_hub: bool = False
    """A hub model not in the cache: the trainer downloads it at ``revision`` when a run
    starts (:mod:`alallo.capacity._hub`)."""


HUB_PART_MAX = 96
"""Longest organisation or model name on the hub (``huggingface_hub``'s ``REPO_ID_REGEX``)."""
REVISION_MAX = 255
"""Longest revision (a branch, a tag or a commit hash) after ``@``: a git ref is a file name."""

HUB_ID = re.compile(
    r"^(?![^@]*(?:--|\.\.))(?![^@]*\.git(?:@|$))"  # no "--" or "..", no ".git" at the end
    rf"\w(?:[\w.-]{{0,{HUB_PART_MAX - 2}}}\w)?/\w(?:[\w.-]{{0,{HUB_PART_MAX - 2}}}\w)?"
    rf"(?:@[\w./-]{{1,{REVISION_MAX}}})?$", re.ASCII)
"""A well-formed Hugging Face hub id, ``org/name`` or ``org/name@revision``, by the hub's own
rules (``huggingface_hub.utils.validate_repo_id``); :func:`hub_id_problem` says what is
wrong with a name it does not match."""

_SHOWN_MAX = 80
"""Characters of a refused name an error message repeats."""

_BUILT_IN = (
    CatalogueModel(id=TINY_GPT2, parameters=132_928, context_length=256),
    CatalogueModel(id=TINY_LLAMA, parameters=361_216, context_length=256),
    # Published sizes (model cards); weights are not shipped: these train on
    # simulated nodes here, and on real GPU nodes with their weights at hand.
    CatalogueModel(id="meta-llama/Llama-3.1-8B", parameters=8_030_261_248,
                   context_length=131_072, local_path=None, weights_here=False),
    CatalogueModel(id="meta-llama/Llama-3.1-70B", parameters=70_553_706_496,
                   context_length=131_072, local_path=None, weights_here=False),
    CatalogueModel(id="Qwen/Qwen2.5-7B", parameters=7_615_616_512,
                   context_length=131_072, local_path=None, weights_here=False),
    CatalogueModel(id="mistralai/Mistral-7B-v0.3", parameters=7_248_023_552,
                   context_length=32_768, local_path=None, weights_here=False),
)


class Catalogue:
    """Built-in models plus any local Hugging Face model directory.

    A job may name a catalogue id or an absolute path to a directory with a
    ``config.json``; the path is accepted as is and listed from then on.
    """

    def __init__(self) -> None:
        self._models = {m.id: m for m in _BUILT_IN}

    def list(self) -> list[CatalogueModel]:
        """Every model, built-in first, then local paths in the order seen."""
        return list(self._models.values())

    def resolve(self, name: str) -> CatalogueModel:
        """The model a job spec names.

        Raises:
            InvalidRequest: no such model, and no model directory at that path
                (``param="model"``).
        """
        if name in self._models:
            model = self._models[name]
            if model.on_hub:  # found on the hub: in the cache once a trainer downloaded it
                repo = name.partition("@")[0]
                cached = _from_hub_cache(f"{repo}@{model.revision}")
                if cached is not None:
                    model = self._models[name] = replace(cached, id=name)
            return model
        path = Path(name)
        if path.is_absolute():
            return self._local(name, path)
        if _built_in_namespace(name):  # the built-ins named once: the closest, else all
            raise InvalidRequest(
                f"unknown model {shown_name(name)}: alallo/ names this server's built-in "
                f"models, none on the Hugging Face hub"
                f"{self._closest_hint(name) or '; they are ' + ', '.join(TINY_MODELS)}",
                param="model")
        if "/" in name and (problem := hub_id_problem(name)) is not None:
            raise InvalidRequest(f"{shown_name(name)} is not a Hugging Face hub id: {problem}",
                                 param="model")
        if HUB_ID.match(name) and (hub := _from_hub_cache(name)) is not None:
            self._models[name] = hub
            return hub
        known = ", ".join(sorted(self._models))
        why = (f"{name!r} is not in this server's Hugging Face cache (the operator downloads "
               "it: huggingface-cli download " + name.split("@")[0] + ")") if HUB_ID.match(
                   name) else f"unknown model {shown_name(name)}"
        raise InvalidRequest(
            f"{why}: use one of {known}, a hub model in the cache, or the absolute path of "
            f"a local Hugging Face model directory{self._closest_hint(name)}",
            param="model",
        )

    def hub_may_have(self, name: str) -> bool:
        """Whether the Hugging Face hub may hold ``name``, a model :meth:`resolve` does not
        find: a well-formed hub id outside ``alallo/``, the built-in models' namespace (no
        hub repo: a typo there is answered at once, never as the hub's silence)."""
        return HUB_ID.match(name) is not None and not _built_in_namespace(name)

    def closest(self, name: str) -> builtins.list[str]:
        """Up to 3 known model ids most like ``name`` (difflib's ratio, at least 0.4), the
        most alike first: for a message about a name that is not found."""
        return difflib.get_close_matches(name, list(self._models), n=3, cutoff=0.4)

    def _closest_hint(self, name: str) -> str:
        closest = ", ".join(repr(known) for known in self.closest(name))
        return f"; the closest known: {closest}" if closest else ""

    def _local(self, name: str, path: Path) -> CatalogueModel:
        """The local model directory ``path`` (``name``, absolute), listed from now on.

        Raises:
            InvalidRequest: no model directory there (``param="model"``).
        """
        try:
            is_model = (path / "config.json").is_file()
            is_adapter = not is_model and (path / "adapter_config.json").is_file()
        except OSError as exc:  # a path too long for the file system, a name it refuses
            raise InvalidRequest(f"{shown_name(name)} cannot be a model directory here: "
                                 f"{exc.strerror or exc}", param="model") from None
        if is_model:
            model = CatalogueModel(
                id=name, parameters=_count_parameters(path), context_length=_context(path),
                local_path=path,
            )
            self._models[name] = model
            return model
        if is_adapter:
            base = _read_json(path / "adapter_config.json").get("base_model_name_or_path")
            raise InvalidRequest(
                f"{name} holds a LoRA adapter, not a model (its base: {base}): name the base "
                "model to train a new adapter, or your fine-tuned model's id (ft:…) to train "
                "its adapter further; a merged model is a model (alallo models download "
                "--merged)", param="model")
        raise InvalidRequest(
            f"no model directory at {shown_name(name)} (a directory with a config.json): use one "
            f"of {', '.join(sorted(self._models))}, a hub model in the cache, or the absolute "
            "path of a local Hugging Face model directory", param="model")

    def remember(self, model: CatalogueModel) -> None:
        """Know ``model`` from now on (a hub model found on the hub, by its name)."""
        self._models[model.id] = model

    def cached_hub_models(self) -> builtins.list[CatalogueModel]:
        """The hub models in this server's Hugging Face cache, each at its newest snapshot
        (``GET /v1/models`` lists them)."""
        try:
            from huggingface_hub import scan_cache_dir
            from huggingface_hub.errors import CacheNotFound
        except ImportError:
            return []
        try:
            repos = scan_cache_dir().repos
        except CacheNotFound:
            return []
        found = []
        for repo in sorted(repos, key=lambda r: r.repo_id):
            if repo.repo_type == "model" and HUB_ID.match(repo.repo_id):
                with contextlib.suppress(InvalidRequest):
                    found.append(self.resolve(repo.repo_id))
        return found


def _built_in_namespace(name: str) -> bool:
    return name.partition("/")[0].lower() == TINY_GPT2.partition("/")[0]


def hub_id_problem(name: str) -> str | None:
    """What makes ``name`` no Hugging Face hub id, in words, or None for a well-formed one.

    The hub's rules, as ``huggingface_hub.utils.validate_repo_id`` holds them (they are
    written out here because that function names one reason for several, and the server
    runs without ``huggingface_hub`` too): ``org/name`` with one ``/``; each part 1 to 96
    letters, digits, ``-``, ``_`` or ``.``, starting and ending with a letter, a digit or
    ``_``, without ``--`` or ``..``, not ending in ``.git``; a revision after ``@`` of up to
    255 letters, digits, ``-``, ``_``, ``.`` or ``/``.
    """
    repo, at, revision = name.partition("@")
    parts = repo.split("/")
    if len(parts) != 2:
        return f"a hub id is ORG/NAME, with one '/' (this has {len(parts) - 1})"
    for part, what in zip(parts, ("organisation", "name"), strict=True):
        if not part:
            return f"the {what} is empty"
        if problem := _text_problem(part, what, HUB_PART_MAX, "_.-"):
            return problem
        if part[0] in "-." or part[-1] in "-.":
            return f"the {what} starts or ends with '-' or '.'"
        if "--" in part or ".." in part:
            hint = ""
            if "--" in part and HUB_ID.match(guess := repo.replace("/", "--").removeprefix(
                    "models--").replace("--", "/")):
                hint = (f" ('--' stands for '/' in the Hugging Face cache's folder names: "
                        f"{guess!r}?)")
            return f"the {what} has {'--' if '--' in part else '..'} in it{hint}"
    if repo.endswith(".git"):
        return "the name ends in '.git'"
    if at and not revision:
        return "the revision after '@' is empty"
    return _text_problem(revision, "revision", REVISION_MAX, "_.-/")


def _text_problem(text: str, what: str, longest: int, allowed: str) -> str | None:
    """``text`` longer than ``longest``, or with characters besides ASCII letters, digits and
    ``allowed`` (the first five named), in words; None when it is neither."""
    if len(text) > longest:
        return f"too long: the {what} has {len(text)} characters, at most {longest}"
    bad = sorted({c for c in text if not (c.isascii() and c.isalnum()) and c not in allowed})
    if not bad:
        return None
    named = ", ".join(repr(c) for c in bad[:5]) + (", …" if len(bad) > 5 else "")
    return (f"the {what} has characters a hub id cannot have ({named}): letters, digits "
            f"and {', '.join(repr(c) for c in allowed)} only")


def shown_name(name: str) -> str:
    """``name`` as an error message repeats it: quoted, and cut after 80 characters."""
    if len(name) <= _SHOWN_MAX:
        return repr(name)
    return f"{name[:_SHOWN_MAX]!r}… ({len(name)} characters)"


def _from_hub_cache(name: str) -> CatalogueModel | None:
    """A hub model from the Hugging Face cache alone, or None when it is not there (or
    ``huggingface_hub`` is not installed: ``pip install 'alallo[train]'``)."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        return None
    repo_id, _, revision = name.partition("@")
    try:
        snapshot = Path(snapshot_download(repo_id, revision=revision or None,
                                          local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None
    if not (snapshot / "config.json").is_file():
        return None
    return CatalogueModel(id=name, parameters=_count_parameters(snapshot),
                          context_length=_context(snapshot), local_path=snapshot,
                          revision=snapshot.name)


def _read_config(path: Path) -> dict[str, object]:
    return _read_json(path / "config.json")


def _read_json(path: Path) -> dict[str, object]:
    import json

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _context(path: Path) -> int:
    return context_of(_read_config(path))


def context_of(config: dict[str, object]) -> int:
    """A model's context length in tokens, from its ``config.json`` (2048 if it says not)."""
    for key in ("max_position_embeddings", "n_positions", "n_ctx"):
        value = config.get(key)
        if isinstance(value, int):
            return value
    return 2048


def _count_parameters(path: Path) -> int:
    """Parameters from the safetensors header, without loading any weights."""
    import json
    import struct

    total = 0
    for file in path.glob("*.safetensors"):
        with file.open("rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(size))
        for name, info in header.items():
            if name != "__metadata__":
                count = 1
                for dim in info["shape"]:
                    count *= dim
                total += count
    return total
