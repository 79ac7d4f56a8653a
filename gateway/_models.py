"""``/v1/models``: the catalogue and the account's fine-tuned models; one model, its
archive (``?format=adapter|merged``, a tar.gz with ``Content-Length`` and ``Range``), its
deletion (OpenAI's ``DELETE /v1/models/{id}``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse

from alallo.capacity import CatalogueModel
from alallo.runtime import views

from ._auth import account_of, runtime_of

__all__ = ["delete_model", "get_model", "list_models", "model_content"]


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
    """``GET /v1/models/{model_id}``: one of the account's fine-tuned models."""
    account = await account_of(request)
    job = await runtime_of(request).models.find(account, request.path_params["model_id"])
    return JSONResponse(views.fine_tuned_model_view(job, _bases(request).get(job.base_model)))


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
    await runtime_of(request).models.delete(account, model)
    return JSONResponse({"id": model, "object": "model", "deleted": True})
