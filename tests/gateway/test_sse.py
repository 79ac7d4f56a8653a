"""Server-Sent Events at the HTTP level: headers, the end of a stream, the account
stream, slow readers, and shutdown with a reader that stopped reading."""

from __future__ import annotations

import contextlib
import fcntl
import json
import socket
import struct
import sys
import termios
from pathlib import Path
from typing import Any

import httpx
import trio
from asgi import start_request
from httpx_sse import aconnect_sse
from support import EXAMPLES, FINAL, read_stream, upload, wait_until

from alallo import Runtime, Settings
from gateway import build_app, serve

SAMPLE = EXAMPLES / "sample.jsonl"


async def create_simulated(client: httpx.AsyncClient, *, steps: int,
                           step_delay_s: float = 0.0) -> dict[str, Any]:
    file = (await upload(client, SAMPLE)).json()
    response = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file["id"],
        "hyperparameters": {"max_steps": steps},
        "trainer": {"type": "simulated", "step_delay_s": step_delay_s}})
    assert response.status_code == 200, response.text
    return dict(response.json())


def sse_frames(text: str) -> list[dict[str, str]]:
    """The frames of a whole SSE body, comments left out."""
    frames = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines()
                      if ": " in line and not line.startswith(":"))
        if "data" in fields:
            frames.append(fields)
    return frames


async def test_a_finished_job_ends_with_done_and_a_reconnect_past_it_gets_204(
        client: httpx.AsyncClient) -> None:
    job = await create_simulated(client, steps=4)
    await read_stream(client, job["id"])
    path = f"/v1/fine_tuning/jobs/{job['id']}/stream"

    whole = await client.get(path)
    assert whole.status_code == 200
    assert whole.headers["x-accel-buffering"] == "no"
    assert whole.headers["cache-control"] == "no-store"
    assert whole.headers["content-type"].startswith("text/event-stream")
    frames = sse_frames(whole.text)
    assert [f["event"] for f in frames[-2:]] == ["job", "done"]
    last_id = int(frames[-2]["id"])
    assert "id" not in frames[-1], "done keeps the last id: a reconnect resumes past the end"
    assert json.loads(frames[-1]["data"]) == {"id": job["id"], "status": "succeeded",
                                              "seq": last_id}

    for past in (last_id, last_id + 5):
        again = await client.get(path, headers={"Last-Event-ID": str(past)})
        assert again.status_code == 204 and again.content == b""
    earlier = await client.get(path, headers={"Last-Event-ID": str(last_id - 1)})
    assert earlier.status_code == 200
    assert [f["event"] for f in sse_frames(earlier.text)] == ["job", "done"]
    bad = await client.get(path, headers={"Last-Event-ID": "seven"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "Last-Event-ID"


async def read_account_stream(client: httpx.AsyncClient, *, until: set[str],
                              last_event_id: int | None = None,
                              ) -> tuple[httpx.Response, list[tuple[int, dict[str, Any]]]]:
    """Read the account stream until every job in ``until`` was seen final."""
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    items: list[tuple[int, dict[str, Any]]] = []
    pending = set(until)
    with trio.fail_after(60):
        async with aconnect_sse(client, "GET", "/v1/fine_tuning/stream", headers=headers,
                                timeout=httpx.Timeout(60)) as source:
            async with contextlib.aclosing(source.aiter_sse()) as events:
                async for sse in events:
                    if not sse.data:  # a keep-alive comment (httpx-sse yields it after an id)
                        continue
                    assert sse.event == "job"
                    data = json.loads(sse.data)
                    items.append((int(sse.id), data))
                    if data["status"] in FINAL:
                        pending.discard(data["id"])
                    if not pending:
                        break
    return source.response, items


async def test_the_account_stream_shows_every_job_live_and_resumes_from_its_cursor(
        client: httpx.AsyncClient) -> None:
    first = await create_simulated(client, steps=6, step_delay_s=0.02)
    second = await create_simulated(client, steps=3)
    response, items = await read_account_stream(client, until={first["id"], second["id"]})
    assert response.headers["x-accel-buffering"] == "no"
    positions = [p for p, _ in items]
    assert positions == sorted(set(positions)), "feed positions strictly increase"
    seen = {data["id"] for _, data in items}
    assert {first["id"], second["id"]} <= seen
    mine = [data for _, data in items if data["id"] == first["id"]]
    assert [d["seq"] for d in mine] == sorted(d["seq"] for d in mine)
    assert mine[-1]["status"] == "succeeded" and mine[-1]["progress"]["percent"] == 100.0

    # A resume from the middle gives each job that changed since, once, in its latest state.
    middle = positions[len(positions) // 2]
    third = await create_simulated(client, steps=2)
    _, resumed = await read_account_stream(client, until={third["id"]}, last_event_id=middle)
    assert all(p > middle for p, _ in resumed)
    latest = {data["id"]: data for _, data in resumed}
    assert latest[first["id"]]["status"] == "succeeded"
    assert latest[third["id"]]["status"] == "succeeded"
    before = [data["id"] for _, data in resumed if data["id"] != third["id"]]
    assert len(before) == len(set(before)), "a job that did not change again comes once"


async def test_a_stalled_reader_slows_no_one_and_catches_up_when_it_reads_again(
        tmp_path: Path) -> None:
    async with Runtime(Settings(data_dir=tmp_path)) as runtime:
        runtime.bus.buffer_size = 8  # so that the stalled reader surely overflows
        account = await runtime.authenticate(runtime.api_key)
        file = await runtime.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        job = await runtime.create_job(account, {
            "model": "alallo/tiny-gpt2", "training_file": file.id,
            "hyperparameters": {"max_steps": 60},
            "trainer": {"type": "simulated", "step_delay_s": 0.01}})
        app = build_app(runtime)
        headers = {"Authorization": f"Bearer {runtime.api_key}"}
        url = f"/v1/fine_tuning/jobs/{job.id}/stream"
        async with trio.open_nursery() as nursery:
            stalled = await start_request(nursery, app, url, headers)
            async with contextlib.aclosing(stalled.iter_frames()) as stalled_frames:
                head = [await stalled_frames.__anext__()]  # one frame, then it stops reading
                reader = await start_request(nursery, app, url, headers)
                with trio.fail_after(30):
                    whole = await reader.frames()
                assert whole[-1]["event"] == "done"
                assert whole[-2]["data"]["status"] == "succeeded"

                with trio.fail_after(30):  # the stalled reader reads again, to the end
                    head += [frame async for frame in stalled_frames]

        def records(frames: list[dict[str, Any]]) -> list[tuple[str, str]]:
            return [(f["event"], f["id"]) for f in frames if f["event"] in {"event", "log"}]

        assert records(head) == records(whole), "no event or log line lost, none repeated"
        assert head[-2]["data"]["status"] == "succeeded"


TRAINER = r"""
import os, sys, time
for i in range(200):
    print(f"line {i} " + "x" * 50_000, flush=True)
print("LAST", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)  # not the test's wait: the fake trainer's poll of the flag it waits for
"""
"""A trainer that writes 10 MB of log at once (more than any socket buffer), then waits."""


def stalled_socket(url: str, path: str, key: str) -> socket.socket:
    """A client that sends a stream request and never reads (a tiny receive window)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
                 f"Accept: text/event-stream\r\n\r\n".encode())
    return sock


def unread_bytes(sock: socket.socket) -> int:
    return int(struct.unpack("i", fcntl.ioctl(sock, termios.FIONREAD, b"\0\0\0\0"))[0])


async def wait_unread(sock: socket.socket, at_least: int) -> None:
    """Wait until ``at_least`` bytes the server sent lie unread in the socket: it is readable
    only then (``SO_RCVLOWAT``), or once the connection ended (which the check below fails)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, at_least)
    await trio.lowlevel.wait_readable(sock)
    assert unread_bytes(sock) >= at_least


async def open_streams(client: httpx.AsyncClient, kind: str) -> float:
    text = (await client.get("/metrics")).text
    line = next(line for line in text.splitlines()
                if line.startswith(f'alallo_open_streams{{kind="{kind}"}}'))
    return float(line.split()[-1])


async def test_a_stalled_client_is_dropped_and_shutdown_still_meets_its_deadline(
        tmp_path: Path) -> None:
    graceful_s, stalled_s = 1.0, 1.5
    flag = tmp_path / "finish"
    stop = trio.Event()
    async with Runtime(Settings(data_dir=tmp_path / "data", cancel_grace_s=0.5)) as runtime:
        async with trio.open_nursery() as server:
            binds = await server.start(lambda task_status: serve(
                runtime, host="127.0.0.1", port=0, shutdown_trigger=stop.wait,
                graceful_timeout_s=graceful_s, stalled_client_timeout_s=stalled_s,
                task_status=task_status))
            url = binds[0]
            async with httpx.AsyncClient(base_url=url, timeout=30, headers={
                    "Authorization": f"Bearer {runtime.api_key}"}) as client:
                file = (await upload(client, SAMPLE)).json()
                job = (await client.post("/v1/fine_tuning/jobs", json={
                    "model": "alallo/tiny-gpt2", "training_file": file["id"],
                    "trainer": {"command": [sys.executable, "-c", TRAINER, str(flag)]},
                })).json()
                path = f"/v1/fine_tuning/jobs/{job['id']}/stream"
                first_stalled = stalled_socket(url, path, runtime.api_key)

                frames: list[str] = []
                got_last = trio.Event()

                async def follow() -> None:
                    async with aconnect_sse(client, "GET", path,
                                            timeout=httpx.Timeout(60)) as source:
                        async for sse in source.aiter_sse():
                            frames.append(sse.event)
                            if sse.event == "log" and json.loads(sse.data)["text"] == "LAST":
                                got_last.set()

                async with trio.open_nursery() as readers:
                    readers.start_soon(follow)
                    with trio.fail_after(60):
                        await got_last.wait()  # 10 MB read while the other reader stalls
                    async def dropped() -> bool:  # the stalled reader (a gauge: no event)
                        return await open_streams(client, "job") <= 1

                    await wait_until(dropped, timeout=stalled_s + 20,
                                     what="the stalled reader dropped")
                    first_stalled.close()

                    # A reader that stalls just before shutdown (a replay of the 10 MB).
                    second_stalled = stalled_socket(url, path, runtime.api_key)
                    with trio.fail_after(20):
                        await wait_unread(second_stalled, 1)
                    stopped_at = trio.current_time()
                    stop.set()
            flag.touch()
        took = trio.current_time() - stopped_at
        second_stalled.close()
    assert frames[-1] == "shutdown", "an open stream says goodbye"
    assert took < graceful_s + 1.5, f"shutdown took {took:.1f} s: the stalled reader was not cut"
