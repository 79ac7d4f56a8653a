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
in WAL mode with ``synchronous=NORMAL``, as the store runs it; PostgreSQL
with its defaults, ``fsync`` and ``synchronous_commit`` on). On PostgreSQL
the store also runs with 8 writers at once, as a busy server does (its
worker threads); the raw baseline stays one connection.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import trio
from sqlalchemy.pool import NullPool

from _results import append_rows, row

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from alallo import Event, Job, Runtime, Settings  # noqa: E402
from alallo._store import Store  # noqa: E402

SAMPLE = REPO / "examples" / "sample.jsonl"
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
    jobs = [job.model_copy(update={"id": f"ft-{uuid.uuid4().hex[:24]}"}) for _ in range(count)]
    limiter = trio.CapacityLimiter(writers)

    async def create(one: Job) -> None:
        async with limiter:
            await store.save_job(one, events, insert=True)

    try:
        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for one in jobs:
                nursery.start_soon(create, one)
        return count / (time.perf_counter() - started)
    finally:
        store.close()


def raw_sqlite(path: Path, payload: str, count: int) -> float:
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
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
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    count = args.count or (300 if args.quick else 3000)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="alallo-bench-store-") as scratch:
        tmp = Path(scratch)
        job, events = trio.run(template, tmp / "template")
        payload = job.model_dump_json()
        figures: list[tuple[str, float, float]] = []

        sqlite_url = f"sqlite:///{tmp / 'store.db'}"
        store_rate = trio.run(store_creations, sqlite_url, job, events, count, 1)
        raw_rate = raw_sqlite(tmp / "raw.db", payload, count)
        figures.append(("SQLite, 1 writer", store_rate, raw_rate))

        if not args.no_postgres and not reachable(args.postgres_url):
            print(f"PostgreSQL is not reachable at {args.postgres_url}: SQLite only")
        elif not args.no_postgres:
            for writers in (1, 8):
                with ScratchDatabase(args.postgres_url) as url:
                    store_rate = trio.run(store_creations, url, job, events, count, writers)
                    if writers == 1:
                        raw_rate = raw_postgres(url, payload, count)
                figures.append((f"PostgreSQL, {writers} writer{'s' * (writers > 1)}",
                                store_rate, raw_rate))

    print(f"{count} durable job creations per backend ({len(payload)} bytes of job state each)")
    print(f"{'backend':24} {'store /s':>10} {'raw /s':>10} {'store/raw':>10}")
    for name, store_rate, raw_rate in figures:
        print(f"{name:24} {store_rate:10.0f} {raw_rate:10.0f} {store_rate / raw_rate:10.2f}")
        rows.append(row(f"store: durable job creations/s, {name} (baseline: raw inserts)",
                        store_rate, "1/s", raw_rate, None))
    if args.json:
        append_rows(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
