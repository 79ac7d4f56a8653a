"""``GET /v1/ws``: the same items as the SSE streams, with the same resume rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from httpx_ws import WebSocketDisconnect, aconnect_ws

from alallo import Runtime, Settings
from gateway import serve
from support import EXAMPLES, LiveServer, read_stream, upload

pytestmark = pytest.mark.any_backend  # the subject does not depend on the store

Frame = dict[str, Any]


async def create_simulated(client: httpx.AsyncClient, *, steps: int,
                           step_delay_s: float = 0.0) -> dict[str, Any]:
    file = (await upload(client, EXAMPLES / "sample.jsonl")).json()
    response = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file["id"],
        "hyperparameters": {"max_steps": steps},
        "trainer": {"type": "simulated", "step_delay_s": step_delay_s}})
    assert response.status_code == 200, response.text
    return dict(response.json())


async def talk(client: httpx.AsyncClient, *messages: Any, until: Any = None,
               url: str = "/v1/ws") -> tuple[list[Frame], int | None]:
    """Send ``messages``, then read frames until the server closes (or ``until(frames)``)."""
    frames: list[Frame] = []
    code = None
    with trio.fail_after(60):
        async with aconnect_ws(url, client, max_message_size_bytes=1 << 22) as ws:
            try:
                for message in messages:
                    await ws.send_json(message)
                while True:
                    frames.append(await ws.receive_json())
                    if until is not None and until(frames):
                        break
            except WebSocketDisconnect as exc:
                code = exc.code
    return frames, code


def records(frames: list[Frame]) -> list[tuple[str, int]]:
    return [(f["stream"], f["seq"]) for f in frames if f["stream"] in {"event", "log", "metrics"}]


async def test_a_job_is_followed_to_done_then_the_socket_closes(
        client: httpx.AsyncClient) -> None:
    job = await create_simulated(client, steps=8, step_delay_s=0.01)
    frames, code = await talk(client, {"subscribe": [job["id"]]})
    assert code == 1000
    assert frames[-1] == {"stream": "done", "seq": frames[-2]["seq"], "data": {
        "id": job["id"], "status": "succeeded", "seq": frames[-2]["seq"]}}
    assert frames[-2]["stream"] == "job" and frames[-2]["data"]["status"] == "succeeded"
    seqs = [f["seq"] for f in frames[:-1]]
    assert seqs == sorted(set(seqs))
    sse = await read_stream(client, job["id"])
    assert records(frames) == [(kind, seq) for kind, seq, _ in sse if kind != "job"]

    middle = seqs[len(seqs) // 2]
    resumed, _ = await talk(client, {"subscribe": [job["id"]], "after": {job["id"]: middle}})
    assert all(f["seq"] > middle for f in resumed)
    assert records(resumed) == [r for r in records(frames) if r[1] > middle]
    past, code = await talk(client, {"subscribe": [job["id"]],
                                     "after": {job["id"]: seqs[-1]}})
    assert [f["stream"] for f in past] == ["done"] and code == 1000


async def test_star_follows_every_job_of_the_account_and_resumes(
        client: httpx.AsyncClient) -> None:
    job = await create_simulated(client, steps=5, step_delay_s=0.01)

    def final(frames: list[Frame]) -> bool:
        return any(f["data"].get("id") == job["id"] and f["data"]["status"] == "succeeded"
                   for f in frames)

    frames, _ = await talk(client, {"subscribe": "*"}, until=final)
    assert {f["stream"] for f in frames} == {"job"}
    positions = [f["seq"] for f in frames]
    assert positions == sorted(set(positions))
    later = await create_simulated(client, steps=2)

    def later_final(frames: list[Frame]) -> bool:
        return any(f["data"].get("id") == later["id"] and f["data"]["status"] == "succeeded"
                   for f in frames)

    resumed, _ = await talk(client, {"subscribe": "*", "after": {"*": positions[-1]}},
                            until=later_final)
    assert all(f["seq"] > positions[-1] for f in resumed)
    assert job["id"] not in {f["data"]["id"] for f in resumed}, "it did not change since"


async def test_unknown_jobs_bad_messages_and_missing_keys_get_an_error_frame(
        client: httpx.AsyncClient, live_server: LiveServer) -> None:
    frames, code = await talk(client, {"subscribe": ["ft-nope"]})
    assert frames[0]["stream"] == "error" and frames[0]["data"]["job_id"] == "ft-nope"
    assert frames[0]["data"]["error"]["code"] == "not_found" and code == 1000

    frames, code = await talk(client, {"subscribe": []})
    assert frames[0]["data"]["error"]["param"] == "subscribe" and code == 4422
    frames, code = await talk(client, {"jobs": "*"})
    assert frames[0]["stream"] == "error" and code == 4422

    async with httpx.AsyncClient(base_url=live_server.url) as anonymous:
        frames, code = await talk(anonymous, {"subscribe": "*"})
        assert frames[0]["data"]["error"]["code"] == "unauthorized" and code == 4401
        frames, _ = await talk(anonymous, {"subscribe": "*"},
                               url=f"/v1/ws?access_token={live_server.api_key}",
                               until=lambda frames: True)
        assert frames[0]["stream"] == "job"


async def test_server_shutdown_says_goodbye_and_closes_with_1001(tmp_path: Path) -> None:
    stop = trio.Event()
    async with Runtime(Settings(data_dir=tmp_path)) as runtime:
        async with trio.open_nursery() as server:
            binds = await server.start(lambda task_status: serve(
                runtime, host="127.0.0.1", port=0, shutdown_trigger=stop.wait,
                graceful_timeout_s=1.0, task_status=task_status))
            async with httpx.AsyncClient(base_url=binds[0], headers={
                    "Authorization": f"Bearer {runtime.api_key}"}) as client:
                with trio.fail_after(10):
                    async with aconnect_ws("/v1/ws", client) as ws:
                        await ws.send_json({"subscribe": "*"})
                        stop.set()
                        assert await ws.receive_json() == {"stream": "shutdown", "seq": None,
                                                           "data": {}}
                        with pytest.raises(WebSocketDisconnect) as closed:
                            await ws.receive_json()
                        assert closed.value.code == 1001


async def test_a_message_nested_too_deep_closes_with_4422_and_a_reason(
        client: httpx.AsyncClient) -> None:
    with trio.fail_after(30):
        async with aconnect_ws("/v1/ws", client) as ws:
            await ws.send_text("[" * 10_000 + "]" * 10_000)
            frame = await ws.receive_json()
            with pytest.raises(WebSocketDisconnect) as closed:
                await ws.receive_json()
    message = "the message is nested deeper than 64 levels of arrays and objects"
    assert frame == {"stream": "error", "seq": None, "data": {"job_id": None, "error": {
        "code": "invalid_json", "param": None, "message": message}}}
    assert (closed.value.code, closed.value.reason) == (4422, message)


@pytest.mark.parametrize("after", [2**63, 2**62, -1, True, 1.5])
async def test_an_after_out_of_bounds_is_refused_as_sse_refuses_it(
        client: httpx.AsyncClient, after: Any) -> None:
    job = await create_simulated(client, steps=2)
    for key, subscribe in ((job["id"], [job["id"]]), ("*", "*")):
        frames, code = await talk(client, {"subscribe": subscribe, "after": {key: after}})
        assert code == 4422, (frames, code)  # never 1011: the server did not fail
        (frame,) = frames
        error = frame["data"]["error"]
        assert (frame["stream"], error["code"], error["param"]) == (
            "error", "invalid_request", f"after.{key}")
        if isinstance(after, int) and not isinstance(after, bool):
            assert f"must be between 0 and 2**62, got {after}" in error["message"]
    sse = await client.get(f"/v1/fine_tuning/jobs/{job['id']}/stream",
                           params={"after": str(2**63)})
    assert sse.status_code == 400 and sse.json()["error"]["param"] == "after"
