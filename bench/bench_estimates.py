"""Do the estimates hold? Calibration of time ranges on a simulated fleet.

Run: ``.venv/bin/python bench/bench_estimates.py`` (``--quick`` for 200 jobs).

A discrete-event run in virtual time (trio's autojump clock): N jobs of
random models, methods, sizes and goals arrive at random on a fleet of
simulated H100, A100 and L40S nodes, through alallo's own plans
(``alallo.capacity._plans``), scheduler actor (``alallo.capacity._scheduler``), estimates
(``alallo.jobs._estimate``) and time left (``alallo.jobs._timeleft``, fed by the
state machine). What really happens is drawn from a noise model: each job's
true step time is its planned step time × a per-job error (log-normal,
sigma 0.15: the time model is off by ~15%) × per-step noise (log-normal,
sigma 0.3), and start-up varies ±20%.

Prints, for the time range shown at submission and at 5% progress: the
share of jobs that finished inside it (targets: >= 90% and >= 95%) and the
median range width relative to the job's actual duration from that moment.
Appends its rows to ``bench/results.json`` when ``--json`` is given.
"""

from __future__ import annotations

import argparse
import logging
import math
import random
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import structlog
import trio
import trio.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _results import append_rows, row  # noqa: E402 - bench/ helper

from actors import open_supervisor  # noqa: E402
from alallo import JobSpec  # noqa: E402
from alallo.capacity._pool import NodeSpec, Pool  # noqa: E402
from alallo.capacity._catalogue import Catalogue  # noqa: E402
from alallo.jobs._estimate import estimate_price, estimate_time  # noqa: E402
from alallo.jobs._job import Job, Progress  # noqa: E402
from alallo.jobs._lifecycle import Created, Started, TrainerReported, apply  # noqa: E402
from alallo.capacity._plans import plan_options  # noqa: E402
from alallo.capacity._scheduler import Acquire, Grant, Release, Scheduler, WaitEstimate  # noqa: E402
from alallo.jobs._timeleft import time_left  # noqa: E402
from alallo.trainers import Progress as TrainerProgress  # noqa: E402

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

MODELS = ["meta-llama/Llama-3.1-8B", "Qwen/Qwen2.5-7B", "mistralai/Mistral-7B-v0.3",
          "meta-llama/Llama-3.1-70B"]
FLEET = [NodeSpec(name=f"{d.lower()}-{i}", device=d, count=8, simulated=True)
         for d in ("H100-80GB", "A100-80GB", "L40S-48GB") for i in range(2)]


async def one_job(n: int, rng: random.Random, scheduler, pool: Pool,  # type: ignore[no-untyped-def]
                  results: list[dict[str, float]]) -> None:
    catalogue = Catalogue()
    model = catalogue.resolve(rng.choice(MODELS))
    adapter = "full" if rng.random() < 0.15 and "70B" not in model.id else "lora"
    precision = "4-bit" if adapter == "lora" and rng.random() < 0.3 else "16-bit"
    spec = JobSpec(model=model.id, training_file="f", adapter=adapter, precision=precision,
                   goal=rng.choice(["lowest_cost", "fastest_finish"]),
                   hyperparameters={"max_steps": rng.randint(50, 1500),
                                    "batch_size": rng.choice([4, 8, 16])})
    max_steps = spec.hyperparameters.max_steps or 1
    options = plan_options(model, spec, pool, max_steps=max_steps,
                           tokens_per_example=rng.uniform(128, 1024))
    if not options.options:
        return
    plan = options.pick(spec.goal)
    submitted = trio.current_time()
    wait = await scheduler.ask(WaitEstimate(plan))
    estimate = estimate_time(plan, wait_s=wait)
    job = Job(id=f"ft-{n}", account_id="a", spec=spec, max_steps=max_steps,
              progress=Progress(max_steps=max_steps), plan=plan, estimate=estimate,
              price_estimate=estimate_price(plan), created_at=int(submitted))
    job = apply(job, Created(now=submitted)).job

    send, receive = trio.open_memory_channel[Grant](1)
    await scheduler.tell(Acquire(job.id, options.options, spec.goal, send, lambda _: None))
    grant = await receive.receive()
    plan = grant.plan
    job = apply(job, Started(now=trio.current_time(), plan=plan)).job
    job_error = rng.lognormvariate(0, 0.15)
    await trio.sleep(plan.startup_s * rng.uniform(0.8, 1.2))
    at_5: tuple[float, float, float] | None = None
    for step in range(1, max_steps + 1):
        await trio.sleep(plan.step_time_s * job_error * rng.lognormvariate(-0.045, 0.3))
        if at_5 is None:
            job = apply(job, TrainerReported(TrainerProgress(step=step, max_steps=max_steps),
                                             now=trio.current_time())).job
            if step >= 0.05 * max_steps and step >= 2:
                left = time_left(job, now=trio.current_time())
                if left is not None:
                    at_5 = (trio.current_time(), left.low_s, left.high_s)
    await scheduler.tell(Release(job.id))
    end = trio.current_time()
    assert at_5 is not None
    t5, low5, high5 = at_5
    results.append({
        "submission_inside": float(estimate.low_s <= end - submitted <= estimate.high_s),
        "submission_late": float(end - submitted > estimate.high_s),
        "pace_late": float(end - t5 > high5),
        "submission_width": (estimate.high_s - estimate.low_s) / (end - submitted),
        "pace_inside": float(low5 <= end - t5 <= high5),
        "pace_width": (high5 - low5) / max(end - t5, 1e-9),
    })


async def run(jobs: int, seed: int) -> list[dict[str, float]]:
    rng = random.Random(seed)
    pool = Pool(FLEET)
    results: list[dict[str, float]] = []
    async with open_supervisor(name="bench") as sup:
        scheduler = await sup.start_child(partial(Scheduler, pool, clock=trio.current_time),
                                          name="scheduler", mailbox_size=10_000)
        async with trio.open_nursery() as nursery:
            for n in range(jobs):
                await trio.sleep(rng.expovariate(1 / 240))  # a job every 4 min on average
                nursery.start_soon(one_job, n, rng, scheduler, pool, results)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 jobs instead of 1,000")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    jobs = args.jobs or (200 if args.quick else 1000)
    started = time.perf_counter()
    results = trio.run(run, jobs, args.seed, clock=trio.testing.MockClock(autojump_threshold=0))
    wall = time.perf_counter() - started
    rows = [
        ("finished inside the range shown at submission", "share",
         statistics.mean(r["submission_inside"] for r in results), 0.90),
        ("finished inside the range shown at 5% progress", "share",
         statistics.mean(r["pace_inside"] for r in results), 0.95),
        ("median range width at submission (of the actual time)", "ratio",
         statistics.median(r["submission_width"] for r in results), math.nan),
        ("median range width at 5% progress (of the time left)", "ratio",
         statistics.median(r["pace_width"] for r in results), math.nan),
    ]
    print(f"{len(results)} jobs on {sum(n.count for n in FLEET)} simulated devices "
          f"(seed {args.seed}; {wall:.1f} s of real time)")
    late = (statistics.mean(r["submission_late"] for r in results),
            statistics.mean(r["pace_late"] for r in results))
    print(f"missed late (past the upper end): {late[0]:.1%} at submission, {late[1]:.1%} at 5%")
    print(f"{'figure':58} {'value':>8} {'target':>8}  met")
    for name, _, value, target in rows:
        met = "-" if math.isnan(target) else ("yes" if value >= target else "NO")
        shown = "-" if math.isnan(target) else f">= {target:.0%}"
        print(f"{name:58} {value:8.1%} {shown:>8}  {met}")
    if args.json:
        append_rows(args.json, [row(f"estimates: {name}", value, unit, None,
                                    None if math.isnan(target) else target)
                                for name, unit, value, target in rows])


if __name__ == "__main__":
    main()
