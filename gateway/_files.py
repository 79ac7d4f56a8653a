"""``/v1/files``: upload, list, get, content, delete."""

from __future__ import annotations

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from alallo import InvalidRequest
from alallo.runtime import views

from ._auth import account_of, runtime_of
from ._body import query_int
from ._errors import RequestTooLarge

__all__ = ["MAX_FILENAME_CHARS", "MAX_FILES_PAGE", "create_file", "delete_file",
           "file_content", "get_file", "list_files"]

MAX_FILES_PAGE = 10_000
"""The most files one page holds (and the default, as OpenAI's)."""
MAX_FILENAME_CHARS = 500
"""The longest name an upload may have: what the store keeps (``files.filename``); a longer
one failed in PostgreSQL after the bytes were written, as a 503 "try again"."""


async def create_file(request: Request) -> JSONResponse:
    """``POST /v1/files`` (multipart: ``file``, ``purpose``) → the file object."""
    account = await account_of(request)
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise InvalidRequest("send the file as multipart/form-data with a 'file' field",
                             param="file")
    runtime = runtime_of(request)
    async with request.form(max_part_size=runtime.settings.max_upload_bytes) as form:
        upload = form.get("file")
        purpose = form.get("purpose", "fine-tune")
        if not isinstance(upload, UploadFile):
            raise InvalidRequest("missing the 'file' field", param="file")
        if not isinstance(purpose, str):
            raise InvalidRequest("purpose must be text", param="purpose")
        limit = runtime.settings.max_upload_bytes
        if upload.size is not None and upload.size > limit:
            raise RequestTooLarge(f"the file is {upload.size} bytes; the limit is {limit}",
                                  param="file")
        name = upload.filename or "upload.jsonl"
        if len(name) > MAX_FILENAME_CHARS or "\x00" in name:
            raise InvalidRequest(f"the file's name must be up to {MAX_FILENAME_CHARS} "
                                 f"characters, none of them NUL; it has {len(name)}",
                                 param="file")
        data = await upload.read()
        row = await runtime.upload_file(account, name, data, purpose=purpose)
    return JSONResponse(views.file_view(row))


async def list_files(request: Request) -> JSONResponse:
    """``GET /v1/files?limit=&after=`` → the account's files, newest first.

    ``after`` is the last file id of the previous page; an id the account has
    no file of answers 422 (``param: after``), whoever owns it. Paged here,
    over the runtime's whole list: an account's files are few (each is an
    upload), and the store's order (newest, then id) is stable.
    """
    account = await account_of(request)
    limit = query_int(request, "limit", MAX_FILES_PAGE, low=1, high=MAX_FILES_PAGE)
    after = request.query_params.get("after") or None
    rows = await runtime_of(request).list_files(account)
    start = 0
    if after is not None:
        ids = [r.id for r in rows]
        if after not in ids:
            raise InvalidRequest(f"after must be one of your file ids, got {after!r}",
                                 param="after")
        start = ids.index(after) + 1
    shown = rows[start:start + limit]
    return JSONResponse(views.page([views.file_view(r) for r in shown],
                                   start + limit < len(rows)))


async def get_file(request: Request) -> JSONResponse:
    """``GET /v1/files/{file_id}``."""
    account = await account_of(request)
    row = await runtime_of(request).get_file(account, request.path_params["file_id"])
    return JSONResponse(views.file_view(row))


async def file_content(request: Request) -> Response:
    """``GET /v1/files/{file_id}/content`` → the JSONL as uploaded."""
    account = await account_of(request)
    data = await runtime_of(request).file_content(account, request.path_params["file_id"])
    return Response(data, media_type="application/jsonl")


async def delete_file(request: Request) -> JSONResponse:
    """``DELETE /v1/files/{file_id}``; 409 while a live job uses the file."""
    account = await account_of(request)
    file_id = request.path_params["file_id"]
    await runtime_of(request).delete_file(account, file_id)
    return JSONResponse({"id": file_id, "object": "file", "deleted": True})
