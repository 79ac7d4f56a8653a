"""Does the price quoted hold the charge? 20 real tiny TRL jobs of different sizes.

Run: ``.venv/bin/python bench/bench_quotes.py`` (``--quick``: the same 20 jobs; they are
short).

An embedded :class:`alallo.Runtime` (SQLite, two local slots, the warm trainer) runs
the tiny model on 24 short examples, 1 to 21 steps, batches of 1, 2 and 4. For each job
the quote is the price range the job was created with (the estimate's); the figure is
the share of jobs whose charge fell inside it (target: all), and, for scale, the median
charge as a share of the quote's top.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
from pathlib import Path

import structlog
import trio

from _results import append_rows, row
from alallo import Runtime, Settings

SIZES = [(steps, batch) for steps in (1, 2, 3, 5, 8, 13, 21) for batch in (1, 2, 4)][:20]

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


async def main(json_path: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix="alallo-bench-quotes-") as scratch:
        async with Runtime(Settings(data_dir=Path(scratch), max_concurrent_jobs=2)) as rt:
            account = await rt.authenticate(rt.api_key)
            data = b"".join(json.dumps({"text": f"Example {i}: " + "the cat sat. " * (i % 5 + 1)})
                            .encode() + b"\n" for i in range(24))
            file = await rt.upload_file(account, "tiny.jsonl", data)
            jobs = [await rt.create_job(account, {
                "model": "alallo/tiny-gpt2", "training_file": file.id,
                "hyperparameters": {"max_steps": steps, "batch_size": batch}})
                for steps, batch in SIZES]
            finals = [await rt.wait_for_final(account, job.id) for job in jobs]
    inside, shares = 0, []
    for job, final in zip(jobs, finals, strict=True):
        low, high = job.price_estimate
        charged = final.charged - final.refunded
        ok = final.status.value == "succeeded" and low <= charged <= high
        inside += ok
        shares.append(charged / high if high else 0.0)
        print(f"{job.max_steps:>3} steps, batch {job.spec.hyperparameters.batch_size}: "
              f"charged ${charged:.9f}, quote ${low:.9f} to ${high:.9f}"
              f"{'' if ok else '  OUTSIDE'}")
    share = inside / len(jobs)
    median = statistics.median(shares)
    print(f"{inside} of {len(jobs)} charges inside their quote (target: all); "
          f"median charge {median:.2f} of the quote's top")
    if json_path is not None:
        append_rows(json_path, [
            row("quotes: real tiny jobs charged inside the price quoted", share, "share",
                None, 1.0),
            row("quotes: median charge as a share of the quote's top", median, "ratio",
                None, None)])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the same 20 jobs")
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    trio.run(main, args.json)
    sys.exit(0)
