"""The price quoted holds what a job costs (issue 19): real tiny TRL jobs of different sizes
are charged inside the range shown when they were created, a failed one reads $0 with its
refund beside it, and the estimate answered before creating is the job's own."""

from __future__ import annotations

import json

import httpx
import pytest
import trio
from support import FINAL, upload, wait_for_job

pytestmark = [pytest.mark.slow, pytest.mark.any_backend]  # the rule, not the backend

SIZES = [(steps, batch) for steps in (1, 2, 3, 5, 8, 13, 21) for batch in (1, 2, 4)][:20]
"""20 jobs: steps and batch sizes of tiny runs, the sizes of a first try."""


async def test_twenty_real_jobs_are_each_charged_inside_their_quote(
        client: httpx.AsyncClient) -> None:
    rows = [{"text": f"Example {i}: " + "the cat sat on the mat. " * (i % 5 + 1)}
            for i in range(24)]
    file_id = (await upload(client, content=b"".join(
        json.dumps(row).encode() + b"\n" for row in rows))).json()["id"]
    quotes: dict[str, dict[str, float]] = {}
    for steps, batch in SIZES:
        spec = {"model": "alallo/tiny-gpt2", "training_file": file_id,
                "hyperparameters": {"max_steps": steps, "batch_size": batch}}
        estimate = (await client.post("/v1/fine_tuning/estimates", json=spec)).json()
        created = (await client.post("/v1/fine_tuning/jobs", json=spec)).json()
        assert created["price"]["estimate"] == {"low": estimate["price"]["low"],
                                                "high": estimate["price"]["high"]}
        quotes[created["id"]] = created["price"]["estimate"]
    finals: dict[str, dict[str, object]] = {}

    async def final(job_id: str) -> None:
        finals[job_id] = await wait_for_job(client, job_id, lambda j: j["status"] in FINAL,
                                            timeout=300)

    async with trio.open_nursery() as nursery:
        for job_id in quotes:
            nursery.start_soon(final, job_id)
    outside = {job_id: (job["price"], quotes[job_id]) for job_id, job in finals.items()
               if not quotes[job_id]["low"] <= job["price"]["charged"]  # type: ignore[index]
               <= quotes[job_id]["high"]}
    assert {job["status"] for job in finals.values()} == {"succeeded"}
    assert outside == {}
    assert all(job["price"]["refunded"] == 0 for job in finals.values())  # type: ignore[index]
