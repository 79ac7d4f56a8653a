"""Durable job creations per second on SQLite and PostgreSQL, against raw one-row commits.

Run: ``.venv/bin/python bench/bench_store.py`` (``--quick`` for a smoke run;
``--postgres-url URL`` for a PostgreSQL server other than the local one at
127.0.0.1:5432, database ``test``, where a scratch database is created and
dropped; ``--no-postgres`` for SQLite only).

A *durable job creation* is what ``POST /v1/fine_tuning/jobs`` commits
before it answers: ``Store.save_job(job, events, insert=True)``, one
transaction with the job row, its JOB_PENDING event, and its place in the
account's feed (which locks the account's row on PostgreSQL). The job is a
real one: a runtime creates it first, and the benchmark stores copies of it
under new ids. The baseline is the floor for the same durability: the
database driver alone inserting one row of the same size per commit (SQLite
in WAL mode with ``synchronous=FULL``, as the store runs it: each commit flushed to disk; PostgreSQL
with its defaults, ``fsync`` and ``synchronous_commit`` on). The store also
runs with 16 writers at once, each creating one job after the other, as a
busy server's concurrent ``POST``s do: what arrives while a batch commits is
committed together in the next (group commit, ``alallo/store/_group_commit.py``);
the raw baseline stays one connection, one row per commit.

``--http`` also measures what users get: ``POST /v1/fine_tuning/jobs`` from
16 clients at once to an ``alallo serve`` on SQLite (one job runs a ``sleep``,
the others wait in the queue), each answered once the job is committed,
against the same raw baseline.
"""

from __future__ import annotations

import argparse
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
import trio
from _results import append_rows, row
from sqlalchemy.pool import NullPool

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from alallo import Event, Job, Runtime, Settings  # noqa: E402
from alallo._ids import new_id  # noqa: E402
from alallo.store._store import Store  # noqa: E402

SAMPLE = REPO / "examples" / "sample.jsonl"
WRITERS = (1, 16)
"""Creations in flight at once: one (each waits for the last), and as many as a busy
server's concurrent POSTs (they are committed together: group commit)."""
HTTP_CLIENTS = 16
DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


async def template(data_dir: Path) -> tuple[Job, list[Event]]:
    """A job as ``create_job`` stores it (queued, ``Starting``) and its JOB_PENDING event."""
    async with Runtime(Settings(data_dir=data_dir)) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        job = await rt.create_job(account, {
            "model": "alallo/tiny-gpt2", "training_file": file.id,
            "hyperparameters": {"max_steps": 1},
            "trainer": {"type": "simulated", "step_delay_s": 0.0}})
        events = [Event.model_validate(data)
                  for _, _, data in await rt.store.items_after(job.id, 0, kinds=("event",),
                                                               limit=1)]
        await rt.wait_for_final(account, job.id)
    return job, events


async def store_creations(url: str, job: Job, events: list[Event], count: int,
                          writers: int) -> float:
    """Durable job creations per second through the store, ``writers`` at a time."""
    store = Store(url)
    await trio.to_thread.run_sync(store.open)
    await store.ensure_account(job.account_id, "bench", 1e9, int(time.time()))
    # New ids made as the runtime makes them (time-ordered: alallo._ids).
    jobs = [job.model_copy(update={"id": new_id("ft-")}) for _ in range(count)]
    todo = iter(jobs)

    async def writer() -> None:  # one client: creates one job after the other
        for one in todo:
            await store.save_job(one, events, insert=True)

    try:
        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            # ``writers`` tasks, each a writer (as a server's concurrent POSTs are); not a
            # task per job behind a limiter, whose thousands of parked tasks cost the loop
            # more per job (~40-100 us, measured) than the raw baseline's whole commit.
            for _ in range(writers):
                nursery.start_soon(writer)
        return count / (time.perf_counter() - started)
    finally:
        store.close()


def http_creations(tmp: Path, count: int, clients: int) -> float:
    """Job creations per second over HTTP, ``clients`` at a time, to a fresh ``alallo serve``."""
    data_dir = tmp / "http-data"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {**os.environ, "ALALLO_MAX_CONCURRENT_JOBS": "1", "ALALLO_BUDGET_FACTOR": "1000000",
           "ALALLO_DEFAULT_BALANCE": "1000000000"}
    with (tmp / "http-server.log").open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "alallo", "serve", "--port", str(port),
             "--data-dir", str(data_dir)], stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"the server did not start; see {tmp / 'http-server.log'}")
            time.sleep(0.1)
        key = (data_dir / "api-key").read_text().strip()
        return trio.run(_post_jobs, url, key, count, clients)
    finally:
        process.kill()  # its queued jobs do not matter: a clean stop of 1,000 takes long
        process.wait()


async def _post_jobs(url: str, key: str, count: int, clients: int) -> float:
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"},
                                 timeout=120, limits=httpx.Limits(max_connections=clients)
                                 ) as client:
        uploaded = await client.post("/v1/files", files={"file": ("sample.jsonl",
                                                                  SAMPLE.read_bytes())},
                                     data={"purpose": "fine-tune"})
        uploaded.raise_for_status()
        body = {"model": "alallo/tiny-gpt2", "training_file": uploaded.json()["id"],
                "hyperparameters": {"max_steps": 1000}, "trainer": {"command": ["sh", "-c", "sleep 600", "sh"]}}
        (await client.post("/v1/fine_tuning/jobs", json=body)).raise_for_status()
        left = count

        async def post_some() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                (await client.post("/v1/fine_tuning/jobs", json=body)).raise_for_status()

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(clients):
                nursery.start_soon(post_some)
        return count / (time.perf_counter() - started)


def raw_sqlite(path: Path, payload: str, count: int) -> float:
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute("CREATE TABLE raw (id TEXT PRIMARY KEY, state TEXT NOT NULL)")
    connection.commit()
    started = time.perf_counter()
    for n in range(count):
        connection.execute("INSERT INTO raw VALUES (?, ?)", (f"ft-{n}", payload))
        connection.commit()
    elapsed = time.perf_counter() - started
    connection.close()
    return count / elapsed


def raw_postgres(url: str, payload: str, count: int) -> float:
    import psycopg

    parsed = sa.make_url(url)
    with psycopg.connect(host=parsed.host, port=parsed.port or 5432, user=parsed.username,
                         password=parsed.password, dbname=parsed.database) as connection:
        connection.execute("CREATE TABLE raw (id TEXT PRIMARY KEY, state TEXT NOT NULL)")
        connection.commit()
        started = time.perf_counter()
        for n in range(count):
            connection.execute("INSERT INTO raw VALUES (%s, %s)", (f"ft-{n}", payload))
            connection.commit()
        return count / (time.perf_counter() - started)


def reachable(url: str) -> bool:
    engine = sa.create_engine(url, poolclass=NullPool)
    try:
        with engine.connect():
            return True
    except sa.exc.OperationalError:
        return False
    finally:
        engine.dispose()


class ScratchDatabase:
    """A database created on a PostgreSQL server for one run, dropped after."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.name = f"alallo_bench_{uuid.uuid4().hex[:12]}"
        self.url = sa.make_url(server_url).set(database=self.name).render_as_string(
            hide_password=False)

    def _run(self, sql: str) -> None:
        engine = sa.create_engine(self.server_url, isolation_level="AUTOCOMMIT",
                                  poolclass=NullPool)
        try:
            with engine.connect() as c:
                c.execute(sa.text(sql))
        finally:
            engine.dispose()

    def __enter__(self) -> str:
        self._run(f'CREATE DATABASE "{self.name}"')
        return self.url

    def __exit__(self, *exc: object) -> None:
        self._run(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 creations instead of 3,000")
    parser.add_argument("--count", type=int, default=None)
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--http", action="store_true",
                        help="also POST jobs to an alallo serve on SQLite (16 clients)")
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    count = args.count or (300 if args.quick else 3000)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="alallo-bench-store-",
                                     ignore_cleanup_errors=True) as scratch:
        tmp = Path(scratch)
        job, events = trio.run(template, tmp / "template")
        payload = job.model_dump_json()
        figures: list[tuple[str, float, float]] = []

        raw_rate = raw_sqlite(tmp / "raw.db", payload, count)
        for writers in WRITERS:
            sqlite_url = f"sqlite:///{tmp / f'store-{writers}.db'}"
            store_rate = trio.run(store_creations, sqlite_url, job, events, count, writers)
            figures.append((f"SQLite, {writers} writer{'s' * (writers > 1)}", store_rate,
                            raw_rate))
            print(f"SQLite, {writers} writers: {store_rate:.0f} /s (raw {raw_rate:.0f} /s)",
                  flush=True)

        if not args.no_postgres and not reachable(args.postgres_url):
            print(f"PostgreSQL is not reachable at {args.postgres_url}: SQLite only")
        elif not args.no_postgres:
            for writers in WRITERS:
                with ScratchDatabase(args.postgres_url) as url:
                    store_rate = trio.run(store_creations, url, job, events, count, writers)
                    if writers == 1:
                        raw_rate = raw_postgres(url, payload, count)
                figures.append((f"PostgreSQL, {writers} writer{'s' * (writers > 1)}",
                                store_rate, raw_rate))
                print(f"PostgreSQL, {writers} writers: {store_rate:.0f} /s (raw {raw_rate:.0f} /s)",
                      flush=True)
        if args.http:
            http_rate = http_creations(tmp, min(count, 1000), HTTP_CLIENTS)
            raw_rate = raw_sqlite(tmp / "raw-http.db", payload, count)
            figures.append((f"HTTP, SQLite, {HTTP_CLIENTS} clients", http_rate, raw_rate))
            print(f"HTTP: {http_rate:.0f} /s (raw {raw_rate:.0f} /s)", flush=True)

    print(f"{count} durable job creations per backend ({len(payload)} bytes of job state each)")
    print(f"{'backend':26} {'store /s':>10} {'raw /s':>10} {'store/raw':>10}")
    for name, store_rate, raw_rate in figures:
        print(f"{name:26} {store_rate:10.0f} {raw_rate:10.0f} {store_rate / raw_rate:10.2f}")
        rows.append(row(f"store: durable job creations/s, {name} (baseline: raw inserts)",
                        store_rate, "1/s", raw_rate, 0.5 if "1 writer" not in name else None))
    if args.json:
        append_rows(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
