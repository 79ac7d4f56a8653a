"""``/v1/files``: upload, list, get, content, delete."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from alallo import InvalidRequest
from alallo._json import loads_request
from alallo.runtime import views

from ._auth import account_of, runtime_of
from ._body import parse_int, query_int
from ._errors import RequestTooLarge

__all__ = ["MAX_FILENAME_CHARS", "MAX_FILES_PAGE", "UPLOAD_FORM", "create_file", "delete_file",
           "file_content", "get_file", "list_files"]

MAX_FILES_PAGE = 10_000
"""The most files one page holds (and the default, as OpenAI's)."""
UPLOAD_FORM: dict[str, Any] = {
    "type": "object", "required": ["file"], "additionalProperties": False,
    "properties": {
        "file": {"type": "string", "contentMediaType": "application/octet-stream"},
        "purpose": {"type": "string", "enum": ["fine-tune"]},
        "expires_after[anchor]": {"type": "string", "enum": ["created_at"]},
        "expires_after[seconds]": {"type": "integer", "minimum": 3600, "maximum": 2_592_000}}}
"""The upload's form in ``/openapi.json``: OpenAI's fields, ``expires_after`` as its SDK
sends it (the bounds are OpenAI's, the server's ``min_file_expiry_s`` at its default)."""
_FORM_FIELDS = frozenset({*UPLOAD_FORM["properties"], "expires_after"})
"""The fields of an upload; ``expires_after`` may also come as one JSON field."""
MAX_FILENAME_CHARS = 500
"""The longest name an upload may have: what the store keeps (``files.filename``); a longer
one failed in PostgreSQL after the bytes were written, as a 503 "try again"."""


async def create_file(request: Request) -> JSONResponse:
    """``POST /v1/files`` (multipart: ``file``, ``purpose``, OpenAI's ``expires_after``)
    → the file object; any other field answers 422 naming it."""
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
        for name in form:  # nothing is silently ignored
            if name not in _FORM_FIELDS:
                raise InvalidRequest(f"Unrecognized request argument supplied: {name[:100]}",
                                     param=name[:100])
        limit = runtime.settings.max_upload_bytes
        if upload.size is not None and upload.size > limit:
            raise RequestTooLarge(f"the file is {upload.size} bytes; the limit is {limit}",
                                  param="file")
        name = upload.filename or "upload.jsonl"
        if len(name) > MAX_FILENAME_CHARS or "\x00" in name:
            raise InvalidRequest(f"the file's name must be up to {MAX_FILENAME_CHARS} "
                                 f"characters, none of them NUL; it has {len(name)}",
                                 param="file")
        expires_after_s = _expires_after(form)
        data = await upload.read()
        row = await runtime.files.upload(account, name, data, purpose=purpose,
                                         expires_after_s=expires_after_s)
    return JSONResponse(views.file_view(row))


def _expires_after(form: FormData) -> int | None:
    """OpenAI's ``expires_after`` as its SDK sends it in a form (``expires_after[anchor]``,
    ``expires_after[seconds]``), or as one JSON field; None when absent. The bounds of
    ``seconds`` are the runtime's (:meth:`TrainingFiles.upload`).

    Raises:
        InvalidRequest: another anchor than ``created_at``, seconds not an integer.
    """
    anchor, seconds = form.get("expires_after[anchor]"), form.get("expires_after[seconds]")
    whole = form.get("expires_after")
    if isinstance(whole, str) and whole:
        try:
            parsed = loads_request(whole.encode())
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise InvalidRequest('expires_after must be {"anchor": "created_at", '
                                 '"seconds": N}', param="expires_after")
        anchor, seconds = parsed.get("anchor"), parsed.get("seconds")
        seconds = str(seconds) if isinstance(seconds, int) else seconds
    elif anchor is None and seconds is None:
        return None
    if anchor != "created_at":
        raise InvalidRequest(f"expires_after.anchor must be 'created_at', got {anchor!r}",
                             param="expires_after")
    if not isinstance(seconds, str):
        raise InvalidRequest("expires_after.seconds must be an integer",
                             param="expires_after")
    return parse_int(seconds, "expires_after", low=-2**62, high=2**62)


async def list_files(request: Request) -> JSONResponse:
    """``GET /v1/files?purpose=&order=&limit=&after=`` → the account's files that have not
    expired, newest first (``order=asc``: oldest first), as OpenAI's.

    ``purpose``: only files of that purpose. ``after`` is the last file id of the
    previous page; an id the account has no file of answers 422 (``param: after``),
    whoever owns it. Paged here, over the runtime's whole list: an account's files are
    few (each is an upload), and the store's order (by creation, then id) is stable.
    """
    account = await account_of(request)
    limit = query_int(request, "limit", MAX_FILES_PAGE, low=1, high=MAX_FILES_PAGE)
    after = request.query_params.get("after") or None
    order = request.query_params.get("order") or "desc"
    if order not in ("asc", "desc"):
        raise InvalidRequest(f"order must be 'asc' or 'desc', got {order[:40]!r}",
                             param="order")
    purpose = request.query_params.get("purpose") or None
    rows = await runtime_of(request).files.of_account(account, purpose=purpose,
                                                      ascending=order == "asc")
    start = 0
    if after is not None:
        ids = [r.id for r in rows]
        if after not in ids:
            raise InvalidRequest(f"after must be one of your file ids, got {after!r}",
                                 param="after")
        start = ids.index(after) + 1
    data = [views.file_view(r) for r in rows[start:start + limit]]
    return JSONResponse({**views.page(data, start + limit < len(rows)),
                         "first_id": data[0]["id"] if data else None,
                         "last_id": data[-1]["id"] if data else None})


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
