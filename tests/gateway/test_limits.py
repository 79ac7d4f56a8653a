"""Limits: request bodies and uploads over their limits answer 413 and change nothing; an
account's open streams (SSE and WebSocket together) and a WebSocket's subscriptions are
capped (429, an error frame, close 4429), and a closed stream gives its room back."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import trio
from httpx_ws import WebSocketDisconnect, WebSocketNetworkError, WebSocketSession, aconnect_ws
from wsproto.utilities import LocalProtocolError
from support import EXAMPLES, LiveServer, start_server, stop_server, upload, wait_until

from gateway._limits import (
    MAX_JSON_BODY_BYTES,
    MULTIPART_OVERHEAD_BYTES,
    StreamLimit,
    TooManyStreams,
)

pytestmark = pytest.mark.any_backend  # request size limits are the gateway's, not the store's

UPLOAD_LIMIT = 4096
STREAMS = 5
"""Streams the module's server lets one account hold (``ALALLO_MAX_STREAMS_PER_ACCOUNT``)."""
SUBSCRIPTIONS = 3
"""Subscriptions it lets one WebSocket follow (``ALALLO_MAX_SUBSCRIPTIONS_PER_WEBSOCKET``)."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    started = start_server(tmp_path_factory.mktemp("limits") / "data",
                           ALALLO_MAX_UPLOAD_BYTES=str(UPLOAD_LIMIT),
                           ALALLO_MAX_STREAMS_PER_ACCOUNT=str(STREAMS),
                           ALALLO_MAX_SUBSCRIPTIONS_PER_WEBSOCKET=str(SUBSCRIPTIONS))
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
    assert set(error) == {"message", "type", "param", "code"}
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
    assert at_limit.status_code == 400 and at_limit.json()["error"]["param"] == "name"


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



def test_a_stream_limit_counts_each_account_apart_and_all_or_nothing() -> None:
    limit = StreamLimit(3)
    limit.open("a", 2)
    with pytest.raises(TooManyStreams, match="this account has 2 streams open on this "
                                             "server, the limit is 3") as refused:
        limit.open("a", 2)  # two more would be 4: neither is counted
    assert (refused.value.status_code, refused.value.code) == (429, "too_many_streams")
    limit.open("b", 3)  # another account's room is its own
    limit.open("a")
    assert (limit.held("a"), limit.held("b")) == (3, 3)
    limit.close("a", 3)
    limit.close("b")
    assert (limit.held("a"), limit.held("b")) == (0, 2)


@pytest.fixture
async def running(client: httpx.AsyncClient) -> AsyncIterator[str]:
    """A simulated job that keeps running (its streams stay open) until the test ends."""
    data = (EXAMPLES / "sample.jsonl").read_bytes()[:UPLOAD_LIMIT]
    file = (await upload(client, content=data[:data.rindex(b"\n") + 1])).json()
    job = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file["id"],
        "hyperparameters": {"max_steps": 100_000},
        "trainer": {"type": "simulated", "step_delay_s": 0.2}})
    assert job.status_code == 200, job.text
    yield job.json()["id"]
    await client.post(f"/v1/fine_tuning/jobs/{job.json()['id']}/cancel")


async def frames_until(ws: WebSocketSession, enough: Any) -> list[dict[str, Any]]:
    """Frames of ``ws`` until ``enough(frames)``."""
    frames: list[dict[str, Any]] = []
    with trio.fail_after(30):
        while not enough(frames):
            frames.append(await ws.receive_json())
    return frames


def errors(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f["data"]["error"] for f in frames if f["stream"] == "error"]


async def metric(client: httpx.AsyncClient, name: str, kind: str) -> float:
    text = (await client.get("/metrics")).text
    return float(next(line for line in text.splitlines()
                      if line.startswith(f'{name}{{kind="{kind}"}}')).split()[-1])


async def test_a_websocket_follows_its_limit_of_subscriptions_and_goes_on_past_it(
        client: httpx.AsyncClient, running: str) -> None:
    async with aconnect_ws("/v1/ws", client) as ws:
        for _ in range(SUBSCRIPTIONS):
            await ws.send_json({"subscribe": [running]})
        await ws.send_json({"subscribe": [running]})  # one too many
        await ws.send_json({"subscribe": "*"})  # so is "*"
        frames = await frames_until(ws, lambda frames: len(errors(frames)) == 2)
        for error in errors(frames):
            assert (error["code"], error["param"]) == ("too_many_streams", "subscribe")
            assert f"this WebSocket follows {SUBSCRIPTIONS} subscriptions" in error["message"]
            assert f"the limit is {SUBSCRIPTIONS}" in error["message"]
        # The socket goes on with what it follows: the job's items keep coming.
        later = await frames_until(ws, lambda frames: any(
            f["stream"] == "job" and f["subscription"] == running for f in frames))
        assert not errors(later)
    assert await metric(client, "alallo_streams_refused_total", "subscription") >= 2


async def test_an_accounts_streams_are_capped_across_sse_and_websockets_and_given_back(
        client: httpx.AsyncClient, running: str) -> None:
    with trio.fail_after(60):
        async with contextlib.AsyncExitStack() as held:
            ws = await held.enter_async_context(aconnect_ws("/v1/ws", client))
            for _ in range(2):  # the socket and its two subscriptions: 3 streams
                await ws.send_json({"subscribe": [running]})
            await frames_until(ws, lambda frames: sum(f["stream"] == "job" for f in frames) >= 2)
            for _ in range(STREAMS - 3):  # and SSE streams up to the limit
                sse = await held.enter_async_context(
                    client.stream("GET", "/v1/fine_tuning/stream"))
                assert sse.status_code == 200

            for path in (f"/v1/fine_tuning/jobs/{running}/stream", "/v1/fine_tuning/stream"):
                refused = await client.get(path)
                assert refused.status_code == 429, refused.text
                error = refused.json()["error"]
                assert error["code"] == "too_many_streams"
                assert f"this account has {STREAMS} streams open" in error["message"]
            async with aconnect_ws("/v1/ws", client) as another:
                frame = await another.receive_json()
                with pytest.raises(WebSocketDisconnect) as closed:
                    await another.receive_json()
            assert frame["data"]["error"]["code"] == "too_many_streams"
            assert closed.value.code == 4429 and "too many streams" in closed.value.reason
            await ws.send_json({"subscribe": "*"})  # the socket has room, the account not
            frames = await frames_until(ws, lambda frames: bool(errors(frames)))
            assert errors(frames)[0]["param"] == "subscribe"
            assert f"this account has {STREAMS} streams open" in errors(frames)[0]["message"]

        async def all_closed() -> bool:
            return all([await metric(client, "alallo_open_streams", kind) == 0
                        for kind in ("job", "account", "websocket")])

        await wait_until(all_closed, timeout=20, what="every stream closed")
        # Each closed stream gave its room back, the socket's subscriptions too.
        async with contextlib.AsyncExitStack() as held:
            for _ in range(STREAMS):
                again = await held.enter_async_context(
                    client.stream("GET", "/v1/fine_tuning/stream"))
                assert again.status_code == 200
    for kind in ("job", "account", "websocket"):
        assert await metric(client, "alallo_streams_refused_total", kind) >= 1


async def test_a_socket_flooded_with_refused_subscriptions_is_closed_and_gives_its_room_back(
        client: httpx.AsyncClient, running: str) -> None:
    # Issue 31: 20,000 subscribe messages, then the client left; the socket and its
    # subscriptions stayed open, and held the account's room, until the server stopped
    # (its reader waited on its writer, its writer on a client gone). Now the server reads
    # on, and the socket's room comes back when the client goes.
    with trio.fail_after(120):
        try:
            async with aconnect_ws("/v1/ws", client, queue_size=64) as ws:

                async def drain() -> None:
                    with contextlib.suppress(WebSocketDisconnect, WebSocketNetworkError):
                        while True:
                            await ws.receive()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(drain)
                    for _ in range(20_000):
                        try:
                            await ws.send_json({"subscribe": [running]})
                        except LocalProtocolError:  # the server closed it part way (1008)
                            break
                    nursery.cancel_scope.cancel()  # and leave, the server's answers unread
        except* WebSocketNetworkError:  # or a write met its close
            pass

        async def all_closed() -> bool:
            return all([await metric(client, "alallo_open_streams", kind) == 0
                        for kind in ("job", "websocket")])

        await wait_until(all_closed, timeout=30, what="the flooding socket let go")
        async with contextlib.AsyncExitStack() as held:
            for _ in range(STREAMS):
                again = await held.enter_async_context(
                    client.stream("GET", "/v1/fine_tuning/stream"))
                assert again.status_code == 200
