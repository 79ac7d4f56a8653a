"""Summarise a py-spy collapsed-stack file: the functions that take the most samples.

Run: ``python bench/profile_summary.py PROFILE [--top N] [--match TEXT]``. For
each function (``name (file:line)`` as py-spy writes it) it prints the share
of samples in which it is on the stack (inclusive) and at its top (self).
``--match`` keeps only the stacks that pass through a frame containing TEXT.
Samples of a thread waiting for work (Trio's epoll wait, an idle worker
thread of ``trio.to_thread``) are left out, as py-spy counts some of them as
active; ``--keep-idle`` keeps them.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_LINE = re.compile(r":\d+\)$")
IDLE_LEAVES = ("EpollIOManager.get_events", "WorkerThread._work")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--match", default=None)
    parser.add_argument("--keep-idle", action="store_true")
    args = parser.parse_args()
    inclusive: Counter[str] = Counter()
    self_: Counter[str] = Counter()
    total = 0
    for line in args.profile.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = [_LINE.sub(")", f) for f in stack.split(";")]
        if args.match and not any(args.match in f for f in frames):
            continue
        if not args.keep_idle and frames[-1].startswith(IDLE_LEAVES):
            continue
        n = int(count)
        total += n
        for frame in set(frames):
            inclusive[frame] += n
        self_[frames[-1]] += n
    print(f"{total} samples")
    print(f"{'incl':>6} {'self':>6}  function")
    for frame, n in inclusive.most_common(args.top):
        print(f"{n / total:>6.1%} {self_[frame] / total:>6.1%}  {frame[:150]}")
    print("-- by self time")
    for frame, n in self_.most_common(args.top):
        print(f"{inclusive[frame] / total:>6.1%} {n / total:>6.1%}  {frame[:150]}")


if __name__ == "__main__":
    main()
