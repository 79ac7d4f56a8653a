"""Load generators, run as separate processes so that they never share the server's CPU time.

``python bench/_load.py http URL PATH --connections C --seconds S [--header K:V]``
    keep-alive HTTP/1.1 GET requests on C connections for S seconds, each
    connection sending its next request when the last answer is read (and opened
    again when the server closes it: Hypercorn closes a connection after
    ``keep_alive_max_requests``, 1,000 requests); prints
    ``{"requests", "errors", "reconnects", "wall_s", "cpu_s"}``.

``python bench/_load.py sse URL PATH[,PATH...] --subscribers N [--header K:V]``
    opens N Server-Sent Events streams (spread over the paths), prints
    ``ready N`` once every stream has sent its first event, then records for
    each event whose JSON data has a ``t`` (the publisher's ``time.time()``),
    or a job whose ``progress.loss`` holds a Unix time (the trainer's clock
    when it printed the step, see ``bench_live_jobs.py``), the delay until it
    was read here. A line on stdin ends the run; it prints
    ``{"received", "latencies_ms" (a sample of at most 20,000), "errors",
    "wall_s", "cpu_s"}``.

``http`` speaks HTTP/1.1 with h11 over raw Trio sockets (no HTTP client
library per request); ``sse`` reads every stream in one selector loop over
non-blocking sockets (``_sse_client.py``), so that the generator costs little
next to the server: ``cpu_s`` says how much it took, for the report.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from typing import Any
from urllib.parse import urlsplit

import h11
import trio
from _sse_client import cpu_s, run_sse


def _request(host: str, path: str, headers: list[tuple[str, str]]) -> h11.Request:
    return h11.Request(method="GET", target=path,
                       headers=[("Host", host), *headers])


async def http_load(host: str, port: int, path: str, headers: list[tuple[str, str]],
                    connections: int, seconds: float) -> dict[str, Any]:
    """Keep-alive GETs of ``path`` for ``seconds`` on ``connections`` connections."""
    counts = {"requests": 0, "errors": 0, "reconnects": 0}
    streams = [await trio.open_tcp_stream(host, port) for _ in range(connections)]
    deadline = trio.current_time() + seconds
    start_cpu = cpu_s()
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
            if conn.our_state is h11.MUST_CLOSE:  # the server ends the connection: open another
                await stream.aclose()
                stream = await trio.open_tcp_stream(host, port)
                conn = h11.Connection(h11.CLIENT)
                counts["reconnects"] += 1
            else:
                conn.start_next_cycle()
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        for stream in streams:
            nursery.start_soon(worker, stream)
    return {**counts, "wall_s": time.perf_counter() - start, "cpu_s": cpu_s() - start_cpu}


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
        result = run_sse(host, port, args.paths.split(","), headers, args.subscribers)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
