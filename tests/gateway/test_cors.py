"""CORS over HTTP: a page on another origin may call the API and follow a stream with a
bearer token or ``?access_token=``, never with the dashboard's cookie (ALALLO_CORS_ORIGINS)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support import LiveServer

from alallo import Runtime, Settings
from gateway import build_app

pytestmark = pytest.mark.any_backend  # CORS headers are the gateway's

ELSEWHERE = "http://elsewhere.example"


@pytest.fixture
def api(live_server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server.url, timeout=30) as c:
        yield c


def preflight(method: str, headers: str) -> dict[str, str]:
    return {"Origin": ELSEWHERE, "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": headers}


def test_preflight_allows_any_origin_without_credentials(api: httpx.Client) -> None:
    create = api.options("/v1/fine_tuning/jobs", headers=preflight("POST",
                                                                    "authorization,content-type"))
    assert create.status_code == 200, create.text
    assert create.headers["access-control-allow-origin"] == "*"
    assert "POST" in create.headers["access-control-allow-methods"]
    assert {"authorization", "content-type"} <= {
        h.strip().lower() for h in create.headers["access-control-allow-headers"].split(",")}
    assert "access-control-allow-credentials" not in create.headers

    stream = api.options("/v1/fine_tuning/jobs/ft-any/stream",
                         headers=preflight("GET", "last-event-id"))
    assert stream.status_code == 200
    assert stream.headers["access-control-allow-origin"] == "*"


def test_answers_name_the_origin_rule_and_never_allow_credentials(
        api: httpx.Client, live_server: LiveServer) -> None:
    listed = api.get("/v1/models", headers={"Origin": ELSEWHERE, **live_server.headers})
    assert listed.status_code == 200
    assert listed.headers["access-control-allow-origin"] == "*"
    assert {h.strip() for h in listed.headers["access-control-expose-headers"].split(",")} == {
        "Last-Event-ID", "X-Request-ID"}
    # A request that carries the dashboard's cookie gets no Allow-Credentials: a browser
    # does not hand its answer to the page on the other origin.
    link = api.post("/v1/dashboard/links", headers=live_server.headers).json()["path"]
    session = api.get(link).cookies["alallo_session"]
    api.cookies.clear()
    cookie = api.get("/v1/models", headers={"Origin": ELSEWHERE,
                                            "Cookie": f"alallo_session={session}"})
    assert cookie.status_code == 200
    assert "access-control-allow-credentials" not in cookie.headers


async def test_only_the_configured_origins_are_allowed(tmp_path: Path) -> None:
    allowed = "https://app.example.com"
    async with Runtime(Settings(data_dir=tmp_path, cors_origins=[allowed])) as runtime:
        transport = httpx.ASGITransport(app=build_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://alallo") as c:
            ok = await c.options("/v1/fine_tuning/jobs",
                                 headers={**preflight("POST", "authorization"),
                                          "Origin": allowed})
            refused = await c.options("/v1/fine_tuning/jobs",
                                      headers=preflight("POST", "authorization"))
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == allowed
    assert refused.status_code == 400
    assert refused.text == "Disallowed CORS origin"
    assert "access-control-allow-origin" not in refused.headers
