"""The benchmarks' server: alallo's gateway app and bare baselines in one Hypercorn-trio server.

Run as a process by the benchmarks (``python bench/_server.py DATA_DIR``); it
prints one JSON line ``{"url", "api_key", "pid"}`` once it accepts connections.
The ASGI app sends ``/bare/...`` to a bare Starlette app (no alallo code, no
alallo middleware) and everything else to :func:`gateway.build_app`, so both
sides share the process, the event loop and Hypercorn's trio worker with the
same settings as :func:`gateway.serve`, and the same connection loop
(:func:`gateway._connections.serve_connections`, Hypercorn's own ``TCPServer``
per connection; it lets alallo's streams write their body chunks straight to
the socket, see ``gateway/_chunks.py``, while the bare app speaks plain ASGI). Routes of the bare app:

- ``GET /bare/job``: a constant JSON object (the API baseline), set with
  ``PUT /bare/job`` (the benchmark puts a real job there, so both answer the
  same bytes);
- ``GET /bare/stream/{topic}``: sse-starlette fed from a bare ``trio`` memory
  channel per subscriber (the SSE baseline);
- ``POST /bare/publish``: ``{"target": "alallo"|"bare", "topics": [...],
  "rate": R, "seconds": S}`` publishes R items per second to every topic for
  S seconds, each stamped with ``time.time()`` in ``data["t"]``. For alallo
  a topic is a running job and the item goes to ``runtime.bus.publish``
  exactly as the job actor publishes a persisted log line; for bare, to each
  subscriber's channel (``send_nowait``, dropping when a subscriber is 1,024
  behind, as the bus does).

:class:`BenchServer` starts and stops it from a benchmark and reads its RSS
and CPU time from ``/proc``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

__all__ = ["IDLE_TRAINER", "BenchServer", "create_jobs", "proc_cpu_s", "proc_rss",
           "raise_fd_limit", "run_load", "wait_running"]


BENCH_STREAMS = 1_000_000
"""Streams the bench server lets its one account open: the benchmarks open 10,000 and more
from the local account, far past the default ``ALALLO_MAX_STREAMS_PER_ACCOUNT``."""


def raise_fd_limit() -> int:
    """Raise this process's open-file limit to its hard limit; return the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


class BenchServer:
    """The bench server as a child process.

    Args:
        data_dir: alallo's data dir (created).
        env: extra environment (``ALALLO_*`` settings). Unless it says otherwise, one
            account may open as many streams as the benchmarks do (:data:`BENCH_STREAMS`).
    """

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.env = {**os.environ, "PYTHONPATH": str(REPO),
                    "ALALLO_MAX_STREAMS_PER_ACCOUNT": str(BENCH_STREAMS), **(env or {})}
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.api_key = ""

    def __enter__(self) -> BenchServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = (self.data_dir / "server.log").open("w")
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), str(self.data_dir)],
            stdout=subprocess.PIPE, stderr=log, env=self.env, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the bench server exited; see {self.data_dir / 'server.log'}")
        ready = json.loads(line)
        self.url, self.api_key = ready["url"], ready["api_key"]
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        died = self.process is not None and self.process.poll() is not None
        if died or exc_type is not None:
            log = (self.data_dir / "server.log").read_text()
            print(f"the bench server {'exited' if died else 'ran'}; its log ends:\n"
                  f"{log[-3000:]}", file=sys.stderr)
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    @property
    def headers(self) -> dict[str, str]:
        """The local account's ``Authorization`` header."""
        return {"Authorization": f"Bearer {self.api_key}"}

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def profile(self, seconds: float, path: Path | None) -> subprocess.Popen[bytes] | None:
        """Sample the server with py-spy for ``seconds`` into ``path`` (collapsed stacks,
        one ``frame;frame;... count`` line each); None when ``path`` is None.
        Wait on the returned process before reading the file."""
        if path is None:
            return None
        return subprocess.Popen(
            ["py-spy", "record", "--pid", str(self.pid), "--duration", str(max(1, int(seconds))),
             "--rate", "200", "--format", "raw", "--output", str(path), "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})

    def open_fds(self) -> int:
        """File descriptors the server holds now (sockets, pipes, files)."""
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def rss_bytes(self) -> int:
        """The server's resident memory now (``VmRSS``)."""
        return proc_rss(self.pid)

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the server has used so far."""
        return proc_cpu_s(self.pid)


IDLE_TRAINER = ["sh", "-c", "exec sleep 1000000", "trainer"]
"""A trainer that runs and never reports: jobs that stay ``running`` at no CPU cost."""


def create_jobs(server: BenchServer, count: int, command: list[str] | None = None,
                *, max_steps: int = 100_000) -> list[str]:
    """Upload the sample file and create ``count`` jobs running ``command``; return their ids.

    Raises:
        httpx.HTTPStatusError: the server refused a request.
    """
    import httpx

    with httpx.Client(base_url=server.url, headers=server.headers, timeout=120) as client:
        sample = (REPO / "examples" / "sample.jsonl").read_bytes()
        uploaded = client.post("/v1/files", files={"file": ("sample.jsonl", sample)},
                               data={"purpose": "fine-tune"})
        uploaded.raise_for_status()
        ids = []
        for _ in range(count):
            created = client.post("/v1/fine_tuning/jobs", json={
                "model": "alallo/tiny-gpt2", "training_file": uploaded.json()["id"],
                "hyperparameters": {"max_steps": max_steps},
                "trainer": {"command": command or IDLE_TRAINER}})
            created.raise_for_status()
            ids.append(created.json()["id"])
        return ids


def wait_running(server: BenchServer, ids: list[str], timeout: float = 300) -> None:
    """Wait until every job is ``running``.

    Raises:
        RuntimeError: not all of them within ``timeout`` seconds.
    """
    import httpx

    deadline = time.monotonic() + timeout
    left = set(ids)
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=60) as client:
        while left and time.monotonic() < deadline:
            for job_id in list(left):
                if client.get(f"/v1/fine_tuning/jobs/{job_id}").json()["status"] == "running":
                    left.discard(job_id)
            if left:
                time.sleep(0.5)
    if left:
        raise RuntimeError(f"{len(left)} jobs not running after {timeout:.0f} s")


def run_load(args: list[str]) -> dict[str, Any]:
    """Run ``bench/_load.py`` with ``args`` to its end; return its JSON result."""
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("_load.py")), *args],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def proc_rss(pid: int) -> int:
    """Resident memory of a process (bytes), from ``/proc/<pid>/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the server process ---------------------------------------------------------


GC_TIMES: dict[str, float] = {}
"""Seconds in the garbage collector per generation (and counts), for ``gc-log``."""
EXPERIMENTS: set[str] = set()


def _experiments(names: str) -> None:
    """Patch in a proposed fix of alallo (``ALALLO_BENCH_EXPERIMENT=a,b``), to measure it.

    These are measurements for ``docs/performance.md``, not fixes: the code
    they replace belongs to alallo.

    - ``inline-reads``: SQLite reads run in the Trio thread instead of a
      ``trio.to_thread`` worker (one thread hand-off less per read; writes
      stay on the worker, where a WAL checkpoint's fsync cannot stall the loop).
    - ``cache-auth``: ``Runtime.authenticate`` remembers key -> account in memory
      (a real fix must forget a key when it is revoked).
    - ``sync-output-log``: the trainer output log is appended with a plain
      blocking write instead of ``trio.open_file`` (a worker thread per chunk).
    - ``gc-log``: time spent in the cyclic garbage collector, per generation, is
      written (JSON) to ``$ALALLO_BENCH_GC_LOG`` at the end of each publishing run.
    - ``gc-threshold=A/B/C``: ``gc.set_threshold(A, B, C)`` at start.
    - ``gc-freeze``: ``gc.freeze()`` when a publishing run starts: what exists then
      (the open streams) is left out of every later collection.
    """
    for name in filter(None, names.split(",")):
        if name == "inline-reads":
            from alallo.store._store import Store

            async def inline(self: Any, fn: Any) -> Any:
                if self._engine.dialect.name != "sqlite":
                    return await original(self, fn)
                async with self._limiter:
                    return self._sync_tx(fn)

            original = Store._read
            Store._read = inline  # type: ignore[method-assign]
        elif name == "cache-auth":
            from alallo import Runtime

            known: dict[str | None, str] = {}
            authenticate = Runtime.authenticate

            async def cached(self: Any, api_key: str | None) -> str:
                if api_key not in known:
                    known[api_key] = await authenticate(self, api_key)
                return known[api_key]

            Runtime.authenticate = cached  # type: ignore[method-assign]
        elif name == "sync-output-log":
            import trio

            class _SyncFile:
                def __init__(self, path: Any, mode: str) -> None:
                    self.file = open(path, mode)  # noqa: SIM115 - closed in __aexit__

                async def write(self, data: bytes) -> int:
                    return self.file.write(data)

                async def __aenter__(self) -> _SyncFile:
                    return self

                async def __aexit__(self, *exc: object) -> None:
                    self.file.close()

            async def open_file(path: Any, mode: str) -> _SyncFile:
                return _SyncFile(path, mode)

            # Only the trainer's output log uses trio.open_file in alallo and gateway.
            trio.open_file = open_file  # type: ignore[assignment]
        elif name == "gc-log":
            import gc

            started: list[float] = []

            def timed(phase: str, info: dict[str, int]) -> None:
                if phase == "start":
                    started.append(time.perf_counter())
                elif started:
                    key = f"gen{info['generation']}"
                    GC_TIMES[key] = GC_TIMES.get(key, 0.0) + time.perf_counter() - started.pop()
                    GC_TIMES[key + "_n"] = GC_TIMES.get(key + "_n", 0) + 1

            gc.callbacks.append(timed)
        elif name.startswith("gc-threshold="):
            import gc

            gc.set_threshold(*(int(x) for x in name.split("=")[1].split("/")))
        elif name == "gc-freeze":
            EXPERIMENTS.add(name)
        else:
            raise ValueError(f"unknown experiment {name!r}")


def _serve(data_dir: Path) -> None:
    import gc
    import logging
    import signal
    import socket
    from functools import partial

    import structlog
    import trio
    from hypercorn.config import Config
    from sse_starlette import EventSourceResponse, ServerSentEvent
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from alallo import Runtime, Settings
    from alallo.runtime._bus import Item
    from gateway._connections import serve_connections
    from gateway.app import build_app
    from gateway.server import GC_THRESHOLDS, GRACEFUL_TIMEOUT_S, LISTEN_BACKLOG

    raise_fd_limit()
    gc.set_threshold(*GC_THRESHOLDS)  # as gateway.serve does
    _experiments(os.environ.get("ALALLO_BENCH_EXPERIMENT", ""))
    # A log line per request or job event would measure the log, not the server.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    bare_subscribers: dict[str, set[trio.MemorySendChannel[dict[str, Any]]]] = {}
    bare_job_data: dict[str, Any] = {}

    async def bare_job(request: Request) -> JSONResponse:
        return JSONResponse(bare_job_data)

    async def set_bare_job(request: Request) -> JSONResponse:
        bare_job_data.clear()
        bare_job_data.update(await request.json())
        return JSONResponse({"ok": True})

    async def bare_stream(request: Request) -> EventSourceResponse:
        topic = request.path_params["topic"]
        send, receive = trio.open_memory_channel[dict[str, Any]](1024)
        bare_subscribers.setdefault(topic, set()).add(send)

        async def frames() -> Any:
            try:
                yield ServerSentEvent(data="{}", event="hello", id="0")
                async with receive:
                    async for data in receive:
                        yield ServerSentEvent(data=json.dumps(data, separators=(",", ":")),
                                              event="log", id=str(data["n"]))
            finally:
                bare_subscribers[topic].discard(send)

        return EventSourceResponse(frames(), ping=15)

    async def publish(request: Request) -> JSONResponse:
        body = await request.json()
        nursery.start_soon(_publish, body["target"], body["topics"], float(body["rate"]),
                           float(body["seconds"]))
        return JSONResponse({"ok": True})

    async def _publish(target: str, topics: list[str], rate: float, seconds: float) -> None:
        if "gc-freeze" in EXPERIMENTS:
            import gc
            gc.freeze()
        GC_TIMES.clear()
        try:
            await _publish_items(target, topics, rate, seconds)
        finally:
            if log := os.environ.get("ALALLO_BENCH_GC_LOG"):
                with open(log, "a") as out:
                    out.write(json.dumps({"target": target, **GC_TIMES}) + "\n")

    async def _publish_items(target: str, topics: list[str], rate: float, seconds: float,
                             ) -> None:
        interval = 1.0 / rate
        start = trio.current_time()
        account = "acct-local"
        base = {topic: 1_000_000 for topic in topics}
        for i in range(int(rate * seconds)):
            await trio.sleep_until(start + i * interval)
            for topic in topics:
                n = base[topic] + i
                data = {"object": "fine_tuning.job.log", "n": n, "attempt": 1,
                        "text": "step 12/100 loss 1.234", "t": time.time()}
                if target == "alallo":
                    runtime.bus.publish(account, [Item(topic, "log", n, data)])
                else:
                    for send in list(bare_subscribers.get(topic, ())):
                        try:
                            send.send_nowait(data)
                        except (trio.WouldBlock, trio.BrokenResourceError):
                            pass  # 1,024 behind, or a subscriber that just left

    bare = Starlette(routes=[
        Route("/bare/job", bare_job, methods=["GET"]),
        Route("/bare/job", set_bare_job, methods=["PUT"]),
        Route("/bare/stream/{topic}", bare_stream, methods=["GET"]),
        Route("/bare/publish", publish, methods=["POST"]),
    ])

    async def main() -> None:
        nonlocal runtime, nursery
        settings = Settings(data_dir=data_dir)
        async with Runtime(settings) as rt, trio.open_nursery() as n:
            runtime, nursery = rt, n
            gateway = build_app(rt)

            async def app(scope: Any, receive: Any, send: Any) -> None:
                if scope["type"] == "http" and scope["path"].startswith("/bare/"):
                    await bare(scope, receive, send)
                else:
                    await gateway(scope, receive, send)

            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind(("127.0.0.1", 0))
            sock.listen(LISTEN_BACKLOG)
            port = sock.getsockname()[1]
            config = Config()
            config.graceful_timeout = GRACEFUL_TIMEOUT_S
            config.backlog = LISTEN_BACKLOG
            config.accesslog = None
            config.errorlog = "-"
            config.loglevel = "WARNING"

            async def until_signal() -> None:
                with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for _ in signals:
                        gateway.state.stopping.set()
                        return

            stopped = trio.Event()
            await n.start(partial(serve_connections, app, config, sock,  # type: ignore[arg-type]
                                  shutdown_trigger=stopped.wait))
            print(json.dumps({"url": f"http://127.0.0.1:{port}", "api_key": rt.api_key,
                              "pid": os.getpid()}), flush=True)
            await until_signal()
            stopped.set()
            await trio.sleep(GRACEFUL_TIMEOUT_S + 1)
            n.cancel_scope.cancel()

    runtime: Any = None
    nursery: Any = None
    trio.run(main)


if __name__ == "__main__":
    _serve(Path(sys.argv[1]))
