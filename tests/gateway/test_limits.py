"""Size limits: request bodies and uploads over their limits answer 413 and change nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import trio
from httpx_ws import WebSocketDisconnect, WebSocketSession, aconnect_ws
from support import EXAMPLES, LiveServer, start_server, stop_server

from gateway._limits import MAX_JSON_BODY_BYTES, MULTIPART_OVERHEAD_BYTES

pytestmark = pytest.mark.any_backend  # request size limits are the gateway's, not the store's

UPLOAD_LIMIT = 4096


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    started = start_server(tmp_path_factory.mktemp("limits") / "data",
                           ALALLO_MAX_UPLOAD_BYTES=str(UPLOAD_LIMIT))
    yield started
    stop_server(started)


@pytest.fixture
async def client(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30) as c:
        yield c


def jsonl(size: int) -> bytes:
    """One valid JSONL line of exactly ``size`` bytes."""
    return b'{"text": "' + b"x" * (size - 13) + b'"}\n'


def chunks(data: bytes, size: int = 16 * 1024) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start:start + size]


async def async_chunks(data: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks(data):
        yield chunk


def assert_413(response: httpx.Response, param: str | None = None) -> None:
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert set(error) == {"code", "message", "param"}
    assert error["code"] == "request_too_large" and error["param"] == param
    assert "the limit is" in error["message"]


async def stored(client: httpx.AsyncClient, server: LiveServer) -> tuple[Any, ...]:
    """What the server holds for the account: a request refused with 413 changes none of it."""
    return ((await client.get("/v1/files")).json()["data"],
            (await client.get("/v1/fine_tuning/jobs", params={"limit": 1000})).json()["data"],
            sorted((server.data_dir / "files").iterdir()))


async def test_uploads_up_to_the_limit_pass_and_one_byte_more_is_413(
        client: httpx.AsyncClient, server: LiveServer) -> None:
    # One byte over: the form's envelope still fits, the file itself does not.
    before = await stored(client, server)
    over = await client.post("/v1/files", files={"file": ("t.jsonl", jsonl(UPLOAD_LIMIT + 1))})
    assert_413(over, "file")
    assert await stored(client, server) == before
    exact = await client.post("/v1/files", files={"file": ("t.jsonl", jsonl(UPLOAD_LIMIT))})
    assert exact.status_code == 200, exact.text
    assert exact.json()["bytes"] == UPLOAD_LIMIT


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_body_far_over_the_upload_limit_is_refused_before_it_is_read(
        client: httpx.AsyncClient, server: LiveServer, chunked: bool) -> None:
    big = jsonl(UPLOAD_LIMIT + MULTIPART_OVERHEAD_BYTES + 1)
    boundary = "limitsboundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"big.jsonl\"\r\n\r\n").encode() + big + f"\r\n--{boundary}--\r\n".encode()
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    before = await stored(client, server)
    response = await client.post("/v1/files", headers=headers,
                                 content=async_chunks(body) if chunked else body)
    assert_413(response)
    assert await stored(client, server) == before


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("path", ["/v1/fine_tuning/jobs", "/v1/fine_tuning/estimates"])
async def test_json_bodies_over_one_mebibyte_are_413(
        client: httpx.AsyncClient, server: LiveServer, path: str, chunked: bool) -> None:
    file = (await client.post("/v1/files", files={
        "file": ("t.jsonl", jsonl(UPLOAD_LIMIT))})).json()["id"]
    spec: dict[str, Any] = {"model": "alallo/tiny-gpt2", "training_file": file,
                            "trainer": "simulated", "name": ""}
    fixed = len(json.dumps(spec).encode())
    spec["name"] = "n" * (MAX_JSON_BODY_BYTES - fixed + 1)
    body = json.dumps(spec).encode()
    assert len(body) == MAX_JSON_BODY_BYTES + 1
    headers = {"Content-Type": "application/json"}
    before = await stored(client, server)
    response = await client.post(path, headers=headers,
                                 content=async_chunks(body) if chunked else body)
    assert_413(response)
    assert await stored(client, server) == before
    # At the limit the body is read, and judged on what it says.
    spec["name"] = "n" * (MAX_JSON_BODY_BYTES - fixed)
    at_limit = await client.post(path, headers=headers, content=json.dumps(spec).encode())
    assert at_limit.status_code == 422 and at_limit.json()["error"]["param"] == "name"


async def test_a_client_still_sending_a_refused_body_reads_the_413(
        client: httpx.AsyncClient, server: LiveServer) -> None:
    # Far more than the sockets' buffers hold: the server answers before the
    # client is done, and must read the rest or the client sees a reset instead.
    body = b"{" + b" " * (8 * MAX_JSON_BODY_BYTES) + b"}"
    before = await stored(client, server)
    for _ in range(3):
        response = await client.post("/v1/fine_tuning/jobs", content=body,
                                     headers={"Content-Type": "application/json"})
        assert_413(response)
    assert await stored(client, server) == before


async def test_the_key_is_checked_before_the_size(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as anonymous:
        response = await anonymous.post("/v1/fine_tuning/jobs",
                                         content=b"{" + b" " * MAX_JSON_BODY_BYTES + b"}")
    assert response.status_code == 401


async def test_a_websocket_message_over_the_limit_closes_the_connection(
        client: httpx.AsyncClient) -> None:
    ws: WebSocketSession
    with trio.fail_after(30):
        async with aconnect_ws("/v1/ws", client) as ws:
            await ws.send_json({"subscribe": ["ft-" + "0" * 24] * (MAX_JSON_BODY_BYTES // 20)})
            with pytest.raises(WebSocketDisconnect) as closed:
                while True:
                    await ws.receive_json()
    assert closed.value.code == 1009  # RFC 6455: message too big


async def test_a_normal_upload_and_job_still_work(client: httpx.AsyncClient) -> None:
    data = (EXAMPLES / "sample.jsonl").read_bytes()[:UPLOAD_LIMIT]
    data = data[:data.rindex(b"\n") + 1]
    file = await client.post("/v1/files", files={"file": ("s.jsonl", data)})
    assert file.status_code == 200, file.text
    job = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file.json()["id"],
        "hyperparameters": {"max_steps": 2}, "trainer": "simulated"})
    assert job.status_code == 200, job.text
