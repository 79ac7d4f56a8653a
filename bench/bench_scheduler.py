"""The scheduler at the sizes of a fleet: placement decisions per second with many jobs
queued on many simulated nodes, and the delay from capacity freeing to the next job's start.

Run: ``.venv/bin/python bench/bench_scheduler.py`` (10,000 jobs on 1,000 nodes; ``--quick``:
2,000 jobs on 200 nodes; ``--jobs N --nodes M``).

The scheduler actor (``alallo.capacity._scheduler``) alone, in one Trio process: a pool
of 8-GPU nodes (H100, A100 and L40S, a third each), and jobs of 1, 2, 4 or 8 devices
asking for them, as many as the fleet can hold five times over:

- **placement decisions/s**: every job sends its ``Acquire`` (with ``lowest_cost`` or
  ``fastest_finish``); the clock runs from the first until the scheduler has answered all of
  them (a grant, or a place in the queue) - one decision each;
- **queue-to-start delay**: with the fleet full and the rest queued, jobs release their
  devices one at a time (200 of them); each delay is from the ``Release`` sent to the next
  grant received, p50 and p99.

No target yet (issue 20 asks for the figures first); the ratio column stays empty.
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import structlog
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _results import append_rows, row  # noqa: E402 - bench/ helper

from actors import open_supervisor  # noqa: E402
from alallo.capacity._pool import NodeSpec, Pool  # noqa: E402
from alallo.capacity._scheduler import Acquire, Grant, QueueSnapshot, Release, Scheduler  # noqa: E402
from alallo.jobs import DEVICE_TYPES, Plan  # noqa: E402

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
DEVICES = ("H100-80GB", "A100-80GB", "L40S-48GB")


def options(pick: random.Random) -> tuple[Plan, ...]:
    """A job's plans on each device type: the same devices, each type's price and pace."""
    devices = pick.choice((1, 2, 4, 8))
    steps = pick.randint(100, 5000)
    return tuple(Plan(device_type=name, devices=devices, memory_gb=10.0,
                      price_per_hour=DEVICE_TYPES[name].price_per_hour * devices,
                      step_time_s=0.5 / (1 + i), startup_s=30.0, max_steps=steps)
                 for i, name in enumerate(DEVICES))


async def main(jobs: int, nodes: int, releases: int, json_path: Path | None) -> None:
    pick = random.Random(7)
    pool = Pool([NodeSpec(name=f"n{i}", device=DEVICES[i % 3], count=8) for i in range(nodes)])
    grants: dict[str, trio.MemoryReceiveChannel[Grant]] = {}
    answered = 0
    all_answered = trio.Event()

    def told(job_id: str, position: int) -> None:
        nonlocal answered
        if job_id not in positions:
            positions[job_id] = position
            answered += 1
            if answered == jobs:
                all_answered.set()

    positions: dict[str, int] = {}
    async with open_supervisor(name="bench") as sup:
        scheduler = await sup.start_child(partial(Scheduler, pool), name="scheduler")
        requests = []
        for n in range(jobs):
            send, receive = trio.open_memory_channel[Grant](1)
            job_id = f"job-{n}"
            grants[job_id] = receive
            requests.append(Acquire(job_id, options(pick), pick.choice(
                ("lowest_cost", "fastest_finish")), send, partial(told, job_id)))
        started = time.perf_counter()
        for request in requests:
            await scheduler.tell(request)
        await scheduler.ask(QueueSnapshot())  # every Acquire before it has been handled
        granted = {job_id for job_id, receive in grants.items()
                   if receive.statistics().current_buffer_used}
        elapsed = time.perf_counter() - started
        for job_id in granted:
            told(job_id, 0)
        rate = jobs / elapsed
        queue = await scheduler.ask(QueueSnapshot())
        print(f"{jobs} jobs on {nodes} nodes: {len(granted)} placed, {len(queue)} queued; "
              f"{rate:,.0f} decisions/s ({elapsed:.2f} s)")

        delays = []
        running = sorted(granted)
        for job_id in running[:releases]:
            waiting = set(await scheduler.ask(QueueSnapshot()))
            sent = time.perf_counter()
            await scheduler.tell(Release(job_id))
            await scheduler.ask(QueueSnapshot())  # the release has been handled
            handled = time.perf_counter()
            if any(grants[j].statistics().current_buffer_used for j in waiting):
                delays.append(handled - sent)
        p50 = statistics.median(delays) * 1000 if delays else float("nan")
        p99 = (statistics.quantiles(delays, n=100)[98] * 1000 if len(delays) > 1
               else float("nan"))
        print(f"queue-to-start after a release ({len(delays)} of {releases} releases started "
              f"a job): p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    if json_path is not None:
        size = f"{jobs:,} jobs, {nodes:,} nodes"
        append_rows(json_path, [
            row(f"scheduler ({size}): placement decisions/s", rate, "1/s", None, None),
            row(f"scheduler ({size}): p99 release to next start", p99, "ms", None, None),
            row(f"scheduler ({size}): p50 release to next start", p50, "ms", None, None)])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 jobs on 200 nodes")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--nodes", type=int, default=None)
    parser.add_argument("--releases", type=int, default=200)
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    trio.run(main, args.jobs or (2_000 if args.quick else 10_000),
             args.nodes or (200 if args.quick else 1_000), args.releases, args.json)
