"""Which files serve a model name, as one account sees it (issue 17; the engines that load
them are :mod:`alallo.serving`'s): a fine-tuned model of the account, or a checkpoint model of
its own or shared with it (its LoRA adapter on its base, or its whole weights); a base model
of the catalogue or of the Hugging Face cache."""

from __future__ import annotations

import json
from pathlib import Path

from .._errors import InvalidRequest, NotFound, Unavailable, shown
from ..capacity import TINY_MODELS
from ..serving import ModelFiles
from ..settings import Settings
from ._fine_tuned import FineTunedModels
from ._model_ids import parse_model_id
from ._planning import Planning

__all__ = ["ServedModels"]


class ServedModels:
    """Model names to the files an engine loads.

    Args:
        settings: ``models_dir``.
        planning: the catalogue and the cached hub models.
        models: the accounts' fine-tuned models.
    """

    def __init__(self, settings: Settings, planning: Planning, models: FineTunedModels) -> None:
        self._settings = settings
        self._planning = planning
        self._models = models

    async def files(self, account_id: str, name: str) -> ModelFiles:
        """What an engine loads for the model ``name``, as ``account_id`` sees it.

        Raises:
            NotFound: no such model for this account (404, ``param="model"``).
            InvalidRequest: a model of the catalogue with no weights here (400).
            Unavailable: a LoRA model whose base is not on this server.
        """
        if parse_model_id(name) is not None:  # a fine-tuned or a checkpoint model
            _, directory = await self._models.weights(account_id, name)
            adapter_config = directory / "adapter_config.json"
            if adapter_config.is_file():
                base = json.loads(adapter_config.read_text()).get("base_model_name_or_path")
                if not base or not Path(base).is_dir():
                    raise Unavailable(f"the base model of {name} is not on this server")
                return ModelFiles(Path(base), adapter=directory, name=self._name_of(Path(base)))
            return ModelFiles(directory, name=name)
        if name.startswith(("/", ".", "~")):  # a path on the server is no model of the API's
            raise NotFound(f"no model {shown(name)}", param="model")
        try:
            model = self._planning.model(name)
        except InvalidRequest:
            raise NotFound(f"no model {shown(name)}", param="model") from None
        if not model.weights_here:
            raise InvalidRequest(f"model {name} has no weights on this server", param="model")
        if model.on_hub:  # found on the hub, not downloaded yet
            raise InvalidRequest(f"{name} is not in this server's Hugging Face cache yet (a job "
                                 "that trains it downloads it)", param="model")
        path = model.local_path or self._settings.models_dir.resolve() / name.replace("/", "--")
        return ModelFiles(path, tiny=name if name in TINY_MODELS else None, name=name)

    def _name_of(self, base: Path) -> str:
        """The API's name of a base model folder (``models/alallo--tiny-llama`` is
        ``alallo/tiny-llama``; a folder elsewhere, its own name)."""
        if base.resolve().parent == self._settings.models_dir.resolve():
            return base.name.replace("--", "/", 1)
        return base.name
