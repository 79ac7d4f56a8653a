"""Open and close streams against a real server, then print its figures (one JSON line).

Run by ``test_stream_leaks.py`` in a process of its own, so that what is
measured is a server's process and nothing of the test runner's (under
pytest, finished Trio tasks of the server were seen kept alive, ~30 heap
blocks per cycle, that a plain ``trio.run`` frees). Usage:
``python stream_cycles.py DATA_DIR [CYCLES]``. See ``test_stream_leaks.py`` for what
the cycles are and why the figures mean what they do.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import socket
import struct
import sys
from pathlib import Path
from typing import Any

import httpx
import trio
import trio.testing
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Request, TextMessage

from alallo import Runtime, Settings
from alallo.runtime._logging import configure_logging
from gateway import serve

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CYCLES = 10_000
WARMUP = 500
CONCURRENCY = 50


def task_count() -> int:
    """Every task of this Trio run (the server's and the runtime's among them)."""
    def walk(task: trio.lowlevel.Task) -> int:
        return 1 + sum(walk(child) for nursery in task.child_nurseries
                       for child in nursery.child_tasks)
    return walk(trio.lowlevel.current_root_task())


def heap_blocks() -> int:
    gc.collect()
    return sys.getallocatedblocks()


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Cycles:
    """Open and close streams on ``port``, one fresh connection per cycle."""

    def __init__(self, port: int, key: str, done_job: str, live_job: str) -> None:
        self.port, self.key = port, key
        self.done_job, self.live_job = done_job, live_job
        self.counts = {"to_end": 0, "closed": 0, "reset": 0, "websocket": 0}

    async def run(self, n: int) -> None:
        queue_in, queue_out = trio.open_memory_channel[int](n)
        for i in range(n):
            queue_in.send_nowait(i)
        queue_in.close()

        async def worker() -> None:
            async for i in queue_out:
                await self.one(i)

        async with trio.open_nursery() as nursery:
            for _ in range(CONCURRENCY):
                nursery.start_soon(worker)

    async def one(self, i: int) -> None:
        match i % 10:
            case 0:
                await self.sse(f"/v1/fine_tuning/jobs/{self.done_job}/stream", to_end=True)
            case 1 | 2 | 3:
                await self.sse(f"/v1/fine_tuning/jobs/{self.live_job}/stream",
                               reset=i % 2 == 1)
            case 4 | 5 | 6:
                await self.sse("/v1/fine_tuning/stream", reset=i % 2 == 0)
            case _:
                await self.websocket()

    async def sse(self, path: str, *, to_end: bool = False, reset: bool = False) -> None:
        stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        async with stream:
            await stream.send_all(
                f"GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n"
                f"Authorization: Bearer {self.key}\r\n\r\n".encode())
            body = b""
            while True:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                body += chunk
                if to_end and body.endswith(b"\r\n0\r\n\r\n"):
                    break  # the last chunk of the body
                frames = body.partition(b"\r\n\r\n")[2]
                if not to_end and b"data:" in frames and b"\r\n\r\n" in frames:
                    break  # the first frame is in: leave mid-stream
            assert body.startswith(b"HTTP/1.1 200"), body[:300]
            if to_end:
                assert b"event: done" in body and body.endswith(b"0\r\n\r\n"), body[-300:]
                self.counts["to_end"] += 1
            elif reset:
                stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                         struct.pack("ii", 1, 0))
                self.counts["reset"] += 1
            else:
                self.counts["closed"] += 1

    async def websocket(self) -> None:
        ws = WSConnection(ConnectionType.CLIENT)
        stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        async with stream:
            await stream.send_all(ws.send(Request(
                host="localhost", target="/v1/ws",
                extra_headers=[(b"authorization", f"Bearer {self.key}".encode())])))
            accepted = sent = False
            while True:
                chunk = await stream.receive_some(65536)
                assert chunk, "the server closed the WebSocket before a frame"
                ws.receive_data(chunk)
                for event in ws.events():
                    if isinstance(event, AcceptConnection):
                        accepted = True
                    elif isinstance(event, TextMessage):
                        assert json.loads(event.data)["stream"] == "job"
                        self.counts["websocket"] += 1
                        return  # dropped without a close frame
                if accepted and not sent:
                    await stream.send_all(ws.send(TextMessage(
                        data=json.dumps({"subscribe": "*"}))))
                    sent = True


async def streams_and_tasks(client: httpx.AsyncClient) -> tuple[dict[str, float], int]:
    """The gauge of open streams by kind, then the tasks (in this order: the request for
    the gauge must not be in flight while tasks are counted)."""
    text = (await client.get("/metrics")).text
    streams = {line.split('"')[1]: float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("alallo_open_streams{")}
    await trio.testing.wait_all_tasks_blocked()  # the /metrics request's tasks have ended
    return streams, task_count()


async def figures(client: httpx.AsyncClient) -> dict[str, Any]:
    """The gauge of open streams by kind, tasks and heap."""
    streams, tasks = await streams_and_tasks(client)
    return {"streams": streams, "tasks": tasks, "heap": heap_blocks(), "rss_mib": rss_mib()}


async def settled(client: httpx.AsyncClient, baseline: dict[str, Any]) -> dict[str, Any]:
    """Figures once no stream is open and the task tree is back to the baseline's size.
    Disconnects are noticed within a second, and neither the gauge nor the tree gives an
    event: they are polled, for 30 s at most."""
    with trio.move_on_after(30):
        while True:
            streams, tasks = await streams_and_tasks(client)
            if streams == baseline["streams"] and tasks <= baseline["tasks"]:
                break
            await trio.sleep(0.05)  # the poll interval
    return await figures(client)


async def main(data_dir: Path) -> dict[str, Any]:
    """Serve, warm up, take the figures, run the cycles, take them again."""
    configure_logging(logging.WARNING)  # 20,000 access-log lines are not the subject
    stop = trio.Event()
    async with Runtime(Settings(data_dir=data_dir)) as runtime:
        async with trio.open_nursery() as server:
            binds = await server.start(lambda task_status: serve(
                runtime, host="127.0.0.1", port=0, shutdown_trigger=stop.wait,
                task_status=task_status))
            url = binds[0]
            port = int(url.rsplit(":", 1)[1])
            async with httpx.AsyncClient(base_url=url, timeout=30, headers={
                    "Authorization": f"Bearer {runtime.api_key}"}) as client:
                file = (await client.post("/v1/files", files={"file": (
                    "sample.jsonl", (EXAMPLES / "sample.jsonl").read_bytes())})).json()

                async def create(steps: int, delay: float) -> str:
                    answer = await client.post("/v1/fine_tuning/jobs", json={
                        "model": "alallo/tiny-gpt2", "training_file": file["id"],
                        "hyperparameters": {"max_steps": steps},
                        "trainer": {"type": "simulated", "step_delay_s": delay}})
                    assert answer.status_code == 200, answer.text
                    return str(answer.json()["id"])

                done_job = await create(3, 0.0)
                # A job that stays running through the test, one step every 5 s.
                live_job = await create(100_000, 5.0)
                account = await runtime.authenticate(runtime.api_key)
                with trio.fail_after(60):
                    done = await runtime.wait_for_final(account, done_job)
                    assert done.status.value == "succeeded", done.status
                    async with contextlib.aclosing(runtime.stream(account, live_job)) as items:
                        async for item in items:
                            if item.kind == "job" and item.data["status"] == "running":
                                break

                cycles = Cycles(port, runtime.api_key, done_job, live_job)
                await cycles.run(WARMUP)
                baseline = await settled(client, {"streams": {"job": 0.0, "account": 0.0,
                                                              "websocket": 0.0},
                                                  "tasks": 1 << 30})
                started = trio.current_time()
                await cycles.run(CYCLES)
                took = trio.current_time() - started
                after = await settled(client, baseline)

                await client.post(f"/v1/fine_tuning/jobs/{live_job}/cancel")
            stop.set()

    return {"cycles": CYCLES, "warmup": WARMUP, "counts": cycles.counts, "seconds": took,
            "before": baseline, "after": after}


if __name__ == "__main__":
    if len(sys.argv) > 2:  # a shorter run, to try things by hand
        CYCLES = int(sys.argv[2])
    print(json.dumps(trio.run(main, Path(sys.argv[1]))))
