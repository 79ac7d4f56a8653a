"""``/v1/fine_tuning/checkpoints/{checkpoint}/permissions``: share a checkpoint model with
other accounts, list and revoke its permissions (OpenAI's, as the ``openai`` package's
``fine_tuning.checkpoints.permissions.create / retrieve / list / delete`` send and read
them; their ``project_ids`` are alallo account ids).

Only the checkpoint's own account manages them: to any other, shared with or not, the
checkpoint answers as an id nobody has (404). What a permission allows:
:mod:`alallo.runtime._checkpoint_models`.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from alallo import InvalidRequest
from alallo.runtime import MAX_PERMISSIONS_PAGE, views

from ._auth import account_of, runtime_of
from ._body import json_object, query_int

__all__ = ["delete_permission", "list_permissions", "share_checkpoint"]

_ORDERS = ("ascending", "descending")


async def share_checkpoint(request: Request) -> JSONResponse:
    """``POST …/permissions`` with ``{"project_ids": [...]}`` → a list of the permissions,
    one per account (OpenAI answers the created permissions as a list)."""
    account = await account_of(request)
    checkpoints = runtime_of(request).models.checkpoints
    checkpoint = request.path_params["checkpoint"]
    await checkpoints.find(account, checkpoint)  # another's: 404 whatever the body
    rows = await checkpoints.share(account, checkpoint, await json_object(request))
    return JSONResponse(views.permission_list_view(rows, False))


async def list_permissions(request: Request) -> JSONResponse:
    """``GET …/permissions?project_id=&after=&limit=&order=`` → a page of permissions,
    ``descending`` (newest first) unless asked otherwise."""
    account = await account_of(request)
    query = request.query_params
    order = query.get("order") or "descending"
    if order not in _ORDERS:
        raise InvalidRequest(f"order must be ascending or descending, not {order!r}",
                             param="order")
    limit = query_int(request, "limit", 10, low=1, high=MAX_PERMISSIONS_PAGE)
    rows, more = await runtime_of(request).models.checkpoints.permissions(
        account, request.path_params["checkpoint"], project_id=query.get("project_id") or None,
        after=query.get("after") or None, limit=limit,
        order="ascending" if order == "ascending" else "descending")
    return JSONResponse(views.permission_list_view(rows, more))


async def delete_permission(request: Request) -> JSONResponse:
    """``DELETE …/permissions/{permission_id}`` → ``{"id", "object", "deleted": true}``."""
    account = await account_of(request)
    permission_id = request.path_params["permission_id"]
    await runtime_of(request).models.checkpoints.revoke(
        account, request.path_params["checkpoint"], permission_id)
    return JSONResponse({"id": permission_id, "object": "checkpoint.permission",
                         "deleted": True})
