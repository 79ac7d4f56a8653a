"""10,000 stream open/close cycles against a real server leave no leak (issue 7).

``stream_cycles.py`` runs, in a process of its own, :func:`gateway.serve`
(Hypercorn's trio worker, a real listening socket) and the clients in one
Trio run, so that it can walk the run's task tree (``trio.lowlevel``) and
read the interpreter's heap (:func:`sys.getallocatedblocks`, the blocks
pymalloc holds: every object and buffer a leak would keep), and prints the
figures. The clients are plain sockets (one request, then read; wsproto for
the WebSocket), 50 at a time; they keep nothing between cycles.

The mix of cycles, each on a fresh connection:

- a finished job's stream read to its end (``event: done``, then the last
  chunk of the body), the client closing after it;
- a live job's stream and the account stream, closed by the client after
  the first frame (FIN), half of them with ``SO_LINGER`` 0 (a reset, as a
  browser tab that is killed);
- a WebSocket (``/v1/ws``) that subscribes to every job, gets one frame and
  drops the connection without a close frame.

After a warm-up of the same mix (imports, caches, free lists and pools fill
once), the figures are taken; after the 10,000 cycles the open-streams gauge
of ``/metrics`` must be back at its start, the task tree no larger, and the
heap within :data:`HEAP_TOLERANCE_BLOCKS` of where it was, read after a full
garbage collection. The tolerance is half a block per cycle: anything a
stream left behind is at least one object per cycle (a task, a bus
subscription or a buffer is dozens), while the noise is bounded and does not
grow with the cycles: Trio drops the deadline-heap entries of finished
cancel scopes (Hypercorn's per-connection ``fail_after``) lazily, keeping up
to 1,000 stale ones (``DEADLINE_HEAP_MIN_PRUNE_THRESHOLD``), a few thousand
blocks measured either way, and the live job moves on meanwhile. The
process's RSS is printed, not asserted: the allocator keeps freed arenas.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO, server_env

pytestmark = [pytest.mark.once_on_postgres, pytest.mark.slow]

RUNNER = Path(__file__).with_name("stream_cycles.py")
HEAP_TOLERANCE_PER_CYCLE = 0.5
"""Heap blocks a cycle may add, on average (see the module's docstring)."""


def test_ten_thousand_stream_cycles_leave_tasks_memory_and_gauges_as_they_were(
        tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(RUNNER), str(tmp_path / "data")],
                         capture_output=True, text=True, timeout=900, check=False,
                         env=server_env(tmp_path / "data", PYTHONPATH=os.pathsep.join(
                             [str(REPO), os.environ.get("PYTHONPATH", "")])))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    before, after, cycles = result["before"], result["after"], result["cycles"]
    print(f"\n{cycles} cycles ({result['counts']}) in {result['seconds']:.1f} s "
          f"({cycles / result['seconds']:.0f}/s); before -> after: tasks {before['tasks']} -> "
          f"{after['tasks']}, heap blocks {before['heap']} -> {after['heap']} "
          f"({after['heap'] - before['heap']:+d}), RSS {before['rss_mib']:.1f} -> "
          f"{after['rss_mib']:.1f} MiB")
    assert cycles == 10_000
    assert sum(result["counts"].values()) == cycles + result["warmup"]
    assert min(result["counts"].values()) >= cycles // 10, "every kind of cycle ran"
    assert before["streams"] == {"job": 0.0, "account": 0.0, "websocket": 0.0}
    assert after["streams"] == before["streams"], "every stream closed counts as closed"
    assert after["tasks"] <= before["tasks"], "no task left behind"
    assert after["heap"] - before["heap"] < HEAP_TOLERANCE_PER_CYCLE * cycles, \
        "no memory left behind"
