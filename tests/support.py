"""Support for tests that drive a real alallo server: start it, upload, read SSE."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import aconnect_sse

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


@dataclass(frozen=True)
class LiveServer:
    """A running ``alallo serve`` process."""

    url: str
    api_key: str
    data_dir: Path
    process: subprocess.Popen[bytes]

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(data_dir: Path, **env: str) -> LiveServer:
    """Start ``alallo serve`` on a free port and wait until it answers /healthz."""
    port = _free_port()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    log = data_dir.parent / f"server-{port}.log"
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [sys.executable, "-m", "alallo", "serve", "--port", str(port),
             "--data-dir", str(data_dir)],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env},
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}; see {log}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    else:
        process.kill()
        raise RuntimeError("the server did not start within 60 s")
    key = (data_dir / "api-key").read_text().strip()
    return LiveServer(url=url, api_key=key, data_dir=data_dir, process=process)


def stop_server(server: LiveServer) -> None:
    """SIGTERM, then SIGKILL if it does not stop within 20 s."""
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()



FINAL = {"succeeded", "failed", "cancelled"}


async def upload(client: httpx.AsyncClient, path: Path | None = None, *,
                 content: bytes | None = None, name: str = "train.jsonl") -> httpx.Response:
    data = content if content is not None else path.read_bytes()  # type: ignore[union-attr]
    return await client.post("/v1/files", files={"file": (name, data)},
                             data={"purpose": "fine-tune"})


async def read_stream(client: httpx.AsyncClient, job_id: str, *, last_event_id: int | None = None,
                      stop_after: int | None = None) -> list[tuple[str, int, dict[str, Any]]]:
    """Read a job's SSE stream: ``(event, id, data)`` per item, to the end or ``stop_after`` items."""
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    items: list[tuple[str, int, dict[str, Any]]] = []
    async with aconnect_sse(client, "GET", f"/v1/fine_tuning/jobs/{job_id}/stream",
                            headers=headers, timeout=httpx.Timeout(120)) as source:
        assert source.response.status_code == 200
        assert source.response.headers["content-type"].startswith("text/event-stream")
        async with contextlib.aclosing(source.aiter_sse()) as events:
            async for sse in events:
                if sse.event == "done":  # the last frame of a finished job's stream
                    break
                items.append((sse.event, int(sse.id), json.loads(sse.data)))
                if stop_after is not None and len(items) >= stop_after:
                    break
    return items


def statuses(items: list[tuple[str, int, dict[str, Any]]]) -> list[str]:
    """The job statuses seen, consecutive repeats folded."""
    seen: list[str] = []
    for kind, _, data in items:
        if kind == "job" and (not seen or seen[-1] != data["status"]):
            seen.append(data["status"])
    return seen
