"""gateway._cors.CORS answers exactly as Starlette's CORSMiddleware, header for header."""

from __future__ import annotations

import uuid

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from gateway._cors import CORS
from gateway._request_log import _new_request_id

pytestmark = pytest.mark.unit


async def plain(request: Request) -> PlainTextResponse:
    return PlainTextResponse("hi")


async def varied(request: Request) -> PlainTextResponse:
    return PlainTextResponse("hi", headers={"Vary": "Accept-Encoding"})


def app(middleware: type) -> Starlette:
    return Starlette(routes=[Route("/plain", plain, methods=["GET", "POST"]),
                             Route("/varied", varied)],
                     middleware=[Middleware(middleware, allow_origins=["http://a.example"],
                                            allow_methods=["GET", "POST"],
                                            allow_headers=["Authorization"])])


@pytest.mark.parametrize(("method", "path", "headers"), [
    ("GET", "/plain", {}),
    ("GET", "/varied", {}),
    ("GET", "/plain", {"Origin": "http://a.example"}),
    ("GET", "/varied", {"Origin": "http://elsewhere.example"}),
    ("OPTIONS", "/plain", {"Origin": "http://a.example", "Access-Control-Request-Method": "POST",
                           "Access-Control-Request-Headers": "authorization"}),
    ("GET", "/missing", {}),
])
async def test_the_answer_is_starlettes(method: str, path: str, headers: dict[str, str]) -> None:
    answers = []
    for middleware in (CORSMiddleware, CORS):
        transport = httpx.ASGITransport(app=app(middleware))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            answer = await client.request(method, path, headers=headers)
        answers.append((answer.status_code, answer.headers.raw, answer.content))
    assert answers[0] == answers[1]


def test_a_new_request_id_is_a_version_4_uuid_in_hex() -> None:
    ids = {_new_request_id() for _ in range(1000)}
    assert len(ids) == 1000
    for request_id in ids:
        assert uuid.UUID(hex=request_id).version == 4 and uuid.UUID(hex=request_id).hex == request_id
