"""Crash recovery with real processes and real signals: ``kill -9`` the server, start it again.

Each test runs ``alallo serve`` processes on one data dir (and, with
``ALALLO_TEST_DATABASE=postgres``, one PostgreSQL database), kills one with
SIGKILL at a chosen moment and starts the next on the same data. Checked:
the job continues from its checkpoint with JOB_RESTARTED naming the cause,
no trainer of the killed server is left, no event or log line is lost or
repeated (the store and the SSE streams agree, and a client resuming with
``Last-Event-ID`` gets exactly what it missed), no step is charged twice,
and a request answered 2xx is there after the restart.

To kill "mid-training" deterministically, the trainer's process group is
first frozen with SIGSTOP once the wanted step is reached; the kernel's
parent-death SIGKILL still ends a stopped process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
import trio
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.pool import NullPool
from support import (
    EXAMPLES,
    Item,
    LiveServer,
    Servers,
    follow_stream,
    job_of,
    database_url_for,
    read_stream,
    upload,
    wait_exited,
    wait_for_job,
)

STEP_S = 0.1
PRICE_PER_HOUR = 3600.0
"""A simulated step of 0.1 s then costs $0.10."""
STEP_PRICE = PRICE_PER_HOUR * STEP_S / 3600


def connect(server: LiveServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30)


# -- processes ----------------------------------------------------------------

def _stat(pid: int) -> tuple[str, int] | None:
    """``(state, process group)`` of a process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[2])


def trainer_groups(job_id: str) -> set[int]:
    """Process groups of the processes whose command line names the job (its trainers)."""
    groups = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            stat = _stat(int(entry))
            if job_id.encode() in cmdline and stat is not None and stat[0] != "Z":
                groups.add(stat[1])
    return groups


def live_members(group: int) -> list[int]:
    """Processes of a process group that still run (zombies waiting for a reaper are dead)."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[1] == group and stat[0] != "Z":
                members.append(int(entry))
    return members


async def wait_until_gone(groups: set[int]) -> None:
    """Wait (bounded) until no process of the groups runs; a leftover fails the test."""
    await wait_exited([pid for g in groups for pid in live_members(g)], timeout=10)
    left = {g: live_members(g) for g in groups if live_members(g)}
    for group in left:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    assert left == {}, "trainer processes outlived the killed server"


def freeze(groups: set[int]) -> None:
    for group in groups:
        os.killpg(group, signal.SIGSTOP)


# -- HTTP -----------------------------------------------------------------------

async def submit(client: httpx.AsyncClient, **spec: Any) -> dict[str, Any]:
    file = (await upload(client, EXAMPLES / "sample.jsonl")).json()
    body = {"model": "alallo/tiny-gpt2", "training_file": file["id"],
            "trainer": {"type": "simulated", "step_delay_s": STEP_S}, **spec}
    response = await client.post("/v1/fine_tuning/jobs", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def wait_for(client: httpx.AsyncClient, job_id: str,
                   ready: Callable[[dict[str, Any]], bool], *, timeout: float = 120) -> dict[str, Any]:
    return await wait_for_job(client, job_id, ready, timeout=timeout)


async def settled(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    """The job once its trainer is frozen and the server has stored every line in flight."""
    last = await job_of(client, job_id)
    with trio.fail_after(30):
        while True:
            # Not a wait for an event: "no line came for 0.5 s" is what settled means (the
            # lines a frozen trainer had written give no sign of which one is the last).
            await trio.sleep(0.5)
            now = await job_of(client, job_id)
            if now["seq"] == last["seq"]:
                return now
            last = now


async def follow(client: httpx.AsyncClient, job_id: str, items: list[Item]) -> None:
    """Read the job's SSE stream into ``items`` until the server goes away."""
    with contextlib.suppress(httpx.TransportError):
        await follow_stream(client, job_id, items)


async def all_events(client: httpx.AsyncClient, job_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/fine_tuning/jobs/{job_id}/events",
                                params={"limit": 1000, "order": "asc", "type": "message"})
    return list(response.json()["data"])


def records(items: list[Item]) -> list[tuple[str, int, str]]:
    """Events and log lines as ``(kind, seq, what)``: what the store keeps of a job."""
    return [(kind, seq, data.get("alallo_type") or data.get("text") or "")
            for kind, seq, data in items if kind in {"event", "log"}]


def assert_gapless(before: list[Item], after: list[Item], whole: list[Item]) -> None:
    """Items seen before the crash plus those after resuming are the whole job, once each.

    ``whole`` is read from the restarted server, so this also checks that
    what a client saw before the crash had been stored (persist, then publish).
    """
    seqs = [seq for _, seq, _ in before + after]
    assert seqs == sorted(set(seqs)), "ordered, and nothing seen twice"
    assert records(before) + records(after) == records(whole), "nothing lost"
    assert after[-1][0] == "job" and after[-1][2]["status"] in {"succeeded", "cancelled"}


async def crash_mid_run(group: Servers, server: LiveServer, job_id: str,
                        ready: Callable[[dict[str, Any]], bool], *, timeout: float = 120,
                        ) -> tuple[dict[str, Any], list[Item]]:
    """Follow the job's stream; once ``ready``, freeze its trainer and ``kill -9`` the server.

    Returns the job as stored at the kill and the stream items a client had
    read by then. Checks that no trainer process outlives the server.
    """
    seen: list[Item] = []
    async with connect(server) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow, client, job_id, seen)
            await wait_for(client, job_id, ready, timeout=timeout)
            trainers = trainer_groups(job_id)
            assert len(trainers) == 1, trainers
            freeze(trainers)
            frozen = await settled(client, job_id)
            group.kill(server)
    await wait_until_gone(trainers)
    assert seen, "the client was following the job when the server died"
    return frozen, seen


def resumed_lines(items: list[Item]) -> list[str]:
    return [text for kind, _, text in records(items)
            if kind == "log" and text.startswith("Resuming from checkpoint")]


# -- the tests ------------------------------------------------------------------

async def job_restarts(client: httpx.AsyncClient) -> dict[str, float]:
    """``alallo_job_restarts_total`` of a server's ``/metrics``, by cause (the nonzero ones)."""
    text = (await client.get("/metrics")).text
    return {s.labels["cause"]: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "alallo_job_restarts_total" and s.value}


async def test_kill_9_mid_training_resumes_from_the_checkpoint_and_loses_nothing(
        servers: Callable[..., Servers]) -> None:
    group = servers(ALALLO_CPU_PRICE_PER_HOUR=str(PRICE_PER_HOUR), ALALLO_BUDGET_FACTOR="1000")
    first = group.start()
    async with connect(first) as client:
        job = await submit(client, hyperparameters={"max_steps": 60})
    frozen, before = await crash_mid_run(group, first, job["id"],
                                         lambda j: j["progress"]["step"] >= 14)
    checkpoint = frozen["checkpoint"]["step"]
    assert frozen["status"] == "running" and 10 <= checkpoint < 60
    seen_events = [data["seq"] for kind, _, data in before if kind == "event"]

    second = group.start()
    async with connect(second) as client:
        with trio.fail_after(120):
            after = await read_stream(client, job["id"], last_event_id=before[-1][1])
            whole = await read_stream(client, job["id"], last_event_id=0)
        events = await all_events(client, job["id"])
        rest = (await client.get(f"/v1/fine_tuning/jobs/{job['id']}/events",
                                 params={"after": seen_events[-1], "limit": 1000,
                                         "order": "asc", "type": "message"})).json()["data"]
        restarts = await job_restarts(client)
    assert restarts == {"server_restart": 1}, "/metrics shows the restart, by its cause"
    assert_gapless(before, after, whole)
    assert seen_events + [e["seq"] for e in rest] == [e["seq"] for e in events], \
        "the events cursor resumes across the restart too"
    final = after[-1][2]
    assert final["status"] == "succeeded" and final["attempt"] == 2
    assert final["progress"]["step"] == 60
    assert final["price"]["charged"] == pytest.approx(60 * STEP_PRICE)
    assert final["price"]["refunded"] == 0

    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs))
    assert [e["seq"] for e in events] == [seq for kind, seq, _ in records(whole)
                                          if kind == "event"]
    types = [e["alallo_type"] for e in events]
    assert types.count("JOB_RESTARTED") == 1 and types.count("JOB_START") == 2
    (restarted,) = [e for e in events if e["alallo_type"] == "JOB_RESTARTED"]
    assert restarted["message"] == (f"Job restarted from the checkpoint at step {checkpoint}: "
                                    "the server restarted")
    saved = [e["step"] for e in events if e["alallo_type"] == "CHECKPOINT_SAVE"]
    assert saved == sorted(set(saved)) and saved[-1] == 60, "no checkpoint reported twice"
    assert resumed_lines(whole) == [f"Resuming from checkpoint at step {checkpoint}"]


@pytest.mark.once_on_postgres  # its subject is TRL's resume; kill -9 on each backend: above
@dataclass
class Resumed:
    """A real training job killed with its server mid-run, and its end on the next server."""

    job_id: str
    checkpoint: int
    """The step of the checkpoint it resumed from."""
    before: list[Item]
    after: list[Item]
    whole: list[Item]
    events: list[dict[str, Any]]
    metrics: list[dict[str, Any]]
    data_dir: Path


async def kill_9_mid_training(servers: Callable[..., Servers], body: dict[str, Any],
                              training_data: bytes) -> Resumed:
    """Create the job ``body`` on ``training_data``, ``kill -9`` its server once it saved a
    checkpoint at step 10 or later, and follow it to its end on the next server."""
    group = servers(ALALLO_BUDGET_FACTOR="1000")
    first = group.start()
    async with connect(first) as client:
        file = (await upload(client, content=training_data, name="train.jsonl")).json()
        created = await client.post("/v1/fine_tuning/jobs",
                                    json={**body, "training_file": file["id"], "seed": 1})
        assert created.status_code == 200, created.text
        job = created.json()
    frozen, before = await crash_mid_run(
        group, first, job["id"], lambda j: (j["checkpoint"] or {}).get("step", 0) >= 10,
        timeout=240)
    assert frozen["status"] == "running"
    assert frozen["progress"]["step"] < frozen["progress"]["max_steps"]

    second = group.start()
    async with connect(second) as client:
        with trio.fail_after(300):
            after = await read_stream(client, job["id"], last_event_id=before[-1][1])
            whole = await read_stream(client, job["id"], last_event_id=0)
        events = await all_events(client, job["id"])
        metrics = (await client.get(f"/v1/fine_tuning/jobs/{job['id']}/metrics")).json()
    assert_gapless(before, after, whole)
    return Resumed(job["id"], frozen["checkpoint"]["step"], before, after, whole, events,
                   metrics["data"], first.data_dir)


async def test_kill_9_during_real_training_resumes_the_trl_run(
        servers: Callable[..., Servers]) -> None:
    run = await kill_9_mid_training(servers, {
        "model": "alallo/tiny-gpt2", "hyperparameters": {"max_steps": 50, "batch_size": 4}},
        (EXAMPLES / "sample.jsonl").read_bytes())
    final = run.after[-1][2]
    assert final["status"] == "succeeded" and final["attempt"] == 2
    assert final["progress"]["step"] == 50
    restarted = [e["message"] for e in run.events if e["alallo_type"] == "JOB_RESTARTED"]
    assert restarted == [f"Job restarted from the checkpoint at step {run.checkpoint}: "
                         "the server restarted"]
    assert resumed_lines(run.whole) == [f"Resuming from checkpoint at step {run.checkpoint}"]
    assert Path(final["fine_tuned_model_path"]).is_dir()


@pytest.mark.any_backend  # its subject is the trainer's resume; the store's, the tests above
async def test_kill_9_during_reinforcement_resumes_at_its_step_and_charges_each_step_once(
        servers: Callable[..., Servers]) -> None:
    # TRL's own resume of GRPO restarted at step 0 (huggingface/trl#3635): here it goes on.
    grader = {"type": "text_similarity", "name": "close", "input": "{{ sample.output_text }}",
              "reference": "{{ item.answer }}", "evaluation_metric": "fuzzy_match"}
    run = await kill_9_mid_training(servers, {
        "model": "alallo/tiny-gpt2", "method": {
            "type": "reinforcement", "reinforcement": {"grader": grader, "hyperparameters": {
                "max_steps": 30, "batch_size": 2, "max_completion_tokens": 8}}}},
        b"".join(b'{"messages": [{"role": "user", "content": "Say %d."}], "answer": "%d"}\n'
                 % (i, i) for i in range(8)))
    final = run.after[-1][2]
    assert final["status"] == "succeeded" and final["attempt"] == 2
    assert resumed_lines(run.whole) == [f"Resuming from checkpoint at step {run.checkpoint}"]
    steps = [data["progress"]["step"] for kind, _, data in run.after if kind == "job"]
    assert min(step for step in steps if step > 0) >= run.checkpoint, "not from step 0"
    assert [row["step"] for row in run.metrics if row["reward"] is not None] == [10, 20, 30]
    charges = ledger(run.data_dir, run.job_id)
    assert [first for first, _ in charges] == [1] + [last + 1 for _, last in charges[:-1]]
    assert charges[-1][1] == 30, "every step charged, each once"


def ledger(data_dir: Path, job_id: str) -> list[tuple[int, int]]:
    """The job's charged step ranges ``(first_step, last_step)`` in the store, in order."""
    engine = sa.create_engine(database_url_for(data_dir)
                              or f"sqlite:///{data_dir.resolve() / 'alallo.db'}",
                              poolclass=NullPool)
    try:
        with engine.connect() as c:
            return [(int(a), int(b)) for a, b in c.execute(sa.text(
                "SELECT first_step, last_step FROM ledger WHERE job_id = :j AND kind = 'charge' "
                "ORDER BY first_step"), {"j": job_id})]
    finally:
        engine.dispose()


SIGTERM_IGNORING_TRAINER = textwrap.dedent("""
    import json, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for step in range(1, 100_000):
        print(json.dumps({"type": "progress", "step": step, "max_steps": 100_000}), flush=True)
        time.sleep(0.05)  # not a wait: the trainer's pace
""")


async def test_requests_answered_2xx_survive_a_kill_9_right_after(
        servers: Callable[..., Servers], tmp_path: Path) -> None:
    trainer = tmp_path / "stubborn.py"
    trainer.write_text(SIGTERM_IGNORING_TRAINER)
    # A trainer that ignores SIGTERM keeps the job `cancelling` for the grace period.
    group = servers(ALALLO_CANCEL_GRACE_S="600", ALALLO_BUDGET_FACTOR="1000")
    server = group.start()
    data = (EXAMPLES / "sample.jsonl").read_bytes()

    async with connect(server) as client:
        uploaded = await upload(client, content=data)
        assert uploaded.status_code == 200
        group.kill(server)
    server = group.start()
    file_id = uploaded.json()["id"]
    async with connect(server) as client:
        assert (await client.get(f"/v1/files/{file_id}")).json() == uploaded.json()
        assert (await client.get(f"/v1/files/{file_id}/content")).content == data
        created = await client.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": file_id,
            "trainer": {"command": [sys.executable, str(trainer)]}})
        assert created.status_code == 200
        group.kill(server)
    job_id = created.json()["id"]

    server = group.start()
    async with connect(server) as client:
        running = await wait_for(client, job_id, lambda j: j["progress"]["step"] >= 3)
        assert running["status"] == "running"
        trainers = trainer_groups(job_id)
        cancelled = await client.post(f"/v1/fine_tuning/jobs/{job_id}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelling"
        group.kill(server)
    await wait_until_gone(trainers)

    server = group.start()
    async with connect(server) as client:
        with trio.fail_after(60):
            items = await read_stream(client, job_id)
        events = await all_events(client, job_id)
    assert items[-1][2]["status"] == "cancelled"
    types = [e["alallo_type"] for e in events]
    assert types.count("CANCEL_REQUESTED") == 1 and types[-1] == "JOB_STOPPED"
    assert "JOB_RESTARTED" not in types[types.index("CANCEL_REQUESTED"):]
    assert trainer_groups(job_id) == set()


async def test_queued_jobs_wait_again_and_all_run_after_a_kill_9(
        servers: Callable[..., Servers]) -> None:
    group = servers(ALALLO_MAX_CONCURRENT_JOBS="1", ALALLO_BUDGET_FACTOR="1000")
    server = group.start()
    async with connect(server) as client:
        first = await submit(client, hyperparameters={"max_steps": 30})
        queued = [await submit(client, training_file=first["training_file"],
                               hyperparameters={"max_steps": 3},
                               trainer={"type": "simulated", "step_delay_s": 0.0})
                  for _ in range(3)]
        await wait_for(client, first["id"], lambda j: j["progress"]["step"] >= 2)
        for job in queued:
            assert (await job_of(client, job["id"]))["status"] == "queued"
        trainers = trainer_groups(first["id"])
        group.kill(server)
    await wait_until_gone(trainers)

    server = group.start()
    async with connect(server) as client:
        with trio.fail_after(180):
            finals = [(await read_stream(client, job["id"]))[-1][2]
                      for job in [first, *queued]]
        restarted = [e["alallo_type"] for e in await all_events(client, first["id"])
                     ].count("JOB_RESTARTED")
        others = [[e["alallo_type"] for e in await all_events(client, job["id"])] for job in queued]
    assert [f["status"] for f in finals] == ["succeeded"] * 4
    assert restarted == 1
    assert all(types.count("JOB_START") == 1 and "JOB_RESTARTED" not in types
               for types in others), "a job that never ran starts once, fresh"
