"""``alallo.client._calls``: the calls as steps, driven by hand, without any I/O.

What both clients run: each step a call asks for, and what it makes of the answer
it is sent back (STYLE.md, rule 37: pure parts are tested without I/O).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent

import alallo
from alallo.client._calls import Calls
from alallo.client._steps import Connect, Give, NextFrame, Send, Wait
from alallo.client._stream import StreamItem

pytestmark = pytest.mark.unit


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Calls:
    for name in ("ALALLO_URL", "ALALLO_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALALLO_DATA_DIR", str(tmp_path))
    return Calls("http://alallo.test/v1", "k-test", 30.0)


def answer(status: int, body: Any, method: str = "GET", path: str = "/") -> httpx.Response:
    return httpx.Response(status, json=body, request=httpx.Request(method, path))


def test_a_call_is_one_request_and_its_answer(calls: Calls) -> None:
    op = calls.list_jobs(5, "ft-3")
    send = next(op)
    assert send == Send("GET", "/v1/fine_tuning/jobs", {"Authorization": "Bearer k-test"},
                        params={"limit": 5, "after": "ft-3"})
    with pytest.raises(StopIteration) as done:
        op.send(answer(200, {"object": "list", "data": [], "has_more": False}))
    assert done.value.value == {"object": "list", "data": [], "has_more": False}

    refused = calls.get_job("ft-9")
    next(refused)
    with pytest.raises(alallo.NotFound):
        refused.send(answer(404, {"error": {"code": "not_found", "message": "no job 'ft-9'",
                                            "param": "job_id"}}))


def test_a_transport_error_thrown_in_becomes_a_client_error(calls: Calls) -> None:
    op = calls.list_models()
    next(op)
    cut = httpx.ConnectError("refused")
    with pytest.raises(alallo.ClientError, match="cannot reach alallo at http://alallo.test"
                       ) as err:
        op.throw(cut)
    assert err.value.__cause__ is cut


def test_a_list_is_fetched_page_after_page(calls: Calls) -> None:
    feed = calls.iter_events("ft-1")
    asked = {"limit": 100, "order": "asc", "type": "message"}  # alallo's order of a log
    assert next(feed).params == asked  # type: ignore[union-attr]
    assert feed.send(answer(200, {"data": [{"seq": 1}, {"seq": 4}], "has_more": True})) == Give(
        {"seq": 1})
    assert next(feed) == Give({"seq": 4})
    assert next(feed).params == {**asked, "after": 4}  # type: ignore[union-attr]
    assert feed.send(answer(200, {"data": [{"seq": 5}], "has_more": False})) == Give({"seq": 5})
    with pytest.raises(StopIteration):
        next(feed)


def test_watch_reconnects_from_the_last_id_after_a_drop(calls: Calls) -> None:
    feed = calls.watch("ft-1", None)
    connect = next(feed)
    assert isinstance(connect, Connect) and "Last-Event-ID" not in connect.headers
    stream = httpx.Response(200, headers={"content-type": "text/event-stream"})
    assert feed.send(stream) == NextFrame()
    frame = ServerSentEvent(event="job", data='{"status": "running"}', id="7", retry=2000)
    assert feed.send(frame) == Give(StreamItem("job", 7, {"status": "running"}))
    assert next(feed) == NextFrame()
    assert feed.throw(httpx.ReadError("reset")) == Wait(2.0)  # the server's retry
    again = next(feed)
    assert isinstance(again, Connect) and again.headers["Last-Event-ID"] == "7"
    assert feed.send(stream) == NextFrame()
    with pytest.raises(StopIteration):  # the server's last frame of a finished job
        feed.send(ServerSentEvent(event="done", data="{}", id="8"))
