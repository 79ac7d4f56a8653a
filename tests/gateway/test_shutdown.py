"""Stopping ``alallo serve`` with SIGINT or SIGTERM, as a process: every open stream
says goodbye and ends cleanly, and a client that stopped reading never holds up the
exit past the deadline (gateway/_connections.py, gateway/server.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import trio
from httpx_sse import aconnect_sse
from httpx_ws import WebSocketDisconnect, aconnect_ws

from gateway.server import GRACEFUL_TIMEOUT_S
from support import EXAMPLES, LiveServer, upload, wait_exited

from test_sse import TRAINER, stalled_socket, wait_unread

# How the server stops does not depend on the store it uses.
pytestmark = pytest.mark.any_backend

StartServer = Callable[..., LiveServer]


async def wait_exit(process: subprocess.Popen[bytes], limit_s: float) -> float:
    """Seconds until ``process`` exits (fails the test after ``limit_s``)."""
    start = time.monotonic()
    await wait_exited([process.pid], timeout=limit_s)
    took = time.monotonic() - start
    assert process.poll() is not None, f"the server still runs {limit_s} s on"
    return took


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_every_open_stream_and_websocket_gets_its_goodbye_then_the_server_exits(
        server_factory: StartServer, signum: int) -> None:
    server = server_factory()
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers,
                                 timeout=30) as client:
        file = (await upload(client, EXAMPLES / "sample.jsonl")).json()
        job = (await client.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": file["id"],
            "hyperparameters": {"max_steps": 100_000},
            "trainer": {"type": "simulated", "step_delay_s": 0.01}})).json()
        seen: dict[str, list[Any]] = {"job": [], "account": [], "websocket": []}
        opened = {name: trio.Event() for name in seen}

        async def follow_sse(name: str, path: str) -> None:
            # A stream cut mid-chunk raises httpx.RemoteProtocolError here.
            async with aconnect_sse(client, "GET", path) as source:
                async for sse in source.aiter_sse():
                    seen[name].append((sse.event, sse.data, sse.retry))
                    opened[name].set()

        async def follow_websocket() -> None:
            async with aconnect_ws("/v1/ws", client) as ws:
                await ws.send_json({"subscribe": [job["id"]]})
                try:
                    while True:
                        seen["websocket"].append(await ws.receive_json())
                        opened["websocket"].set()
                except WebSocketDisconnect as closed:
                    seen["websocket"].append(closed.code)

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(follow_sse, "job", f"/v1/fine_tuning/jobs/{job['id']}/stream")
                nursery.start_soon(follow_sse, "account", "/v1/fine_tuning/stream")
                nursery.start_soon(follow_websocket)
                for event in opened.values():
                    await event.wait()
                server.process.send_signal(signum)
    assert seen["job"][-1] == ("shutdown", "{}", 2000)
    assert seen["account"][-1] == ("shutdown", "{}", 2000)
    assert seen["websocket"][-2:] == [{"stream": "shutdown", "seq": None, "data": {}}, 1001]
    await wait_exit(server.process, 20)
    assert server.process.returncode == 0


async def test_a_client_that_stopped_reading_does_not_hold_up_the_exit_past_the_deadline(
        server_factory: StartServer, tmp_path: Any) -> None:
    server = server_factory()
    flag = tmp_path / "finish"
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers,
                                 timeout=30) as client:
        file = (await upload(client, EXAMPLES / "sample.jsonl")).json()
        job = (await client.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": file["id"],
            "trainer": {"command": [sys.executable, "-c", TRAINER, str(flag)]}})).json()
        path = f"/v1/fine_tuning/jobs/{job['id']}/stream"
        with trio.fail_after(60):  # the trainer wrote its 10 MB of log
            async with aconnect_sse(client, "GET", path) as source:
                async for sse in source.aiter_sse():
                    if sse.event == "log" and json.loads(sse.data)["text"] == "LAST":
                        break
    stalled = stalled_socket(server.url, path, server.api_key)
    try:
        # Its receive window filled up with the start of the 10 MB (the headers alone are
        # about 300 bytes): the server's send of a 50 kB log line now waits on it.
        with trio.fail_after(20):
            await wait_unread(stalled, 4096)
        server.process.send_signal(signal.SIGTERM)
        took = await wait_exit(server.process, 30)
    finally:
        stalled.close()
        flag.touch()
    assert server.process.returncode == 0
    # The deadline, then the runtime stops (about 0.5 s, as without a stalled reader):
    # 2.3 s in all on an idle 2-core VM, 5.2 s once beside the rest of the suite (3 test
    # processes on 2 cores). A client that never reads would hold the server for good
    # without the deadline (here: past wait_exit's 30 s).
    assert took < GRACEFUL_TIMEOUT_S + 6.0, f"the server took {took:.1f} s to stop"
