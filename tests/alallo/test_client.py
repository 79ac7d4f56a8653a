"""``alallo.client``: requests, errors, key lookup, paging and the resumable stream."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import alallo
from alallo.client import ApiError, Client, ClientError, StreamItem

pytestmark = pytest.mark.unit

Handler = Callable[[httpx.Request], httpx.Response]
JobFactory = Callable[..., dict[str, Any]]
SseBody = Callable[..., bytes]
SSE_HEADERS = {"content-type": "text/event-stream"}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ALALLO_URL", "ALALLO_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALALLO_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Reconnection waits, recorded instead of slept."""
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)
    return waits


def client_for(handler: Handler) -> Client:
    return Client("http://alallo.test", api_key="k-test", transport=httpx.MockTransport(handler))


def error(status: int, code: str, message: str, param: str | None = None) -> httpx.Response:
    return httpx.Response(
        status, json={"error": {"code": code, "message": message, "param": param}}
    )


# -- requests and errors --------------------------------------------------------


def test_error_body_becomes_api_error_that_reads_as_one_line() -> None:
    client = client_for(
        lambda request: error(400, "invalid_request", "line 7: not a JSON object", "file")
    )
    with pytest.raises(ApiError) as caught:
        client.get_file("file-1")
    err = caught.value
    assert (err.status_code, err.code, err.message, err.param) == (
        400,
        "invalid_request",
        "line 7: not a JSON object",
        "file",
    )
    assert str(err) == "400 invalid_request: line 7: not a JSON object (param: file)"


def test_error_without_param_and_without_json_body() -> None:
    client = client_for(lambda request: error(404, "not_found", "no job ft-9 in this account"))
    with pytest.raises(ApiError, match=r"^404 not_found: no job ft-9 in this account$"):
        client.get_job("ft-9")
    client = client_for(lambda request: httpx.Response(502, text="Bad Gateway from proxy"))
    with pytest.raises(ApiError) as caught:
        client.list_jobs()
    assert (caught.value.code, caught.value.message) == (
        "http_502",
        "Bad Gateway from proxy (GET /v1/fine_tuning/jobs)",
    )


def test_an_error_answer_raises_the_class_it_names_as_the_runtime_does() -> None:
    client = client_for(lambda request: error(404, "not_found", "no job 'ft-9'", "job_id"))
    with pytest.raises(alallo.NotFound) as caught:
        client.get_job("ft-9")
    assert isinstance(caught.value, ApiError) and isinstance(caught.value, alallo.AlalloError)
    assert str(caught.value) == "404 not_found: no job 'ft-9' (param: job_id)"
    client = client_for(lambda request: error(409, "invalid_transition", "it is succeeded"))
    with pytest.raises(alallo.InvalidTransition):
        client.cancel_job("ft-1")
    down = error(503, "store_unavailable", "the store failed: connection lost")
    with pytest.raises(alallo.Unavailable) as outage:
        client_for(lambda request: down).list_jobs()
    assert (outage.value.status_code, outage.value.code) == (503, "store_unavailable")
    client = client_for(lambda request: error(402, "insufficient_balance", "top up"))
    with pytest.raises(ApiError) as unnamed:  # a status no class names: ApiError itself
        client.create_job(model="m", training_file="file-1")
    assert type(unnamed.value) is ApiError


def test_connection_refused_says_to_start_the_server() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with pytest.raises(ClientError) as caught:
        client_for(refuse).list_models()
    assert str(caught.value) == (
        "cannot reach alallo at http://alallo.test: is the server running? "
        "start it with `alallo serve`"
    )
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


def test_requests_carry_the_key_and_the_paths_of_api_md() -> None:
    seen: list[tuple[str, str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, str(request.url), request.headers.get("authorization")))
        return httpx.Response(200, json={"object": "list", "data": [], "has_more": False})

    with client_for(handler) as client:
        client.list_jobs(limit=5, after="ft-3")
        client.cancel_job("ft-3")
        client.read_log("ft-3", after=10)
        client.delete_file("file-2")
        client.healthz()
    assert seen == [
        ("GET", "http://alallo.test/v1/fine_tuning/jobs?limit=5&after=ft-3", "Bearer k-test"),
        ("POST", "http://alallo.test/v1/fine_tuning/jobs/ft-3/cancel", "Bearer k-test"),
        (
            "GET",
            "http://alallo.test/v1/fine_tuning/jobs/ft-3/log?limit=1000&after=10",
            "Bearer k-test",
        ),
        ("DELETE", "http://alallo.test/v1/files/file-2", "Bearer k-test"),
        ("GET", "http://alallo.test/healthz", None),
    ]


def test_account_reads_the_keys_own_account_and_a_refused_key_is_unauthorized() -> None:
    mine = {"id": "acct-1", "object": "account", "balance": 1.5,
            "spend": {"charged": 0.25, "refunded": 0, "gross": 0.25}}
    seen: list[tuple[str, str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, str(request.url), request.headers.get("authorization")))
        return httpx.Response(200, json=mine)

    with client_for(handler) as client:
        assert client.account() == mine
    assert seen == [("GET", "http://alallo.test/v1/account", "Bearer k-test")]
    refused = client_for(lambda request: error(401, "unauthorized", "invalid API key"))
    with pytest.raises(alallo.Unauthorized):
        refused.account()


def test_create_job_sends_only_the_fields_given() -> None:
    bodies: list[object] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"id": "ft-1", "status": "queued", "message": "Starting"})

    client = client_for(handler)
    job = client.create_job(
        model="alallo/tiny-gpt2",
        training_file="file-1",
        adapter=None,
        hyperparameters={"n_epochs": None, "max_steps": 30},
    )
    client.estimate(model="meta/llama-70b", hyperparameters={"n_epochs": None})
    assert job == {"id": "ft-1", "status": "queued", "message": "Starting"}
    assert bodies == [
        {
            "model": "alallo/tiny-gpt2",
            "training_file": "file-1",
            "hyperparameters": {"max_steps": 30},
        },
        {"model": "meta/llama-70b"},
    ]


def test_upload_sends_multipart_file_and_purpose(tmp_path: Path) -> None:
    data = tmp_path / "chat.jsonl"
    data.write_text('{"messages": []}\n')
    seen: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.read())
        return httpx.Response(200, json={"id": "file-1", "line_count": 1})

    assert client_for(handler).upload_file(data)["id"] == "file-1"
    assert b'filename="chat.jsonl"' in seen[0]
    assert b'{"messages": []}' in seen[0]
    assert b'name="purpose"\r\n\r\nfine-tune' in seen[0]


def test_upload_of_a_missing_file_is_a_client_error(tmp_path: Path) -> None:
    with pytest.raises(ClientError, match=r"cannot read .*nope.jsonl"):
        client_for(lambda request: httpx.Response(200)).upload_file(tmp_path / "nope.jsonl")


def test_base_url_from_env_and_trailing_v1_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200))
    monkeypatch.setenv("ALALLO_URL", "http://elsewhere:9000/v1/")
    assert Client(transport=transport).base_url == "http://elsewhere:9000"
    assert Client("http://here:1", transport=transport).base_url == "http://here:1"
    monkeypatch.delenv("ALALLO_URL")
    assert Client(transport=transport).base_url == "http://127.0.0.1:8000"


# -- the API key ----------------------------------------------------------------


class KeyRecorder(httpx.MockTransport):
    """Answers every request with an empty list and keeps its Authorization header."""

    def __init__(self) -> None:
        self.keys: list[str | None] = []
        super().__init__(self._answer)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.keys.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"object": "list", "data": []})


def test_api_key_comes_from_argument_then_env_then_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "api-key").write_text("k-file\n")
    monkeypatch.setenv("ALALLO_API_KEY", "k-env")
    recorder = KeyRecorder()
    Client(api_key="k-arg", transport=recorder).list_models()
    Client(transport=recorder).list_models()
    monkeypatch.delenv("ALALLO_API_KEY")
    Client(transport=recorder).list_models()
    assert recorder.keys == ["Bearer k-arg", "Bearer k-env", "Bearer k-file"]


def test_missing_key_says_how_to_get_one_but_healthz_needs_none(tmp_path: Path) -> None:
    recorder = KeyRecorder()
    client = Client(transport=recorder)
    client.healthz()
    with pytest.raises(ClientError, match=r"no API key: .*ALALLO_API_KEY.*`alallo serve`"):
        client.list_jobs()
    # A key written later (the server has just started) is found by the next call.
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "api-key").write_text("k-late")
    client.list_jobs()
    assert recorder.keys == [None, "Bearer k-late"]


# -- paging -----------------------------------------------------------------------


def test_iter_events_pages_through_all_oldest_first() -> None:
    events = [
        {"id": f"ft-1-event-{n}", "seq": n, "type": "message", "alallo_type": "T",
         "message": f"m{n}"}
        for n in (1, 2, 4, 7, 9)
    ]
    afters: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        after = request.url.params.get("after")
        afters.append(after)
        start = 0 if after is None else [e["seq"] for e in events].index(int(after)) + 1
        page = events[start : start + 2]
        return httpx.Response(
            200, json={"object": "list", "data": page, "has_more": start + 2 < len(events)}
        )

    assert [e["message"] for e in client_for(handler).iter_events("ft-1")] == [
        "m1",
        "m2",
        "m4",
        "m7",
        "m9",
    ]
    assert afters == [None, "2", "7"]


def test_iter_log_pages_by_line_number() -> None:
    afters: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        afters.append(request.url.params.get("after"))
        first = int(request.url.params.get("after", 0)) + 1
        lines = [
            {"n": n, "at": 0, "text": f"line {n}"} for n in range(first, min(first + 1000, 1501))
        ]
        return httpx.Response(
            200, json={"object": "list", "data": lines, "has_more": first + 1000 <= 1500}
        )

    lines = list(client_for(handler).iter_log("ft-1"))
    assert [line["n"] for line in lines] == list(range(1, 1501))
    assert afters == [None, "1000"]


# -- the stream -------------------------------------------------------------------


def test_stream_items_are_parsed_and_unknown_kinds_pass_through(
    make_job: JobFactory, sse_body: SseBody
) -> None:
    body = sse_body(
        ("job", 1, make_job(status="queued", message="Starting")),
        ("event", 2, {"type": "SOMETHING_NEW", "message": "a type we do not know"}),
        ("log", 3, {"n": 1, "at": 5, "text": "step 10 loss 2.1"}),
        ("metrics", 4, {"gpu": 0.5}),
        ("log", 5, "not json"),
        ("job", 6, make_job(status="succeeded")),
    )
    body = b": keep-alive\n\nretry: 2000\n\n" + body  # neither is an item
    client = client_for(lambda request: httpx.Response(200, headers=SSE_HEADERS, content=body))
    items = list(client.watch("ft-1"))
    assert [(item.kind, item.seq) for item in items] == [
        ("job", 1),
        ("event", 2),
        ("log", 3),
        ("metrics", 4),
        ("log", 5),
        ("job", 6),
    ]
    assert items[1].data["type"] == "SOMETHING_NEW"
    assert items[2] == StreamItem("log", 3, {"n": 1, "at": 5, "text": "step 10 loss 2.1"})
    assert items[4].data == {"text": "not json"}


def test_stream_reconnects_with_last_event_id_until_the_final_status(
    make_job: JobFactory, sse_body: SseBody, sleeps: list[float]
) -> None:
    bodies = {
        None: b"retry: 2000\n"
        + sse_body(("job", 1, make_job(status="queued")), ("log", 2, {"n": 2})),
        "2": sse_body(("job", 3, make_job(status="running"))),
        "3": sse_body(("log", 4, {"n": 4, "text": "b"}), ("job", 5, make_job(status="succeeded"))),
    }
    last_ids: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/stream"):  # the client looks whether the job ended
            return httpx.Response(200, json=make_job(status="running"))
        last_id = request.headers.get("last-event-id")
        last_ids.append(last_id)
        return httpx.Response(200, headers=SSE_HEADERS, content=bodies[last_id])

    items = list(client_for(handler).watch("ft-1"))
    assert [item.seq for item in items] == [1, 2, 3, 4, 5]
    assert last_ids == [None, "2", "3"]
    assert sleeps == [2.0, 2.0]  # the server's retry; it restarts after each delivery


def test_stream_resumed_past_the_final_item_ends_with_the_job(
    make_job: JobFactory, sleeps: list[float]
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/stream"):
            assert request.headers["last-event-id"] == "30"
            return httpx.Response(200, headers=SSE_HEADERS, content=b": ping\n\n")
        return httpx.Response(200, json=make_job(status="cancelled"))

    items = list(client_for(handler).watch("ft-1", last_event_id=30))
    assert [(item.kind, item.seq, item.data["status"]) for item in items] == [
        ("job", 30, "cancelled")
    ]
    assert sleeps == []


def test_stream_resumes_after_a_dropped_connection(
    make_job: JobFactory, sse_body: SseBody, sleeps: list[float]
) -> None:
    first = sse_body(("job", 7, make_job(status="running")))

    class Dropped(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield first
            raise httpx.ReadError("connection reset by peer")

    def handler(request: httpx.Request) -> httpx.Response:
        if request.headers.get("last-event-id") is None:
            return httpx.Response(200, headers=SSE_HEADERS, stream=Dropped())
        assert request.headers["last-event-id"] == "7"
        return httpx.Response(
            200, headers=SSE_HEADERS, content=sse_body(("job", 8, make_job(status="failed")))
        )

    items = list(client_for(handler).watch("ft-1"))
    assert [(item.seq, item.data["status"]) for item in items] == [(7, "running"), (8, "failed")]


def test_stream_starts_after_the_given_id_and_gives_up_after_bounded_attempts(
    make_job: JobFactory, sse_body: SseBody, sleeps: list[float]
) -> None:
    last_ids: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/stream"):
            last_ids.append(request.headers.get("last-event-id"))
        if len(last_ids) == 1:
            return httpx.Response(
                200, headers=SSE_HEADERS, content=sse_body(("job", 13, make_job()))
            )
        raise httpx.ConnectError("Connection refused", request=request)

    stream = client_for(handler).watch("ft-1", last_event_id=12)
    assert next(stream).seq == 13
    with pytest.raises(ClientError, match=r"lost the stream of ft-1 .* after 10 attempts"):
        next(stream)
    assert last_ids == ["12"] + ["13"] * 10
    assert sleeps == [0.5, 1.0, 2.0, 4.0] + [5.0] * 6


def test_stream_of_an_unknown_job_or_an_absent_server_fails_at_once(sleeps: list[float]) -> None:
    client = client_for(lambda request: error(404, "not_found", "no job ft-9 in this account"))
    with pytest.raises(ApiError, match="no job ft-9"):
        next(client.watch("ft-9"))

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("Connection refused", request=request)

    with pytest.raises(ClientError, match="cannot reach alallo"):
        next(client_for(refuse).watch("ft-1"))
    html = client_for(lambda request: httpx.Response(200, text="<html>"))
    with pytest.raises(ClientError, match="did not answer an event stream"):
        next(html.watch("ft-1"))
    assert sleeps == []
