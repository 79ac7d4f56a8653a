"""Embed alallo in a Trio program: no HTTP server, one simulated job, every update printed.

    python examples/embed_trio.py [--data-dir DIR] [--steps N]

``alallo.Runtime`` is the whole engine (store, scheduler, job actors) as a
library: open it with ``async with``, then submit and watch jobs with the
caller's account id. The data directory keeps jobs between runs (a job that
was running continues from its checkpoint when a runtime opens there again).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import structlog
import trio

import alallo

SAMPLE = Path(__file__).with_name("sample.jsonl")


async def main(data_dir: Path, steps: int) -> None:
    async with alallo.Runtime(alallo.Settings(data_dir=data_dir)) as rt:
        account = await rt.authenticate(rt.api_key)  # the local account
        file = await rt.upload_file(account, SAMPLE.name, SAMPLE.read_bytes())
        job = await rt.create_job(account, {
            "model": "alallo/tiny-gpt2", "training_file": file.id, "name": "embedded",
            "hyperparameters": {"max_steps": steps},
            "trainer": {"type": "simulated", "step_delay_s": 0.01}})
        print(f"created {job.id}: {job.status.value} ({job.message})")
        async for item in rt.stream(account, job.id):  # ends after the final state
            data = item.data
            if item.kind == "job":
                progress = data["progress"]
                print(f"[{item.seq}] job {data['status']} {data['message'] or ''} "
                      f"step {progress['step']}/{progress['max_steps']}")
            elif item.kind == "event":
                print(f"[{item.seq}] event {data['alallo_type']}: {data['message']}")
            elif item.kind == "log":
                print(f"[{item.seq}] log {data['text']}")
            elif item.kind == "metrics" and data.get("train_loss") is not None:
                print(f"[{item.seq}] metrics step {data['step']}: loss {data['train_loss']:.4f}")
        final = await rt.get_job(account, job.id)
        print(f"finished {final.status.value}: {final.fine_tuned_model}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path(".alallo-embedded"))
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    # alallo logs with structlog: to stderr here, so that stdout tells the job's story.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    trio.run(main, args.data_dir, args.steps)
