"""Support for tests that drive a real alallo server: start it, upload, read SSE."""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import sqlalchemy as sa
import trio
from httpx_sse import aconnect_sse
from sqlalchemy.pool import NullPool

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

TEST_DATABASE = os.environ.get("ALALLO_TEST_DATABASE", "sqlite")
"""The backend every server and runtime of this test run uses: ``sqlite`` or ``postgres``."""
if TEST_DATABASE not in {"sqlite", "postgres"}:
    raise RuntimeError(f"ALALLO_TEST_DATABASE must be sqlite or postgres, not {TEST_DATABASE!r}")
POSTGRES_URL = os.environ.get("ALALLO_TEST_POSTGRES_URL",
                              "postgresql+psycopg://postgres@127.0.0.1:5432/test")
"""Where the test databases are created (``CREATE DATABASE`` on this connection): ``make test``
sets it to the server tests/tools/ensure_postgres.py chose; else the machine's own."""
_DB_PREFIX = "alallo_test_"
_databases: dict[Path, str] = {}


def _admin() -> sa.Engine:
    return sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT", poolclass=NullPool)


def new_database_url() -> str:
    """A fresh, empty PostgreSQL database (for tests that need one whatever the backend)."""
    name = f"{_DB_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:12]}"
    engine = _admin()
    try:
        with engine.connect() as c:
            c.execute(sa.text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()
    return sa.make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)


def database_url_for(data_dir: Path) -> str | None:
    """The database of a data dir in this test run: None for SQLite (the file in the data dir),
    else a PostgreSQL database of its own, created on first use and kept while the dir is."""
    if TEST_DATABASE == "sqlite":
        return None
    key = data_dir.resolve()
    if key not in _databases:
        _databases[key] = new_database_url()
    return _databases[key]


def created_databases() -> set[str]:
    """The PostgreSQL databases this test run made and has not dropped, by URL."""
    return set(_databases.values())


def drop_databases(urls: set[str] | None = None) -> None:
    """Drop test databases (all of this run's when ``urls`` is None), even with clients left."""
    if TEST_DATABASE == "sqlite":
        return
    urls = created_databases() if urls is None else urls
    for key, url in list(_databases.items()):
        if url in urls:
            del _databases[key]
    names = {sa.make_url(url).database for url in urls}
    if not names:
        return
    engine = _admin()
    try:
        with engine.connect() as c:
            for name in names:
                c.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        engine.dispose()


def drop_orphan_databases() -> None:
    """Drop test databases left by test runs that died (their process is gone)."""
    if TEST_DATABASE == "sqlite":
        return
    engine = _admin()
    try:
        with engine.connect() as c:
            names = c.execute(sa.text("SELECT datname FROM pg_database WHERE datname LIKE :p"),
                              {"p": _DB_PREFIX + "%"}).scalars().all()
            for name in names:
                pid = int(name[len(_DB_PREFIX):].split("_")[0])
                if not Path(f"/proc/{pid}").exists():
                    c.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        engine.dispose()


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
    """A port free now on 127.0.0.1, below the kernel's ephemeral range: the ports it hands
    out for ``bind(0)`` are those outgoing connections take theirs from, and one took a
    server's port between this probe and the server's bind (seen once in the suite:
    "Address already in use" at a restart)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(1000):
        port = random.randrange(10_000, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port between 10000 and {low}")


def server_env(data_dir: Path, **env: str) -> dict[str, str]:
    """The environment of a server on ``data_dir``: its test database and ``env`` on top."""
    base = {k: v for k, v in os.environ.items() if k != "ALALLO_DATABASE_URL"}
    url = database_url_for(data_dir)
    if url is not None:
        base["ALALLO_DATABASE_URL"] = url
    return {**base, **env}


def start_server(data_dir: Path, **env: str) -> LiveServer:
    """Start ``alallo serve`` on a free port and wait until it answers /healthz.

    On PostgreSQL (``ALALLO_TEST_DATABASE=postgres``) the data dir gets a
    database of its own: a server started again on the same dir finds its data.
    """
    port = _free_port()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    log = data_dir.parent / f"server-{port}.log"
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [sys.executable, "-m", "alallo", "serve", "--port", str(port),
             "--data-dir", str(data_dir)],
            stdout=out, stderr=subprocess.STDOUT, env=server_env(data_dir, **env),
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
            time.sleep(0.02)  # the poll interval: the sign the server is up is its answer
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


async def create_simulated(client: httpx.AsyncClient, file_id: str, *, steps: int,
                           step_delay_s: float) -> dict[str, Any]:
    """A job of the simulated trainer (``steps`` steps, ``step_delay_s`` each) on
    ``file_id``, as ``POST /v1/fine_tuning/jobs`` answers it (asserting 200)."""
    response = await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file_id,
        "hyperparameters": {"max_steps": steps},
        "trainer": {"type": "simulated", "step_delay_s": step_delay_s},
    })
    assert response.status_code == 200, response.text
    return dict(response.json())


async def job_of(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    """The job object, as ``GET /v1/fine_tuning/jobs/{id}`` answers it (asserting 200)."""
    response = await client.get(f"/v1/fine_tuning/jobs/{job_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


Item = tuple[str, int, dict[str, Any]]
"""One item of a job's stream: ``(event, id, data)``."""


async def assert_refused_and_nothing_stored(client: httpx.AsyncClient, spec: dict[str, Any],
                                            error: dict[str, str]) -> None:
    """``spec`` asked for an estimate and then created as a job: each answers 400 with
    ``error`` (the whole error object) and the account's job list is unchanged."""
    before = (await client.get("/v1/fine_tuning/jobs", params={"limit": 1000})).json()["data"]
    for path in ("/v1/fine_tuning/estimates", "/v1/fine_tuning/jobs"):
        refused = await client.post(path, json=spec)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"] == {"type": "invalid_request_error", **error}
    after = (await client.get("/v1/fine_tuning/jobs", params={"limit": 1000})).json()["data"]
    assert after == before


async def read_stream(client: httpx.AsyncClient, job_id: str, *, last_event_id: int | None = None,
                      stop_after: int | None = None) -> list[Item]:
    """Read a job's SSE stream: ``(event, id, data)`` per item, to the end or ``stop_after`` items."""
    items: list[Item] = []
    await follow_stream(client, job_id, items, last_event_id=last_event_id, stop_after=stop_after)
    return items


async def follow_stream(client: httpx.AsyncClient, job_id: str, items: list[Item], *,
                        last_event_id: int | None = None, stop_after: int | None = None) -> None:
    """Append a job's SSE items to ``items`` as they come (what was read stays there if the
    stream breaks), to the end or ``stop_after`` items."""
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    async with aconnect_sse(client, "GET", f"/v1/fine_tuning/jobs/{job_id}/stream",
                            headers=headers, timeout=httpx.Timeout(120)) as source:
        assert source.response.status_code == 200
        assert source.response.headers["content-type"].startswith("text/event-stream")
        async with contextlib.aclosing(source.aiter_sse()) as events:
            async for sse in events:
                if sse.event == "done":  # the last frame of a finished job's stream
                    break
                if not sse.data:  # a keep-alive comment: httpx-sse yields it when an id came before
                    continue
                items.append((sse.event, int(sse.id), json.loads(sse.data)))
                if stop_after is not None and len(items) >= stop_after:
                    break


async def wait_for_job(client: httpx.AsyncClient, job_id: str,
                       ready: Callable[[dict[str, Any]], bool], *,
                       timeout: float = 60) -> dict[str, Any]:
    """The job object of the first ``job`` item of the job's SSE stream for which ``ready``
    holds. The stream starts with the job as it is now, then brings each change as the server
    publishes it: this waits for the change itself, it polls nothing. Fails if the stream ends
    first, and after ``timeout`` seconds (``trio.TooSlowError``)."""
    last: dict[str, Any] | None = None
    with trio.fail_after(timeout):
        async with aconnect_sse(client, "GET", f"/v1/fine_tuning/jobs/{job_id}/stream",
                                timeout=httpx.Timeout(timeout)) as source:
            assert source.response.status_code == 200, source.response.status_code
            async with contextlib.aclosing(source.aiter_sse()) as events:
                async for sse in events:
                    if sse.event == "job":
                        last = json.loads(sse.data)
                        if ready(last):
                            return last
    raise AssertionError(f"job {job_id}'s stream ended before the state waited for; "
                         f"its last: {last}")


async def wait_until(condition: Callable[[], T | Awaitable[T]], *, timeout: float,
                     interval: float = 0.05, what: str = "the condition") -> T:
    """Poll ``condition`` (sync or async) until it returns something true, and return that.

    Only for what gives no event to wait for (a gauge, another process's cache or lease, a
    row another process locks); fails with AssertionError after ``timeout`` seconds."""
    with trio.move_on_after(timeout):
        while True:
            result = condition()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return result
            await trio.sleep(interval)  # the poll interval
    raise AssertionError(f"{what} did not hold within {timeout} s")


def wait_until_sync(condition: Callable[[], T], *, timeout: float, interval: float = 0.05,
                    what: str = "the condition") -> T:
    """:func:`wait_until` for a test that runs no event loop."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout} s")
        time.sleep(interval)  # the poll interval
    return result


async def wait_exited(pids: Iterable[int], *, timeout: float) -> None:
    """Wait until every process of ``pids`` has exited (any process, not only a child of this
    one: its pidfd becomes readable when it ends). Returns after ``timeout`` seconds whatever
    is left: the caller checks (and says what it means)."""
    pidfds = []
    try:
        for pid in pids:  # all opened first: a pid reused meanwhile cannot slip in
            with contextlib.suppress(ProcessLookupError):  # gone already
                pidfds.append(os.pidfd_open(pid))
        with trio.move_on_after(timeout):
            for pidfd in pidfds:
                await trio.lowlevel.wait_readable(pidfd)
    finally:
        for pidfd in pidfds:
            os.close(pidfd)


def statuses(items: list[tuple[str, int, dict[str, Any]]]) -> list[str]:
    """The job statuses seen, consecutive repeats folded."""
    seen: list[str] = []
    for kind, _, data in items:
        if kind == "job" and (not seen or seen[-1] != data["status"]):
            seen.append(data["status"])
    return seen


def unpack(data: bytes, into: Path) -> Path:
    """The one top directory of a downloaded tar.gz (a model's archive), unpacked into
    ``into``."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        tops = {name.split("/")[0] for name in archive.getnames()}
        archive.extractall(into, filter="data")
    (top,) = tops
    return into / top


class Servers:
    """The servers of one test, one after the other on one data dir; ``kill`` is ``kill -9``
    (the ``servers`` fixture of conftest.py makes them and stops what is left)."""

    def __init__(self, data_dir: Path, env: dict[str, str]) -> None:
        self.data_dir, self.env = data_dir, env
        self.started: list[LiveServer] = []

    def start(self) -> LiveServer:
        server = start_server(self.data_dir, **self.env)
        self.started.append(server)
        return server

    def kill(self, server: LiveServer) -> None:
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=30)

    def close(self) -> None:
        for server in self.started:
            if server.process.poll() is None:
                stop_server(server)


def wait_final(server: LiveServer, job_id: str, key: str | None = None,
               timeout_s: float = 300) -> dict[str, Any]:
    """The job once it ended: its stream ends after its final state, so reading it is the
    wait."""
    headers = {"Authorization": f"Bearer {key or server.api_key}"}
    job: dict[str, Any] | None = None
    with httpx.stream("GET", f"{server.url}/v1/fine_tuning/jobs/{job_id}/stream",
                      headers=headers, timeout=timeout_s) as response:
        event = ""
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line.removeprefix("event:").strip()
            elif line.startswith("data:") and event == "job":
                job = json.loads(line.removeprefix("data:"))
    assert job is not None and job["status"] in FINAL, job
    return job
