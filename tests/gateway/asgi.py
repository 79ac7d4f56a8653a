"""Drive the ASGI app as a stream: channel-backed ``receive``/``send`` (STYLE.md, rule 39).

Starlette's ``TestClient`` and HTTPX's ``ASGITransport`` hand back a body
only once the app is done; these read each frame as it is sent, and a reader
that stops reading blocks the app's ``send`` the way Hypercorn's trio worker does.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import trio
from starlette.types import ASGIApp, Message


@dataclass
class AsgiRequest:
    """One request in flight; ``messages`` yields what the app sends, one at a time."""

    messages: trio.MemoryReceiveChannel[Message]
    disconnect: trio.Event = field(default_factory=trio.Event)

    async def frames(self) -> list[dict[str, Any]]:
        """SSE frames as ``{"event", "id", "data"}``, until the body ends."""
        return [frame async for frame in self.iter_frames()]

    async def iter_frames(self) -> AsyncIterator[dict[str, Any]]:
        """Each SSE frame as it arrives (comments are skipped)."""
        buffer = ""
        async for message in self.messages:
            if message["type"] != "http.response.body":
                continue
            buffer += message.get("body", b"").decode()
            while "\r\n\r\n" in buffer:
                block, buffer = buffer.split("\r\n\r\n", 1)
                frame: dict[str, Any] = {"event": "message", "id": None, "data": None}
                for line in block.split("\r\n"):
                    name, _, value = line.partition(": ")
                    if name in ("event", "id"):
                        frame[name] = value
                    elif name == "data":
                        frame["data"] = json.loads(value)
                if frame["data"] is not None:
                    yield frame
            if not message.get("more_body", False):
                return


async def start_request(nursery: trio.Nursery, app: ASGIApp, url: str,
                        headers: dict[str, str]) -> AsgiRequest:
    """Start ``GET url`` on ``app``; read what it sends from the returned request."""
    parts = urlsplit(url)
    send_channel, receive_channel = trio.open_memory_channel[Message](0)
    request = AsgiRequest(receive_channel)
    scope = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1", "method": "GET", "scheme": "http", "path": parts.path,
        "raw_path": parts.path.encode(), "query_string": parts.query.encode(),
        "root_path": "", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    asked = False

    async def receive() -> Message:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await request.disconnect.wait()
        return {"type": "http.disconnect"}

    async def run() -> None:
        async with send_channel:
            await app(scope, receive, send_channel.send)

    nursery.start_soon(run)
    return request
