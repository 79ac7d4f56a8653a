"""Follow jobs over alallo's WebSocket: one job, several, or every job of the account.

    python examples/follow_websocket.py JOB_ID [JOB_ID ...]    # or '*' for every job
    (ALALLO_URL and ALALLO_API_KEY as for the CLI; needs ``pip install httpx-ws``)

One connection carries the same items as the SSE streams, as JSON frames
``{"stream": "job"|"event"|"log", "seq", "data", "subscription"}``. The
client sends ``{"subscribe": [...] | "*", "after": {id: seq}}``; it keeps the
last ``seq`` of each subscription (a job id, or ``*``), sends them as
``after`` when it reconnects, and gets exactly what it missed.
A job's subscription ends with a ``done`` frame; when all are done (and
``*`` is not among them) the server closes with code 1000.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from httpx_ws import WebSocketDisconnect, WebSocketSession, connect_ws


def follow(url: str, key: str, subscribe: list[str] | str) -> None:
    after: dict[str, int] = {}  # where to resume, per job id (and "*")
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"},
                      timeout=30) as client:
        while True:
            ws: WebSocketSession
            try:
                with connect_ws("/v1/ws", client) as ws:
                    ws.send_json({"subscribe": subscribe, "after": after})
                    while True:
                        frame: dict[str, Any] = ws.receive_json()
                        if frame["stream"] in {"job", "event", "log"}:
                            after[frame["subscription"]] = frame["seq"]
                            show(frame)
                        elif frame["stream"] == "done":
                            print(f"done: {frame['data']['id']} {frame['data']['status']}")
                        elif frame["stream"] == "error":
                            print(f"error: {frame['data']['error']['message']}")
                        elif frame["stream"] == "shutdown":
                            print("(the server is stopping; reconnecting)")
            except WebSocketDisconnect as closed:
                if closed.code == 1000:  # every subscribed job is done
                    return
                if closed.code in {4401, 4422}:
                    raise SystemExit(f"refused: {closed.code}")
            except httpx.TransportError as exc:
                print(f"(connection lost: {exc})", file=sys.stderr)
            time.sleep(2)


def show(frame: dict[str, Any]) -> None:
    data = frame["data"]
    if frame["stream"] == "job":
        print(f"[{frame['seq']}] job {data['id']} {data['status']} {data['progress']}")
    elif frame["stream"] == "event":
        print(f"[{frame['seq']}] event {data['alallo_type']}: {data['message']}")
    elif frame["stream"] == "log":
        print(f"[{frame['seq']}] log {data['text']}")
    elif frame["stream"] == "metrics" and data.get("train_loss") is not None:
        print(f"[{frame['seq']}] metrics step {data['step']}: loss {data['train_loss']:.4f}")


if __name__ == "__main__":
    targets = sys.argv[1:]
    follow(os.environ.get("ALALLO_URL", "http://127.0.0.1:8000"),
           os.environ.get("ALALLO_API_KEY") or Path(".alallo/api-key").read_text().strip(),
           "*" if targets == ["*"] else targets)
