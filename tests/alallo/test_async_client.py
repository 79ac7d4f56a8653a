"""``alallo.AsyncClient``: the same calls as ``Client``, under Trio and under asyncio.

Fakes (``httpx.MockTransport``) pin down requests, errors, paging and the
reconnection rules of ``watch`` in Trio's virtual time; the live server
shows the whole round under Trio, with a connection cut mid-stream, and
under asyncio (``asyncio.run`` in a plain test function).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from support import EXAMPLES, FINAL, LiveServer

import alallo.client._stream
from alallo import AsyncClient
from alallo.client import ApiError, ClientError, StreamItem

pytestmark = pytest.mark.any_backend  # the client is the subject

Handler = Callable[[httpx.Request], httpx.Response]
JobFactory = Callable[..., dict[str, Any]]
SseBody = Callable[..., bytes]
SSE_HEADERS = {"content-type": "text/event-stream"}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ALALLO_URL", "ALALLO_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALALLO_DATA_DIR", str(tmp_path / "data"))


def client_for(handler: Handler) -> AsyncClient:
    return AsyncClient("http://alallo.test", api_key="k-test",
                       transport=httpx.MockTransport(handler))


async def collect(items: AsyncGenerator[Any, None]) -> list[Any]:
    async with contextlib.aclosing(items) as stream:
        return [item async for item in stream]


# -- requests, errors and paging, against fakes -------------------------------------


async def test_requests_carry_the_key_and_errors_become_api_errors(tmp_path: Path) -> None:
    seen: list[tuple[str, str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, str(request.url), request.headers.get("authorization")))
        if request.url.path.endswith("/cancel"):
            return httpx.Response(409, json={"error": {
                "code": "invalid_transition", "message": "cannot cancel job ft-3: it is "
                "succeeded", "param": None}})
        return httpx.Response(200, json={"object": "list", "data": [], "has_more": False})

    data = tmp_path / "t.jsonl"
    data.write_bytes(b'{"text": "hi"}\n')
    async with client_for(handler) as client:
        await client.list_jobs(limit=5, after="ft-3")
        await client.upload_file(data)
        await client.create_job(model="m", training_file="file-1", name=None,
                                hyperparameters={"max_steps": 3, "batch_size": None})
        await client.healthz()
        with pytest.raises(ApiError) as caught:
            await client.cancel_job("ft-3")
    assert str(caught.value) == "409 invalid_transition: cannot cancel job ft-3: it is succeeded"
    assert seen == [
        ("GET", "http://alallo.test/v1/fine_tuning/jobs?limit=5&after=ft-3", "Bearer k-test"),
        ("POST", "http://alallo.test/v1/files", "Bearer k-test"),
        ("POST", "http://alallo.test/v1/fine_tuning/jobs", "Bearer k-test"),
        ("GET", "http://alallo.test/healthz", None),
        ("POST", "http://alallo.test/v1/fine_tuning/jobs/ft-3/cancel", "Bearer k-test"),
    ]


async def test_no_server_and_no_key_are_client_errors() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with pytest.raises(ClientError, match="cannot reach alallo at http://alallo.test"):
        await client_for(refuse).list_models()
    keyless = AsyncClient("http://alallo.test", transport=httpx.MockTransport(refuse))
    with pytest.raises(ClientError, match="no API key"):
        await keyless.get_job("ft-1")


async def test_account_reads_the_keys_own_account() -> None:
    seen: list[tuple[str, str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, str(request.url), request.headers.get("authorization")))
        if len(seen) > 1:
            return httpx.Response(401, json={"error": {
                "code": "unauthorized", "message": "invalid API key", "param": None}})
        return httpx.Response(200, json={"id": "acct-1", "object": "account", "balance": 2.0})

    async with client_for(handler) as client:
        assert (await client.account())["balance"] == 2.0
        with pytest.raises(alallo.Unauthorized):
            await client.account()
    assert seen == [("GET", "http://alallo.test/v1/account", "Bearer k-test")] * 2


async def test_iterators_page_through_everything_oldest_first() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        after = int(request.url.params.get("after", 0)) if "ft-1/" in request.url.path else 0
        if request.url.path.endswith("/events"):
            data = [{"seq": s, "message": f"e{s}"} for s in range(after + 1, min(after + 3, 6))]
            return httpx.Response(200, json={"data": data, "has_more": after + 2 < 5})
        if request.url.path.endswith("/log"):
            data = [{"n": n, "text": f"l{n}"} for n in range(after + 1, min(after + 4, 8))]
            return httpx.Response(200, json={"data": data, "has_more": after + 3 < 7})
        after_id = request.url.params.get("after")
        start = 0 if after_id is None else int(after_id[3:])
        data = [{"id": f"ft-{i}"} for i in range(start + 1, min(start + 3, 6))]
        return httpx.Response(200, json={"data": data, "has_more": start + 2 < 5})

    async with client_for(handler) as client:
        events = await collect(client.iter_events("ft-1"))
        lines = await collect(client.iter_log("ft-1"))
        jobs = await collect(client.iter_jobs(page_size=2))
    assert [e["message"] for e in events] == ["e1", "e2", "e3", "e4", "e5"]
    assert [line["n"] for line in lines] == [1, 2, 3, 4, 5, 6, 7]
    assert [j["id"] for j in jobs] == ["ft-1", "ft-2", "ft-3", "ft-4", "ft-5"]


# -- watch, against fakes, in virtual time -----------------------------------------------


async def test_watch_reconnects_from_the_last_id_until_the_final_status(
        autojump_clock: trio.testing.MockClock, make_job: JobFactory, sse_body: SseBody) -> None:
    first = b"retry: 2000\n" + sse_body(("job", 1, make_job(status="queued")),
                                        ("log", 2, {"n": 2}))

    class Dropped(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield first
            raise httpx.ReadError("connection reset by peer")

    last_ids: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/stream"):  # the client looks whether the job ended
            return httpx.Response(200, json=make_job(status="running"))
        last_id = request.headers.get("last-event-id")
        last_ids.append(last_id)
        if last_id is None:
            return httpx.Response(200, headers=SSE_HEADERS, stream=Dropped())
        if last_id == "2":  # a clean end before the final status: look, then reconnect
            return httpx.Response(200, headers=SSE_HEADERS,
                                  content=sse_body(("job", 3, make_job(status="running"))))
        return httpx.Response(200, headers=SSE_HEADERS, content=sse_body(
            ("log", 4, {"n": 4}), ("job", 5, make_job(status="succeeded"))) + b"event: done\n"
            b"data: {}\n\n")

    start = trio.current_time()
    items = await collect(client_for(handler).watch("ft-1"))
    assert [item.seq for item in items] == [1, 2, 3, 4, 5]
    assert items[-1].data["status"] == "succeeded"
    assert last_ids == [None, "2", "3"]
    assert trio.current_time() - start == pytest.approx(4.0)  # the server's retry, twice


async def test_watch_resumed_past_the_end_gives_the_final_job(make_job: JobFactory) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/stream"):
            assert request.headers["last-event-id"] == "30"
            return httpx.Response(204)
        return httpx.Response(200, json=make_job(status="cancelled"))

    items = await collect(client_for(handler).watch("ft-1", last_event_id=30))
    assert items == [StreamItem("job", 30, make_job(status="cancelled"))]


async def test_watch_gives_up_after_bounded_attempts(
        autojump_clock: trio.testing.MockClock, make_job: JobFactory, sse_body: SseBody) -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            return httpx.Response(200, headers=SSE_HEADERS, content=sse_body(("job", 13,
                                                                               make_job())))
        raise httpx.ConnectError("Connection refused", request=request)

    start = trio.current_time()
    with pytest.raises(ClientError, match=r"lost the stream of ft-1 .* after 10 attempts"):
        await collect(client_for(handler).watch("ft-1", last_event_id=12))
    assert trio.current_time() - start == pytest.approx(0.5 + 1 + 2 + 4 + 5 * 6)


async def test_watch_of_an_unknown_job_or_a_non_stream_fails_at_once() -> None:
    missing = client_for(lambda request: httpx.Response(404, json={"error": {
        "code": "not_found", "message": "no job 'ft-9'", "param": "job_id"}}))
    with pytest.raises(ApiError, match="no job 'ft-9'"):
        await collect(missing.watch("ft-9"))
    html = client_for(lambda request: httpx.Response(200, text="<html>"))
    with pytest.raises(ClientError, match="did not answer an event stream"):
        await collect(html.watch("ft-1"))


# -- the live server -----------------------------------------------------------------


class _CutFirstStream(httpx.AsyncBaseTransport):
    """The real network, except that the first job stream breaks after ``cut_after`` bytes."""

    def __init__(self, cut_after: int) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._cut_after = cut_after
        self.cut = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if self.cut or not request.url.path.endswith("/stream"):
            return response
        self.cut = True
        inner, limit = response.stream, self._cut_after

        class Cut(httpx.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                sent = 0
                async for chunk in inner:  # type: ignore[union-attr]
                    if sent + len(chunk) > limit:
                        yield chunk[:limit - sent]
                        raise httpx.ReadError("cut by the test")
                    sent += len(chunk)
                    yield chunk

            async def aclose(self) -> None:
                await inner.aclose()  # type: ignore[union-attr]

        return httpx.Response(response.status_code, headers=response.headers, stream=Cut(),
                              extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_a_job_end_to_end_under_trio_with_a_cut_stream(
        live_server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alallo.client._stream, "STREAM_RECONNECT_MAX_DELAY_S", 0.05)
    cutter = _CutFirstStream(cut_after=3000)
    async with AsyncClient(live_server.url, api_key=live_server.api_key,
                           transport=cutter) as client:
        file = await client.upload_file(EXAMPLES / "sample.jsonl")
        job = await client.create_job(model="alallo/tiny-gpt2", training_file=file["id"],
                                      hyperparameters={"max_steps": 30},
                                      trainer={"type": "simulated", "step_delay_s": 0.01})
        followed = await collect(client.watch(job["id"]))
        assert cutter.cut
        whole = await collect(client.watch(job["id"]))  # after the end: all from the store
        events = await collect(client.iter_events(job["id"]))
        lines = await collect(client.iter_log(job["id"]))
        assert job["id"] in [j["id"] async for j in client.iter_jobs()]
        series = await client.list_metrics(job["id"], after=10)
        final = await client.get_job(job["id"])
        csv = await client.file_content(final["result_files"][0])
        uploaded = await client.file_content(file["id"])
    assert [row["step"] for row in series["data"]] == [20, 30]
    assert [line.split(",")[0] for line in csv.decode().splitlines()] == ["step", "10", "20", "30"]
    assert uploaded == (EXAMPLES / "sample.jsonl").read_bytes()
    seqs = [item.seq for item in followed]
    assert seqs == sorted(set(seqs)), "in order, nothing twice"

    def records(items: list[StreamItem]) -> list[tuple[str, int]]:
        return [(i.kind, i.seq) for i in items if i.kind in {"event", "log"}]

    assert records(followed) == records(whole), "nothing missed across the cut"
    assert followed[-1].data["status"] == "succeeded"
    assert [("event", e["seq"]) for e in events] == [r for r in records(whole) if r[0] == "event"]
    assert any("loss" in line["text"] for line in lines)


def test_a_job_end_to_end_under_asyncio(live_server: LiveServer) -> None:
    async def main() -> tuple[list[str], list[str], dict[str, Any]]:
        async with AsyncClient(live_server.url, api_key=live_server.api_key) as client:
            assert (await client.healthz())["status"] == "ok"
            file = await client.upload_file(EXAMPLES / "sample.jsonl")
            job = await client.create_job(model="alallo/tiny-gpt2", training_file=file["id"],
                                          hyperparameters={"max_steps": 5},
                                          trainer="simulated")
            statuses: list[str] = []
            async with contextlib.aclosing(client.watch(job["id"])) as items:
                async for item in items:
                    if item.kind == "job" and item.data["status"] not in statuses[-1:]:
                        statuses.append(item.data["status"])
            types = [e["alallo_type"] async for e in client.iter_events(job["id"])]
            return statuses, types, await client.get_job(job["id"])

    statuses, types, final = asyncio.run(main())
    assert statuses[-1] == "succeeded"  # the stream starts from the job's latest state
    assert types[0] == "JOB_PENDING" and types[-1] == "JOB_COMPLETE"
    assert final["status"] in FINAL and final["fine_tuned_model"]
