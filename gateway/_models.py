"""``/v1/models``: the catalogue and the account's fine-tuned models; one model, its
archive (``?format=adapter|merged``, a tar.gz with ``Content-Length`` and ``Range``), its
deletion (OpenAI's ``DELETE /v1/models/{id}``).

``GET`` and ``DELETE /v1/models/{id}`` take every kind of id OpenAI's do: a fine-tuned
model (``ft:…``, or the four-field id of earlier versions), a checkpoint model
(``ft:…:ckpt-step-N``, the account's own: one shared with it is no model to retrieve or
delete), and, for ``GET``, a catalogue model, whose id may hold a ``/``
(``alallo/tiny-gpt2``: the ``openai`` package sends it as ``%2F``, which the server
decodes, so the route takes the rest of the path: :class:`ModelIdConvertor`)."""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse

from alallo.capacity import CatalogueModel
from alallo._errors import NotFound, shown
from alallo.runtime import parse_model_id, views

from ._auth import account_of, runtime_of

__all__ = ["ModelIdConvertor", "delete_model", "get_model", "list_models", "model_content"]


class ModelIdConvertor(Convertor[str]):
    """``{model_id:model}``: a model's id, ``/`` included, but for a path that ends in
    ``/content`` (``/v1/models/{model_id}/content``'s: so that no two routes match one
    path, and a 405's ``Allow`` names only the methods of the route asked)."""

    regex = r"(?![^?]*/content$)[^?]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("model", ModelIdConvertor())


def _bases(request: Request) -> dict[str, CatalogueModel]:
    """The models a fine-tuned model may stand on, by id, ``runnable_here`` decided."""
    return {m.id: m for m in runtime_of(request).list_models()}


async def list_models(request: Request) -> JSONResponse:
    """``GET /v1/models`` → the catalogue (built-in, the Hugging Face cache's), then the
    account's fine-tuned models, newest first."""
    account = await account_of(request)
    runtime = runtime_of(request)
    bases = _bases(request)
    models = [views.model_view(m) for m in bases.values()]
    models += [views.fine_tuned_model_view(job, bases.get(job.base_model))
               for job in await runtime.models.list(account)]
    return JSONResponse(views.page(models, False))


async def get_model(request: Request) -> JSONResponse:
    """``GET /v1/models/{model_id}``: a model of the catalogue, one of the account's
    fine-tuned models, or one of its checkpoint models."""
    account = await account_of(request)
    models = runtime_of(request).models
    name = request.path_params["model_id"]
    bases = _bases(request)
    ref = parse_model_id(name)
    if ref is None:
        if name not in bases:
            raise NotFound(f"no model {shown(name)}", param="model")
        return JSONResponse(views.model_view(bases[name]))
    if ref.step is not None:
        found = await models.checkpoints.find(account, name)
        return JSONResponse(views.fine_tuned_model_view(
            found.job, bases.get(found.job.base_model), checkpoint=found.id,
            path=str(found.path)))
    job = await models.find(account, name)
    return JSONResponse(views.fine_tuned_model_view(job, bases.get(job.base_model)))


async def model_content(request: Request) -> FileResponse:
    """``GET /v1/models/{model_id}/content?format=adapter|merged`` → a tar.gz."""
    account = await account_of(request)
    model = request.path_params["model_id"]
    fmt = request.query_params.get("format", "adapter")
    path = await runtime_of(request).models.archive(account, model, fmt)
    return FileResponse(path, media_type="application/gzip", filename=path.name)


async def delete_model(request: Request) -> JSONResponse:
    """``DELETE /v1/models/{model_id}`` → ``{"id", "object": "model", "deleted": true}``."""
    account = await account_of(request)
    model = request.path_params["model_id"]
    models = runtime_of(request).models
    ref = parse_model_id(model)
    if ref is not None and ref.step is not None:
        await models.checkpoints.delete(account, model)  # a checkpoint model
    else:
        await models.delete(account, model)
    return JSONResponse({"id": model, "object": "model", "deleted": True})
