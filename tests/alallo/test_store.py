"""The store on the test backend (``ALALLO_TEST_DATABASE``): schema migrations, errors, races."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
import trio
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from support import wait_until

from alallo import Event, Job, JobStatus, Runtime, Settings
from alallo.store._migrations import INITIAL_REVISION, config, head_revision
from alallo.store._schema import metadata
from alallo.store._store import LeaseLost, Store, StoreUnavailable

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


async def job_template(tmp_path: Path) -> tuple[Job, list[Event]]:
    """A job as ``create_job`` stores it (queued, ``Starting``) and its JOB_PENDING event."""
    async with Runtime(Settings(data_dir=tmp_path / "template")) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        job = await rt.create_job(account, {
            "model": "alallo/tiny-gpt2", "training_file": file.id,
            "hyperparameters": {"max_steps": 1},
            "trainer": {"type": "simulated", "step_delay_s": 0.0}})
        rows = await rt.store.items_after(job.id, 0, kinds=("event",), limit=1)
        await rt.wait_for_final(account, job.id)
    return job, [Event.model_validate(data) for _, _, data in rows]


def schema_diff(url: str) -> list[object]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={
                "compare_type": True, "compare_server_default": True})
            return [diff for diff in compare_metadata(context, metadata)
                    if not _sqlite_identity(connection, diff)]
    finally:
        engine.dispose()


def _sqlite_identity(connection: sa.Connection, diff: object) -> bool:
    # SQLite has no identity columns: the store numbers jobs itself there.
    return (connection.dialect.name == "sqlite" and isinstance(diff, list) and len(diff) == 1
            and diff[0][0] == "modify_default" and diff[0][2:4] == ("jobs", "number")
            and isinstance(diff[0][-1], sa.Identity))


def revision_of(url: str) -> str | None:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def test_the_migrations_make_exactly_the_schema_of_the_code(database_url: str) -> None:
    store = Store(database_url)
    try:
        assert store.open() == head_revision()
    finally:
        store.close()
    assert schema_diff(database_url) == []


def test_opening_again_changes_nothing(database_url: str) -> None:
    for _ in range(2):
        store = Store(database_url)
        try:
            assert store.open() == head_revision()
        finally:
            store.close()
    assert revision_of(database_url) == head_revision()


def migrate_to(url: str, revision: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            command.upgrade(config(connection), revision)
    finally:
        engine.dispose()


def test_a_database_made_before_migrations_is_adopted_with_its_data(database_url: str) -> None:
    # The schema of the first revision, as `metadata.create_all` made it: no alembic_version.
    migrate_to(database_url, INITIAL_REVISION)
    engine = sa.create_engine(database_url)
    with engine.begin() as c:
        c.execute(sa.text("DROP TABLE alembic_version"))
        c.execute(sa.text("INSERT INTO accounts (id, name, balance, billing_limit, created_at) "
                          "VALUES ('acct-old', 'old', 12.5, 0, 1)"))
    engine.dispose()

    store = Store(database_url)
    try:
        assert store.open() == head_revision()
        assert trio.run(store.balance, "acct-old") == (12.5, 0.0)
    finally:
        store.close()
    assert schema_diff(database_url) == []


async def test_jobs_of_one_second_keep_the_order_they_were_created_in(
        tmp_path: Path, database_url: str) -> None:
    job, events = await job_template(tmp_path)
    store = Store(database_url)
    await trio.to_thread.run_sync(store.open)
    try:
        await store.ensure_account(job.account_id, "a", 100.0, job.created_at)
        ids = ["ft-m", "ft-z", "ft-a", "ft-q"]  # not in id order, all in one second
        for job_id in ids:
            await store.save_job(job.model_copy(update={"id": job_id}), events, insert=True)
        assert [j.id for j in await store.live_jobs()] == ids
        newest, more = await store.list_jobs(job.account_id, limit=2)
        assert [j.id for j in newest] == ["ft-q", "ft-a"] and more
        rest, more = await store.list_jobs(job.account_id, limit=10, after="ft-a")
        assert [j.id for j in rest] == ["ft-z", "ft-m"] and not more
    finally:
        store.close()


async def test_jobs_stored_before_numbers_are_numbered_in_their_order(
        tmp_path: Path, database_url: str) -> None:
    job, events = await job_template(tmp_path)
    migrate_to(database_url, "0002")
    engine = sa.create_engine(database_url)
    with engine.begin() as c:
        for job_id, created_at in (("ft-b", 20), ("ft-c", 10), ("ft-a", 20)):
            c.execute(sa.text("INSERT INTO jobs (id, account_id, created_at, status, "
                              "training_file, seq, state) VALUES (:id, :account, :at, "
                              "'queued', 'file-1', 2, :state)"),
                      {"id": job_id, "account": job.account_id, "at": created_at,
                       "state": job.model_copy(update={"id": job_id}).model_dump_json()})
    engine.dispose()
    store = Store(database_url)
    await trio.to_thread.run_sync(store.open)
    try:
        await store.ensure_account(job.account_id, "a", 100.0, job.created_at)
        await store.save_job(job.model_copy(update={"id": "ft-new"}), events, insert=True)
        assert [j.id for j in await store.live_jobs()] == ["ft-c", "ft-a", "ft-b", "ft-new"]
    finally:
        store.close()


def test_a_database_of_a_newer_alallo_is_refused_with_its_revision(database_url: str) -> None:
    store = Store(database_url)
    store.open()
    store.close()
    engine = sa.create_engine(database_url)
    with engine.begin() as c:
        c.execute(sa.text("UPDATE alembic_version SET version_num = 'from_the_future'"))
    engine.dispose()
    store = Store(database_url)
    try:
        with pytest.raises(StoreUnavailable, match="from_the_future"):
            store.open()
    finally:
        store.close()


def test_servers_starting_together_migrate_once(database_url: str) -> None:
    results: list[str | BaseException] = []
    barrier = threading.Barrier(4)

    def start() -> None:
        store = Store(database_url)
        try:
            barrier.wait(timeout=30)
            results.append(store.open())
        except BaseException as exc:  # reported by the assertion below
            results.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == [head_revision()] * 4
    assert schema_diff(database_url) == []


def test_processes_upgrading_together_migrate_once(database_url: str) -> None:
    command = [sys.executable, "-m", "alallo", "db", "upgrade", "--database-url", database_url]
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(4)]
    outcomes = [(p.wait(timeout=120), *p.communicate()) for p in processes]
    assert [code for code, _, _ in outcomes] == [0] * 4, outcomes
    assert schema_diff(database_url) == []


def test_db_upgrade_command(database_url: str) -> None:
    command = [sys.executable, "-m", "alallo", "db", "upgrade", "--database-url", database_url]
    first = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert f"is at revision {head_revision()} (the newest)." in first.stdout
    again = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and again.stdout == first.stdout
    assert schema_diff(database_url) == []


def test_db_upgrade_with_the_sqlite_default_of_a_data_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / "fresh" / "data"
    env = {k: v for k, v in os.environ.items() if k != "ALALLO_DATABASE_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "alallo", "db", "upgrade", "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert revision_of(f"sqlite:///{data_dir / 'alallo.db'}") == head_revision()


def test_db_upgrade_says_why_it_cannot_reach_the_database() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "alallo", "db", "upgrade", "--database-url",
         "postgresql://nobody@127.0.0.1:1/alallo"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith("Error: the store failed: ")
    assert "Traceback" not in done.stderr


def test_an_unreachable_database_raises_store_unavailable() -> None:
    store = Store("postgresql://nobody@127.0.0.1:1/alallo")
    try:
        with pytest.raises(StoreUnavailable):
            store.open()
        with pytest.raises(StoreUnavailable):
            trio.run(store.balance, "acct")
    finally:
        store.close()


def test_a_url_that_is_not_one_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a usable database URL"):
        Store("not a url")


def test_a_sqlite_store_flushes_each_commit_to_disk(tmp_path: Path) -> None:
    """What a POST answered survives an OS crash too: WAL, with every commit flushed
    (``synchronous=FULL``), on each connection the store opens."""
    store = Store(f"sqlite:///{tmp_path / 'alallo.db'}")
    store.open()
    try:
        with store.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
    finally:
        store.close()


def test_plain_postgresql_urls_use_psycopg_3() -> None:
    for url in ("postgresql://u@h/db", "postgres://u@h/db"):
        store = Store(url)
        assert store._engine.url.drivername == "postgresql+psycopg"
        store.close()


async def test_many_jobs_of_one_account_changing_at_once_keep_the_feed_in_order(
        tmp_path: Path) -> None:
    # Every state change moves the job to the end of its account's feed; on
    # PostgreSQL the store writes from several threads at once, so two jobs
    # may take the next position together unless the account is locked.
    settings = Settings(data_dir=tmp_path, max_concurrent_jobs=8, budget_factor=1000.0)
    async with Runtime(settings) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
        spec = {"model": "alallo/tiny-gpt2", "training_file": file.id,
                "hyperparameters": {"max_steps": 5},
                "trainer": {"type": "simulated", "step_delay_s": 0.0}}
        ids: list[str] = []

        async def create() -> None:
            ids.append((await rt.create_job(account, spec)).id)

        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                for _ in range(24):
                    nursery.start_soon(create)
            finals = [await rt.wait_for_final(account, job_id) for job_id in ids]
        assert {job.status for job in finals} == {JobStatus.SUCCEEDED}
        feed = await rt.store.job_feed_after(account, 0)
        positions = [position for position, _ in feed]
        assert positions == sorted(set(positions))
        assert {job.id for _, job in feed} == set(ids)
        assert all(job.state_seq == final.state_seq
                   for (_, job), final in zip(sorted(feed, key=lambda p: p[1].id),
                                              sorted(finals, key=lambda j: j.id)))


async def concurrently(store: Store, saves: list[tuple[Job, dict[str, object]]],
                       events: list[Event]) -> tuple[list[str], dict[str, BaseException | None]]:
    """Run ``save_job`` calls at once (creations with ``events``); return the order the
    calls were made in and their outcomes (None: committed)."""
    made: list[str] = []
    outcomes: dict[str, BaseException | None] = {}

    async def save(job: Job, options: dict[str, object]) -> None:
        made.append(job.id)  # no checkpoint before the call queues its change
        try:
            created = events if options.get("insert") else []
            await store.save_job(job, created, **options)  # type: ignore[arg-type]
            outcomes[job.id] = None
        except (StoreUnavailable, LeaseLost) as exc:
            outcomes[job.id] = exc

    async with trio.open_nursery() as nursery:
        for job, options in saves:
            nursery.start_soon(save, job, options)
    return made, outcomes


async def test_concurrent_creations_are_committed_together_in_the_order_they_were_made(
        tmp_path: Path, database_url: str) -> None:
    job, events = await job_template(tmp_path)
    store = Store(database_url)
    await trio.to_thread.run_sync(store.open)
    try:
        await store.ensure_account(job.account_id, "a", 100.0, job.created_at)
        jobs = [job.model_copy(update={"id": f"ft-{n:02d}"}) for n in range(12)]
        before = store._saves.batches
        made, outcomes = await concurrently(store, [(j, {"insert": True}) for j in jobs], events)
        assert all(error is None for error in outcomes.values()) and len(outcomes) == 12
        assert store._saves.batches - before < 12, "some were committed together"
        feed = await store.job_feed_after(job.account_id, 0)
        assert [position for position, _ in feed] == list(range(1, 13)), "gapless"
        assert [j.id for _, j in feed] == made
        assert [j.id for j in await store.live_jobs()] == made
    finally:
        store.close()


async def test_a_refused_change_fails_only_its_caller_and_its_batch_mates_are_committed(
        tmp_path: Path, database_url: str) -> None:
    job, events = await job_template(tmp_path)
    store = Store(database_url)
    await trio.to_thread.run_sync(store.open)
    try:
        await store.ensure_account(job.account_id, "a", 100.0, job.created_at)
        leased = [job.model_copy(update={"id": f"ft-leased-{n}"}) for n in range(4)]
        for one in leased:
            await store.save_job(one, events, insert=True, owner="node-a")  # epoch 1
        taken = job.model_copy(update={"id": "ft-taken"})
        await store.save_job(taken, events, insert=True)
        fresh = [job.model_copy(update={"id": f"ft-new-{n}"}) for n in range(4)]
        moved = [one.model_copy(update={"seq": one.seq + 1, "state_seq": one.state_seq + 1})
                 for one in leased]
        saves: list[tuple[Job, dict[str, object]]] = [
            (fresh[0], {"insert": True}), (moved[0], {"epoch": 1}),
            (taken, {"insert": True}),  # the id is taken: refused
            (fresh[1], {"insert": True}), (moved[1], {"epoch": 2}),  # a stale lease: refused
            (moved[2], {"epoch": 1}), (fresh[2], {"insert": True}), (moved[3], {"epoch": 1}),
            (fresh[3], {"insert": True})]
        made, outcomes = await concurrently(store, saves, events)
        assert isinstance(outcomes.pop("ft-taken"), StoreUnavailable)
        assert isinstance(outcomes.pop(moved[1].id), LeaseLost)
        assert all(error is None for error in outcomes.values()) and len(outcomes) == 7
        feed = await store.job_feed_after(job.account_id, 0)
        # 5 creations, then 7 changes committed: positions 6 to 12, none taken by a refused one.
        assert [position for position, _ in feed][-7:] == list(range(6, 13))
        assert [j.id for _, j in feed][-7:] == [i for i in made if i in outcomes]
        assert (await store.get_job(moved[1].id)) == leased[1], "the refused change left no trace"
        for one in (moved[0], moved[2], moved[3]):
            assert await store.get_job(one.id) == one
    finally:
        store.close()


async def test_creating_an_account_that_another_server_is_creating_changes_nothing(
        database_url: str) -> None:
    # Two servers starting at once on a fresh database both create the local account:
    # the second insert must wait for the first and then change nothing, not fail
    # (it failed with UniqueViolation on accounts_pkey on PostgreSQL).
    from alallo.store._schema import accounts

    store = Store(database_url)
    store.open()
    other = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    try:
        with other.connect() as c:
            c.execute(accounts.insert().values(id="acct-local", name="first", balance=1.0,
                                               billing_limit=0.0, created_at=1))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: store.ensure_account("acct-local", "second", 2.0, 2))
                if c.dialect.name == "postgresql":  # wait until it waits for our row
                    await wait_until(lambda: c.execute(sa.text(
                        "SELECT count(*) FROM pg_locks WHERE NOT granted")).scalar(),
                        timeout=30, interval=0.01, what="a lock wait on PostgreSQL")
                c.commit()
        row = await store.get_account("acct-local")
    finally:
        other.dispose()
        store.close()
    assert row is not None and (row["name"], row["balance"]) == ("first", 1.0)


async def test_concurrent_questions_of_command_rights_are_answered_each_in_one_query(
        database_url: str) -> None:
    """Every run that starts asks whether its account may run its own command (1,000 at
    once after a restart): asked together they share a query, and each gets its account's
    answer as the database has it when asked."""
    store = Store(database_url)
    await trio.to_thread.run_sync(store.open)
    try:
        await store.ensure_account("acct-trusted", "t", 1.0, 0, allow_commands=True)
        await store.ensure_account("acct-plain", "p", 1.0, 0)
        asked = ["acct-trusted", "acct-plain", "acct-unknown"] * 8
        answers: dict[int, bool] = {}

        async def ask(n: int, account: str) -> None:
            answers[n] = await store.allows_commands(account)

        before = store._rights.batches
        async with trio.open_nursery() as nursery:
            for n, account in enumerate(asked):
                nursery.start_soon(ask, n, account)
        assert [answers[n] for n in range(len(asked))] == [True, False, False] * 8
        assert store._rights.batches - before < len(asked), "some were asked together"
        await store.set_allow_commands("acct-trusted", False)  # never a remembered answer
        assert await store.allows_commands("acct-trusted") is False
    finally:
        store.close()


async def test_a_cursor_past_what_the_columns_hold_is_past_every_item(
        tmp_path: Path, database_url: str) -> None:
    # The API takes resume points up to 2**62; PostgreSQL's integer columns end at 2**31 - 1
    # and refused such a cursor ("integer out of range": a 503), found by schemathesis.
    from alallo.store import item_page

    job, events = await job_template(tmp_path)
    store = Store(database_url)
    await trio.to_thread.run_sync(store.open)
    try:
        await store.ensure_account(job.account_id, "a", 100.0, job.created_at)
        await store.save_job(job, events, insert=True)
        far = 2**62 - 1
        assert await store.items_after(job.id, far) == []
        assert await store.job_feed_after(job.account_id, far) == []
        assert await item_page(store, job.id, kinds=("event",), cursor=far, limit=5,
                               newest_first=False) == []
        newest = await item_page(store, job.id, kinds=("event",), cursor=far, limit=5,
                                 newest_first=True)
        assert [seq for _, seq, _ in newest] == sorted((e.seq for e in events), reverse=True)[:5]
    finally:
        store.close()
