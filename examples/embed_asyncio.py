"""Embed alallo in an asyncio program: the Trio runtime as a guest of asyncio's event loop.

    python examples/embed_asyncio.py [--data-dir DIR] [--steps N]

``alallo.aio.open_runtime`` opens an :class:`alallo.Runtime` in Trio's guest mode
(``trio.lowlevel.start_guest_run``): Trio's scheduler runs its steps as callbacks of
asyncio's loop, on the same thread, so the runtime's tasks and the app's take turns and
nothing needs a lock. What it gives has the runtime's methods as coroutines and its
streams as async iterators (``docs/user-guide.md``, "From an asyncio app").

An app that can run a server talks to it with ``alallo.AsyncClient`` instead, which
runs under asyncio as it is.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

import alallo
import alallo.aio

SAMPLE = Path(__file__).with_name("sample.jsonl")


async def main(data_dir: Path, steps: int) -> None:
    async with alallo.aio.open_runtime(alallo.Settings(data_dir=data_dir)) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, SAMPLE.name, SAMPLE.read_bytes())
        job = await rt.create_job(account, {
            "model": "alallo/tiny-gpt2", "training_file": file.id, "name": "from asyncio",
            "hyperparameters": {"max_steps": steps},
            "trainer": {"type": "simulated", "step_delay_s": 0.01}})
        print(f"created {job.id}: {job.status.value} ({job.message})")
        ticks = 0

        async def heartbeat() -> None:  # the asyncio app keeps running meanwhile
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        beating = asyncio.create_task(heartbeat())
        async for item in rt.stream(account, job.id):
            if item.kind == "job":
                print(f"[{item.seq}] job {item.data['status']} "
                      f"step {item.data['progress']['step']}/{item.data['progress']['max_steps']}")
            elif item.kind == "event":
                print(f"[{item.seq}] event {item.data['alallo_type']}: {item.data['message']}")
        beating.cancel()
        final = await rt.get_job(account, job.id)
        print(f"finished {final.status.value}: {final.fine_tuned_model} "
              f"(asyncio ran {ticks} heartbeats meanwhile)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path(".alallo-embedded"))
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    # The runtime logs through the standard library's logging: here to stderr, so that
    # stdout tells the job's story.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    asyncio.run(main(args.data_dir, args.steps))
