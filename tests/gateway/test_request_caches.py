"""API keys and live jobs answered from memory: never a revoked key's data, never an old job.

``Runtime.authenticate`` remembers a key for ``KEY_CACHE_TTL_S`` seconds and
``GET /v1/fine_tuning/jobs/{id}`` answers a job this process runs from memory
(docs/performance.md, "API requests"). Through the HTTP API: a key revoked
here answers 401 at once, one revoked by another process (the store written
directly, as ``alallo keys revoke`` does) once its time is up; a job read
right after it changed answers the change; another account's key gets 404.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import httpx
import pytest
import trio

from alallo import Runtime
from alallo.jobs._job import Job
from alallo.runtime._job_cache import LiveJobs
from alallo.runtime._key_cache import KeyCache
from alallo._keys import hash_key, key_id, new_key
from alallo.settings import Settings
from gateway import build_app

SAMPLE = Path(__file__).parents[2] / "examples" / "sample.jsonl"


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with Runtime(Settings(data_dir=tmp_path)) as rt:
        yield rt


def client_of(runtime: Runtime, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(runtime)),
                             base_url="http://alallo", timeout=30,
                             headers={"Authorization": f"Bearer {key}"})


async def new_account_key(runtime: Runtime, account_id: str) -> str:
    await runtime.store.ensure_account(account_id, account_id, 100.0, int(time.time()))
    key = new_key()
    await runtime.store.create_api_key(hash_key(key), account_id, key_id(key), int(time.time()))
    return key


async def test_revoked_keys_answer_401_at_once_here_and_after_the_ttl_elsewhere(
        runtime: Runtime) -> None:
    clock = Clock()
    runtime.accounts.key_cache.clock = clock
    here = await new_account_key(runtime, "acct-here")
    elsewhere = await new_account_key(runtime, "acct-elsewhere")
    async with client_of(runtime, here) as by_here, client_of(runtime, elsewhere) as by_other:
        assert (await by_here.get("/v1/models")).status_code == 200
        assert (await by_other.get("/v1/models")).status_code == 200

        assert await runtime.revoke_api_key(hash_key(here))
        answer = await by_here.get("/v1/models")
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == "unauthorized"

        # Another process revokes: this one trusts what it found for the TTL, no longer.
        assert await runtime.store.revoke_api_key(hash_key(elsewhere), int(time.time()))
        clock.now += runtime.accounts.key_cache.ttl_s
        assert (await by_other.get("/v1/models")).status_code == 401
        assert (await by_other.get("/v1/fine_tuning/jobs")).status_code == 401


async def test_a_job_read_right_after_it_changed_answers_the_change(runtime: Runtime) -> None:
    owner = await runtime.authenticate(runtime.api_key)
    other = await new_account_key(runtime, "acct-other")
    file = await runtime.upload_file(owner, "sample.jsonl", SAMPLE.read_bytes())
    async with client_of(runtime, runtime.api_key) as client, \
            client_of(runtime, other) as stranger:
        job = (await client.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": file.id,
            "hyperparameters": {"max_steps": 400},
            # A step every 0.1 s: between its writes the job is answered from memory
            # (during one, from the store).
            "trainer": {"type": "simulated", "step_delay_s": 0.1}})).json()
        url = f"/v1/fine_tuning/jobs/{job['id']}"
        answered_from_memory = 0
        # Until it has run a few steps and was answered from memory at least once: on a loaded
        # machine a read may land in a write's window every time for the first steps.
        with trio.fail_after(30):
            while True:
                stored = await runtime.store.get_job(job["id"])
                assert stored is not None
                answer = (await client.get(url)).json()
                assert answer["seq"] >= stored.state_seq, "never older than the store"
                assert answer["status"] in {"queued", "running"}, "400 steps outlast the test"
                answered_from_memory += runtime.live_jobs.get(job["id"]) is not None
                if answer["status"] == "running" and answer["progress"]["step"] >= 5 \
                        and answered_from_memory:
                    break
        assert (await stranger.get(url)).status_code == 404, "another account's key: 404"

        cancelled = (await client.post(f"{url}/cancel")).json()
        assert cancelled["status"] in {"cancelling", "cancelled"}
        after = (await client.get(url)).json()
        assert after["status"] in {"cancelling", "cancelled"}
        assert after["seq"] >= cancelled["seq"]
        assert (await stranger.get(url)).status_code == 404


def test_a_job_read_that_raced_a_change_is_not_remembered() -> None:
    jobs = LiveJobs(size=2)
    token = jobs.begin_read("ft-a")
    jobs.forget("ft-a")  # the job changed while the store was read
    jobs.finish_read("ft-a", token, _job("ft-a"))
    assert jobs.get("ft-a") is None
    for name in ("ft-a", "ft-b", "ft-c"):
        jobs.finish_read(name, jobs.begin_read(name), _job(name))
    assert jobs.get("ft-a") is None and len(jobs) == 2, "bounded: the oldest goes"
    jobs.forget(None)
    assert len(jobs) == 0


def test_a_job_being_written_is_read_from_the_store_until_the_bus_has_it() -> None:
    jobs = LiveJobs()
    jobs.finish_read("ft-a", jobs.begin_read("ft-a"), _job("ft-a"))
    assert jobs.get("ft-a") is not None
    jobs.begin_write("ft-a")  # the store may commit the new state from here on
    assert jobs.get("ft-a") is None, "the old state is not served during the write"
    during = jobs.begin_read("ft-a")  # may read the row before or after the commit
    jobs.finish_read("ft-a", jobs.begin_read("ft-a"), _job("ft-a"))
    assert jobs.get("ft-a") is None, "nothing is remembered during the write"
    jobs.end_write("ft-a")
    jobs.finish_read("ft-a", during, _job("ft-a"))
    assert jobs.get("ft-a") is None, "a read begun during the write is not remembered"
    jobs.finish_read("ft-a", jobs.begin_read("ft-a"), _job("ft-a"))
    assert jobs.get("ft-a") is not None, "remembered again after the write"


def test_a_key_lookup_that_raced_a_revocation_is_not_remembered() -> None:
    clock = Clock()
    keys = KeyCache(ttl_s=3.0, size=2, clock=clock)
    before = keys.revocations
    keys.forget("h1")  # revoked while the store was read
    keys.put("h1", "acct-1", revocations=before)
    assert keys.get("h1") is None
    for n in (1, 2, 3):
        keys.put(f"h{n}", f"acct-{n}", revocations=keys.revocations)
    assert keys.get("h1") is None and keys.get("h3") == "acct-3", "bounded: the oldest goes"
    clock.now += 3.0
    assert keys.get("h3") is None, "expired after the TTL"


def _job(job_id: str) -> Job:
    return cast(Job, SimpleNamespace(id=job_id))
