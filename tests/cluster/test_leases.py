"""Leases with fencing, at the store and at the job actor (PostgreSQL).

A process whose lease was taken cannot write the job: the store refuses a
stale epoch and leaves the row as it was; the job actor that is refused
stops its trainer and stops, without touching the job again.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
import sqlalchemy as sa
import trio
from support import wait_exited

from alallo import Runtime, Settings
from alallo.cluster._cluster import Cluster
from alallo.jobs._job import Event, Job
from alallo.store._schema import jobs, nodes
from alallo.store._store import LeaseLost, Store

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


def trainer_pids(job_id: str) -> list[int]:
    """Processes (not zombies) whose command line names the job: its trainer."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if job_id.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def expire(store: Store, node_id: str) -> None:
    """Make a node look dead: its last heartbeat long ago."""
    with store.engine.begin() as c:
        c.execute(nodes.update().where(nodes.c.id == node_id).values(heartbeat_at=0.0))


def row(store: Store, job_id: str) -> tuple[str, int, str, int]:
    with store.engine.connect() as c:
        owner, epoch, seq, state = c.execute(
            sa.select(jobs.c.owner, jobs.c.epoch, jobs.c.seq, jobs.c.state)
            .where(jobs.c.id == job_id)).one()
    return owner, int(epoch), state, int(seq)


async def running_job(rt: Runtime) -> Job:
    account = await rt.authenticate(rt.api_key)
    file = await rt.upload_file(account, "sample.jsonl", SAMPLE.read_bytes())
    job = await rt.create_job(account, {
        "model": "alallo/tiny-gpt2", "training_file": file.id,
        "hyperparameters": {"max_steps": 100_000},
        "trainer": {"type": "simulated", "step_delay_s": 0.05}})
    with trio.fail_after(60):
        async with contextlib.aclosing(rt.stream(account, job.id)) as items:
            async for item in items:
                if item.kind == "job" and item.data["progress"]["step"] >= 3:
                    break
    return await rt.get_job(account, job.id)


async def wait_stopped(rt: Runtime, job_id: str, trainers: list[int]) -> None:
    """Wait until the job's actor in ``rt`` has stopped and the ``trainers`` have exited."""
    with trio.fail_after(30):
        if (actor := rt.actors.lookup(job_id)) is not None:
            await actor.wait_stopped()
    await wait_exited(trainers, timeout=30)


async def test_a_process_whose_lease_was_taken_cannot_write(
        tmp_path: Path, database_url: str) -> None:
    # The runtime heartbeats rarely here, so that it cannot renew its node
    # between the moment the test declares it dead and the other node's claim.
    settings = Settings(data_dir=tmp_path, database_url=database_url,
                        heartbeat_interval_s=30, lease_ttl_s=60)
    async with Runtime(settings) as rt:
        job = await running_job(rt)
        trainers = trainer_pids(job.id)
        assert trainers
        owner, epoch, _, _ = row(rt.store, job.id)
        assert (owner, epoch) == (rt.cluster.node_id, 1)

        other = Cluster(rt.store, heartbeat_interval_s=30, lease_ttl_s=60)
        await other.register()
        assert await other.claim_expired() == [], "a live owner's lease is not taken"
        await trio.to_thread.run_sync(expire, rt.store, rt.cluster.node_id)
        claims = await other.claim_expired()
        assert [(c.job_id, c.epoch, c.previous_owner) for c in claims] == [
            (job.id, 2, rt.cluster.node_id)]
        third = Cluster(rt.store, heartbeat_interval_s=30, lease_ttl_s=60)
        await third.register()
        assert await third.claim_expired() == [], "the new owner is alive: nothing to take"
        taken = row(rt.store, job.id)
        items = await rt.store.items_after(job.id, 0)

        # The store: a write with the old epoch is refused, and changes nothing.
        stale = job.model_copy(update={"seq": taken[3] + 5})
        event = Event.model_validate({**(await rt.store.items_after(
            job.id, 0, kinds=("event",), limit=1))[0][2], "seq": taken[3] + 5})
        with pytest.raises(LeaseLost, match="epoch 1"):
            await rt.store.save_job(stale, [event], epoch=1)
        assert row(rt.store, job.id) == taken

        # The actor: its next write is refused; it stops its trainer and itself.
        await wait_stopped(rt, job.id, trainers)
        assert not trainer_pids(job.id) and rt.actors.lookup(job.id) is None
        assert row(rt.store, job.id) == taken, "the old owner wrote nothing more"
        assert await rt.store.items_after(job.id, 0) == items
        assert not rt.cluster.owns(job.id)
    try:
        assert row(rt.store, job.id)[:2] == (other.node_id, 2), \
            "leaving does not give up others' jobs"
    finally:
        rt.store.close()


def test_a_lease_shorter_than_the_heartbeat_is_refused_naming_both() -> None:
    with pytest.raises(ValueError, match="lease_ttl_s .* heartbeat_interval_s"):
        Settings(heartbeat_interval_s=5, lease_ttl_s=5)


async def test_servers_register_as_nodes_with_their_address(
        tmp_path: Path, database_url: str) -> None:
    settings = Settings(data_dir=tmp_path, database_url=database_url)
    async with Runtime(settings) as rt:
        await rt.cluster.set_address("http://127.0.0.1:8123")
        with rt.store.engine.connect() as c:
            (node,) = c.execute(sa.select(nodes)).mappings().all()
        assert node["id"] == rt.cluster.node_id and node["pid"] == os.getpid()
        assert node["address"] == "http://127.0.0.1:8123"
        assert node["heartbeat_at"] >= node["started_at"] > 0
    with rt.store.engine.connect() as c:
        assert c.execute(sa.select(nodes)).all() == [], "a clean stop removes the node"
    rt.store.close()


async def test_an_adopted_job_takes_the_cancel_asked_while_its_owner_was_gone(
        tmp_path: Path, database_url: str) -> None:
    # Two runtimes in one process on one database; A is declared dead while a
    # cancel is recorded for its job, and B, starting, adopts the job.
    slow = {"database_url": database_url, "heartbeat_interval_s": 30, "lease_ttl_s": 60}
    async with Runtime(Settings(data_dir=tmp_path / "a", **slow)) as a:
        job = await running_job(a)
        trainers = trainer_pids(job.id)
        with a.store.engine.begin() as c:
            c.execute(jobs.update().where(jobs.c.id == job.id).values(cancel_requested=True))
        await trio.to_thread.run_sync(expire, a.store, a.cluster.node_id)
        async with Runtime(Settings(data_dir=tmp_path / "b", api_key=a.api_key, **slow)) as b:
            with trio.fail_after(30):
                done = await b.wait_for_final(job.account_id, job.id)
            assert done.status.value == "cancelled"
            await wait_stopped(a, job.id, trainers)
            assert not trainer_pids(job.id) and a.actors.lookup(job.id) is None
            owner, epoch, _, _ = row(b.store, job.id)
            assert (owner, epoch) == (b.cluster.node_id, 2)
            events = [e.type.value for e in (await b.list_events(job.account_id, job.id,
                                                                 limit=100))[0]]
            assert events.count("CANCEL_REQUESTED") == 1 and "JOB_RESTARTED" not in events
