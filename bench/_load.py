"""Load generators, run as separate processes so that they never share the server's CPU time.

``python bench/_load.py http URL PATH --connections C --seconds S [--header K:V]``
    keep-alive HTTP/1.1 GET requests on C connections for S seconds, each
    connection sending its next request when the last answer is read; prints
    ``{"requests", "errors", "wall_s", "cpu_s"}``.

``python bench/_load.py sse URL PATH[,PATH...] --subscribers N [--header K:V]``
    opens N Server-Sent Events streams (spread over the paths), prints
    ``ready N`` once every stream has sent its first event, then records for
    each event whose JSON data has a ``t`` (the publisher's ``time.time()``),
    or a job whose ``progress.loss`` holds a Unix time (the trainer's clock
    when it printed the step, see ``bench_live_jobs.py``), the delay until it
    was read here. A line on stdin ends the run; it prints
    ``{"received", "latencies_ms" (a sample of at most 20,000), "errors",
    "wall_s", "cpu_s"}``.

Both speak HTTP/1.1 with h11 over raw Trio sockets (no HTTP client library
per request), so that the generator costs little next to the server:
``cpu_s`` says how much it took, for the report.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from typing import Any
from urllib.parse import urlsplit

import h11
import trio

MAX_SAMPLE = 20_000


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _request(host: str, path: str, headers: list[tuple[str, str]]) -> h11.Request:
    return h11.Request(method="GET", target=path,
                       headers=[("Host", host), *headers])


async def http_load(host: str, port: int, path: str, headers: list[tuple[str, str]],
                    connections: int, seconds: float) -> dict[str, Any]:
    """Keep-alive GETs of ``path`` for ``seconds`` on ``connections`` connections."""
    counts = {"requests": 0, "errors": 0}
    streams = [await trio.open_tcp_stream(host, port) for _ in range(connections)]
    deadline = trio.current_time() + seconds
    start_cpu = _cpu_s()
    start = time.perf_counter()

    async def worker(stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.CLIENT)
        request = _request(f"{host}:{port}", path, headers)
        while trio.current_time() < deadline:
            await stream.send_all(conn.send(request) + conn.send(h11.EndOfMessage()))
            status = 0
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await stream.receive_some(65536))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                elif isinstance(event, h11.EndOfMessage):
                    break
            counts["requests" if status == 200 else "errors"] += 1
            conn.start_next_cycle()
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        for stream in streams:
            nursery.start_soon(worker, stream)
    return {**counts, "wall_s": time.perf_counter() - start, "cpu_s": _cpu_s() - start_cpu}


async def sse_load(host: str, port: int, paths: list[str], headers: list[tuple[str, str]],
                   subscribers: int) -> dict[str, Any]:
    """``subscribers`` SSE streams; record publish-to-read delays until stdin says stop."""
    state = {"received": 0, "errors": 0, "ready": 0}
    latencies: list[float] = []
    all_ready = trio.Event()
    limiter = trio.CapacityLimiter(64)  # connections being opened at once

    async def subscriber(path: str) -> None:
        try:
            async with limiter:
                stream = await trio.open_tcp_stream(host, port)
                conn = h11.Connection(h11.CLIENT)
                await stream.send_all(conn.send(_request(f"{host}:{port}", path, headers))
                                      + conn.send(h11.EndOfMessage()))
                buffer, ready = await _read_events(stream, conn, "", None)
        except (OSError, trio.BrokenResourceError, h11.RemoteProtocolError):
            ready = False
        state["ready" if ready else "errors"] += 1
        if state["ready"] + state["errors"] >= subscribers:
            all_ready.set()
        if not ready:
            return
        try:
            async with stream:
                await _read_events(stream, conn, buffer, (state, latencies))
        except (OSError, trio.BrokenResourceError, h11.RemoteProtocolError):
            state["errors"] += 1

    async with trio.open_nursery() as nursery:
        for i in range(subscribers):
            nursery.start_soon(subscriber, paths[i % len(paths)])
        await all_ready.wait()
        print(f"ready {state['ready']}", flush=True)
        start_cpu, start = _cpu_s(), time.perf_counter()
        state["received"] = 0
        latencies.clear()
        stdin = trio.lowlevel.FdStream(0)
        await stdin.receive_some(1)
        cpu, wall = _cpu_s() - start_cpu, time.perf_counter() - start
        nursery.cancel_scope.cancel()
    sample = latencies if len(latencies) <= MAX_SAMPLE else random.sample(latencies, MAX_SAMPLE)
    return {"received": state["received"], "errors": state["errors"], "ready": state["ready"],
            "latencies_ms": [round(x * 1000, 3) for x in sample], "wall_s": wall, "cpu_s": cpu}


async def _read_events(stream: trio.SocketStream, conn: h11.Connection, buffer: str,
                       sink: tuple[dict[str, int], list[float]] | None) -> tuple[str, bool]:
    """Read SSE events; without ``sink``, return after the first one (``True``) or a bad answer.

    With ``sink``, count each event with a ``t`` and its delay, until the stream ends.
    """
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            if not data:
                return buffer, False
            conn.receive_data(data)
            continue
        if isinstance(event, h11.Response):
            if event.status_code != 200:
                return buffer, False
        elif isinstance(event, h11.Data):
            now = time.time()
            buffer += bytes(event.data).decode()
            *blocks, buffer = buffer.replace("\r\n", "\n").split("\n\n")
            if sink is None:
                if blocks:
                    return buffer, True
                continue
            state, latencies = sink
            for block in blocks:
                for line in block.split("\n"):
                    if line.startswith("data:") and '"t":' in line:
                        t = json.loads(line[5:])["t"]
                    elif line.startswith("data:") and '"loss":' in line:
                        # A job item: the trainer put its clock in progress.loss.
                        t = (json.loads(line[5:]).get("progress") or {}).get("loss") or 0.0
                        if t < 1e9:
                            continue
                    else:
                        continue
                    state["received"] += 1
                    latencies.append(now - t)
        elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
            return buffer, False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["http", "sse"])
    parser.add_argument("url")
    parser.add_argument("paths")
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--subscribers", type=int, default=100)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    url = urlsplit(args.url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    headers = [(k.strip(), v.strip()) for k, v in (h.split(":", 1) for h in args.header)]
    if args.mode == "http":
        result = trio.run(http_load, host, port, args.paths, headers, args.connections,
                          args.seconds)
    else:
        result = trio.run(sse_load, host, port, args.paths.split(","), headers, args.subscribers)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
