"""One WebSocket that sends 20,000 ``subscribe`` messages: the server's memory while it is
open and after it closes (issue 31).

Run: ``.venv/bin/python bench/bench_ws_subscriptions.py`` (20,000 messages, 3 sockets
one after the other; ``--quick`` for 5,000 and 2; ``--messages N``, ``--rounds R``).

One job runs (a trainer that writes ``--backlog`` log lines, 100 by default, then never
reports again, so that its backlog is the same in every round). A client subscribes to it
over one WebSocket N times, one message
each, reading every frame the server sends, until each message past
``ALALLO_MAX_SUBSCRIPTIONS_PER_WEBSOCKET`` has its refusal (an error frame,
``too_many_streams``); then it closes the socket, and the next round opens another. The
server's RSS is read after a warm-up socket (one subscription), in each round once every
message was answered, and once the socket is gone (``alallo_open_streams{kind="websocket"}``
back at 0), a second later.

Targets: a socket grows the server by at most :data:`OPEN_BUDGET_MB` while open, and the
last round leaves at most :data:`LEFT_BUDGET_MB` once closed: what a socket leaves is
taken again by the next one, not added to. Without the limit (before issue 31) the
same 20,000 messages took one server from 93 to 541 MB, and 591 MB stayed after the socket
closed: 20,000 follower tasks, each with its bus subscription, its copy of the job and of
the backlog, freed when the socket closed but not given back by the allocators (pymalloc
keeps an arena while one object in it lives; glibc keeps freed heap until ``malloc_trim``).

Measured (this machine, 100 lines of backlog): 97 MB before, 119-121 MB with a socket
open, 115-121 MB after each of 8 sockets in a row: the allocators keep what the first
socket took (the interpreter's heap is back where it was: ``sys.getallocatedblocks``), and
the next socket takes it again, so the figure stays put instead of growing.

What a subscription costs grows with its job's backlog: a subscription from ``after`` 0
reads the whole history into one list before its first frame goes out
(:meth:`alallo.runtime.Streams.stream_batches`), the same for an SSE stream; ``--backlog``
shows that cost (10,000 lines: 114 MB before, 2,058 MB with the 200 subscriptions open,
523 MB after; read a page of 500 at a time, 104, 245 and 245 MB).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import trio
from _results import append_rows, row
from _server import REPO, BenchServer
from httpx_ws import aconnect_ws

from alallo import Settings

OPEN_BUDGET_MB = 40.0
"""Server RSS a socket at its subscription limit may add while open (MB)."""
LEFT_BUDGET_MB = 30.0
"""Server RSS the last socket may leave behind once closed (MB): near the level the server
started from, and not growing from socket to socket."""


def settled_rss_mb(server: BenchServer) -> float:
    """The server's RSS now and a second later, the larger (MB)."""
    first = server.rss_bytes()
    time.sleep(1.0)
    return max(first, server.rss_bytes()) / 1e6


async def job_with_backlog(client: httpx.AsyncClient, lines: int) -> str:
    """A running job whose trainer wrote ``lines`` log lines and now waits, silent."""
    sample = (REPO / "examples" / "sample.jsonl").read_bytes()
    file = (await client.post("/v1/files", files={"file": ("sample.jsonl", sample)},
                              data={"purpose": "fine-tune"})).json()
    script = f"seq {lines} | sed 's/^/log line /'; echo backlog written; exec sleep 1000000"
    job = (await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file["id"],
        "trainer": {"command": ["sh", "-c", script, "trainer"]}})).json()
    after = 0
    while True:
        page = (await client.get(f"/v1/fine_tuning/jobs/{job['id']}/log",
                                 params={"after": after, "limit": 10_000})).json()["data"]
        if any(line["text"] == "backlog written" for line in page):
            return str(job["id"])
        after = page[-1]["n"] if page else after
        if not page:
            await trio.sleep(0.05)  # the poll interval: the log has no event to wait on here


async def websockets_open(client: httpx.AsyncClient) -> float:
    text = (await client.get("/metrics")).text
    return float(next(line for line in text.splitlines()
                      if line.startswith('alallo_open_streams{kind="websocket"}')).split()[-1])


async def one_socket(server: BenchServer, client: httpx.AsyncClient, job: str, messages: int,
                     limit: int) -> dict[str, float]:
    """One round: RSS with the socket open and every message answered, and after it closed
    (MB); its frames, refusals and seconds."""
    refused = frames = 0
    started = time.perf_counter()
    async with aconnect_ws("/v1/ws", client, max_message_size_bytes=1 << 22,
                           keepalive_ping_interval_seconds=None) as ws:
        async with trio.open_nursery() as nursery:
            async def send() -> None:  # while the frames are read: the server waits for both
                for _ in range(messages):
                    await ws.send_json({"subscribe": [job]})
            nursery.start_soon(send)
            while refused < messages - limit:
                frame = json.loads(await ws.receive_text())
                frames += 1
                refused += frame["stream"] == "error"
        answered_s = time.perf_counter() - started
        open_mb = settled_rss_mb(server)
    while await websockets_open(client) > 0:
        await trio.sleep(0.05)  # the poll interval: the gauge says the socket is gone
    return {"open": open_mb, "after": settled_rss_mb(server), "frames": frames,
            "refused": refused, "answered_s": answered_s}


async def measure(server: BenchServer, messages: int, limit: int, rounds: int,
                  backlog: int) -> tuple[float, list[dict[str, float]]]:
    """RSS before any socket (MB), and each round's figures (:func:`one_socket`)."""
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers,
                                 timeout=60) as client:
        job = await job_with_backlog(client, backlog)
        async with aconnect_ws("/v1/ws", client) as warm_up:
            await warm_up.send_json({"subscribe": [job]})
            await warm_up.receive_json()
        before = settled_rss_mb(server)
        return before, [await one_socket(server, client, job, messages, limit)
                        for _ in range(rounds)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5,000 messages, 2 sockets")
    parser.add_argument("--messages", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--backlog", type=int, default=100, help="log lines of the job")
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    messages = args.messages or (5_000 if args.quick else 20_000)
    rounds = args.rounds or (2 if args.quick else 3)
    defaults = Settings.model_fields
    limit = int(defaults["max_subscriptions_per_websocket"].default)
    env = {"ALALLO_MAX_STREAMS_PER_ACCOUNT": str(defaults["max_streams_per_account"].default),
           "ALALLO_BUDGET_FACTOR": "1000000"}
    with tempfile.TemporaryDirectory(prefix="alallo-bench-ws-") as scratch, \
            BenchServer(Path(scratch) / "data", env) as server:
        before, got = trio.run(measure, server, messages, limit, rounds, args.backlog)
    print(f"server RSS before: {before:.0f} MB (the job's backlog: {args.backlog:,} lines)")
    for n, r in enumerate(got, 1):
        print(f"socket {n}: {messages:,} subscribe messages ({limit} followed, "
              f"{r['refused']:,.0f} refused, {r['frames']:,.0f} frames in "
              f"{r['answered_s']:.1f} s): {r['open']:.0f} MB open, {r['after']:.0f} MB after "
              "it closed")
    grown = max(r["open"] for r in got) - before
    left = got[-1]["after"] - before
    if args.json:
        append_rows(args.json, [
            row(f"websocket ({messages:,} subscribe messages): server RSS added while open",
                grown, "MB", OPEN_BUDGET_MB, None, met=grown <= OPEN_BUDGET_MB),
            row(f"websocket ({messages:,} subscribe messages, {rounds} sockets): server RSS "
                "left after the last closed",
                left, "MB", LEFT_BUDGET_MB, None, met=left <= LEFT_BUDGET_MB),
        ])
    return 0


if __name__ == "__main__":
    sys.exit(main())
