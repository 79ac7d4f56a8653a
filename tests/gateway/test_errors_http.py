"""``gateway/_errors.py``: each error answered with the status its class carries, and read
back by the client as the same class (``except alallo.NotFound`` embedded or over HTTP).

A bare Starlette app with the gateway's handlers raises each class; a real app whose
store fails mid-request answers 503 ``store_unavailable``, not the caller's fault.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import alallo
from alallo import AsyncClient, Runtime, Settings
from alallo._errors import (
    AlalloError,
    ApiError,
    Conflict,
    Forbidden,
    InvalidFile,
    InvalidRequest,
    InvalidTransition,
    LeaseLost,
    NotFound,
    SettingError,
    StoreUnavailable,
    Unauthorized,
)
from gateway import build_app
from gateway._errors import EXCEPTION_HANDLERS, BadJSON, RequestTooLarge

pytestmark = pytest.mark.any_backend  # the subject does not depend on the store

RAISED: dict[str, tuple[AlalloError, int, type[AlalloError]]] = {
    "bad_json": (BadJSON("the body must be a JSON object"), 400, InvalidRequest),
    "unauthorized": (Unauthorized("invalid API key"), 401, Unauthorized),
    "forbidden": (Forbidden("no", param="trainer.command"), 403, Forbidden),
    "not_found": (NotFound("no job 'ft-9'", param="job_id"), 404, NotFound),
    "conflict": (Conflict("file-1 is in use", param="file_id"), 409, Conflict),
    "transition": (InvalidTransition("cannot cancel: succeeded"), 409, InvalidTransition),
    "too_large": (RequestTooLarge("the body is 2 MiB"), 413, InvalidRequest),
    "invalid": (InvalidRequest("limit must be an integer", param="limit"), 400,
                InvalidRequest),
    "invalid_file": (InvalidFile("line 7: not JSON", param="file"), 400, InvalidFile),
    "store": (StoreUnavailable("the store failed: connection lost"), 503, StoreUnavailable),
    # Not refusals: none should meet a request; answered 400 as they always were (and a
    # 400 reads as an InvalidRequest).
    "setting": (SettingError("storage_url cannot be written", param="storage_url"), 400,
                InvalidRequest),
    "lease": (LeaseLost("ft-1", 3), 400, InvalidRequest),
}
"""What a route raises: the error, the status it is answered with, the client's class."""


async def _raise(request: Request) -> Response:
    raise RAISED[request.path_params["name"]][0]


@pytest.fixture
def bare_app() -> Starlette:
    return Starlette(routes=[Route("/v1/files/{name}", _raise)],
                     exception_handlers=EXCEPTION_HANDLERS)


@pytest.mark.unit
@pytest.mark.parametrize("name", list(RAISED))
async def test_each_error_is_answered_with_its_status_and_read_back_as_its_class(
        bare_app: Starlette, name: str) -> None:
    error, status, client_class = RAISED[name]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=bare_app),
                                 base_url="http://alallo") as http:
        answer = await http.get(f"/v1/files/{name}")
    assert answer.status_code == status
    assert isinstance(error, ApiError) == (status == getattr(error, "status_code", None))
    assert answer.json() == {"error": {  # OpenAI's error object, its type by the status
        "message": error.message, "param": error.param, "code": error.code,
        "type": "server_error" if status >= 500 else "invalid_request_error"}}

    async with AsyncClient("http://alallo", api_key="k",
                           transport=httpx.ASGITransport(app=bare_app)) as client:
        with pytest.raises(ApiError) as caught:
            await client.get_file(name)
    assert type(caught.value) is client_class
    assert (caught.value.status_code, caught.value.code, caught.value.message,
            caught.value.param) == (status, error.code, error.message, error.param)


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with Runtime(Settings(data_dir=tmp_path)) as rt:
        yield rt


@pytest.mark.any_backend
async def test_a_store_outage_is_503_and_an_unknown_job_is_not_found(
        runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    app = build_app(runtime)
    async with AsyncClient("http://alallo", api_key=runtime.api_key,
                           transport=httpx.ASGITransport(app=app)) as client:
        with pytest.raises(alallo.NotFound) as missing:  # the class the runtime raises
            await client.get_job("ft-nope")
        assert isinstance(missing.value, ApiError)
        assert (missing.value.status_code, missing.value.param) == (404, "job_id")

        async def store_down(*args: object, **kwargs: object) -> None:
            raise StoreUnavailable("the store failed: OperationalError: connection lost")

        monkeypatch.setattr(runtime.store, "get_job", store_down)
        with pytest.raises(alallo.Unavailable) as down:
            await client.get_job("ft-nope")
    assert type(down.value) is StoreUnavailable
    assert str(down.value) == ("503 store_unavailable: the store failed: "
                               "OperationalError: connection lost")

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://alallo",
                                 headers={"Authorization": f"Bearer {runtime.api_key}"}) as http:
        answer = await http.get("/v1/fine_tuning/jobs/ft-nope")
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "store_unavailable"
