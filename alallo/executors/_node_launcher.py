"""The process a Ray job runs on its node: it starts the trainer and fences its attempt.

``python -m alallo.executors._node_launcher <attempt dir>/launch.json`` is the entrypoint of
every Ray job alallo submits (:mod:`alallo.executors._ray`). The launch file, written by the
server on the storage every node shares, gives the trainer's command, the job's variables,
the run's id and the job's *fence file*. The launcher:

- starts the trainer with a scrubbed environment (:func:`~alallo.executors._env.scrubbed_environment`,
  keeping the ``CUDA_VISIBLE_DEVICES`` Ray gave this job) in the attempt's directory, in a
  process group of its own that dies with the launcher (``PR_SET_PDEATHSIG``), and writes the
  trainer's pid to ``trainer.pid`` there; the trainer's output is the launcher's, which Ray
  streams to the server;
- stops the trainer's whole group when Ray stops the job (SIGTERM, then SIGKILL after the
  grace period);
- every :data:`FENCE_CHECK_S` seconds reads the fence file, which names the job's current
  run: when it names another run, this attempt has been superseded (its node was taken
  for lost and the job moved on), so it stops the trainer and exits :data:`SUPERSEDED`.
  A node cut off from the cluster keeps its processes running (Ray marks the job failed,
  but nothing stops the trainer: measured in ``../shared/research/clusters-and-models.md``):
  this is what stops it. The trainer checks the same file before each checkpoint
  (``ALALLO_FENCE_FILE``, :mod:`alallo.trainers._fence`).

A launch file that cannot be read means the node does not share the server's storage: one
protocol error line says so, and the launcher exits 2.

It imports little beside the standard library (``_env``, ``_posix``, the trainers' fence).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import IO

from alallo.trainers._fence import SUPERSEDED, current_run, superseded

from ._env import scrubbed_environment
from ._posix import die_with_parent, stop_group, write_atomically

__all__ = ["EXIT_STATUS", "FENCE_CHECK_S", "OUTPUT", "main"]

FENCE_CHECK_S = 2.0
"""Seconds between two reads of the fence file."""
OUTPUT = "trainer-output.log"
"""The trainer's output, in the attempt's directory: what the server follows."""
EXIT_STATUS = "exit-status"
"""Written (atomically) in the attempt's directory when the launcher ends: its exit status."""


def _say(kind: str, message: str) -> None:
    """One line of the trainer protocol, from the launcher."""
    print(json.dumps({"type": "error", "kind": kind, "message": message}), flush=True)


def main(argv: list[str]) -> int:
    """Run the trainer of one launch file; its exit status (or the launcher's own)."""
    launch_file = Path(argv[1])
    try:
        launch = json.loads(launch_file.read_text())
    except (OSError, ValueError) as exc:
        _say("platform", f"cannot read {launch_file} on this node ({exc}): the directory "
                         "ALALLO_SHARED_DIR names must be shared with every Ray node")
        return 2
    cwd = launch_file.parent
    env = dict(launch["env"])
    if "CUDA_VISIBLE_DEVICES" in os.environ:  # the devices Ray gave this job
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    fence, run_id = launch.get("fence_file"), launch.get("run_id")
    env.update({"ALALLO_FENCE_FILE": fence or "", "ALALLO_RUN_ID": run_id or ""})
    grace_s = float(launch.get("grace_s", 5.0))
    started: list[tuple[subprocess.Popen[bytes], threading.Thread]] = []

    def end(code: int) -> int:
        for _, copier in started:
            copier.join(timeout=10)
        write_atomically(cwd / EXIT_STATUS, str(code))
        return code

    def stop(signum: int, frame: FrameType | None) -> None:
        for trainer, _ in started:
            stop_group(trainer, grace_s)
        sys.exit(end(128 + signum))

    # Before the trainer starts: a stop that comes at once stops it too (it dies with us).
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    trainer = subprocess.Popen(
        launch["command"], cwd=cwd, env=scrubbed_environment(env), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True, preexec_fn=die_with_parent)
    assert trainer.stdout is not None
    copier = threading.Thread(target=_copy, args=(trainer.stdout, cwd / OUTPUT), daemon=True)
    copier.start()
    started.append((trainer, copier))
    write_atomically(cwd / "trainer.pid", str(trainer.pid))  # never read half-written
    while True:
        try:
            return end(trainer.wait(timeout=FENCE_CHECK_S))
        except subprocess.TimeoutExpired:
            pass
        if superseded(fence, run_id):
            print(f"Run {run_id} was superseded by {current_run(fence)}: stopping it on "
                  "this node", flush=True)
            stop_group(trainer, grace_s)
            return end(SUPERSEDED)


def _copy(source: IO[bytes], output: Path) -> None:
    """Every byte the trainer prints, as it comes: to the job's output file on the shared
    storage (which the server follows) and to this process's stdout (Ray's job log)."""
    with output.open("ab") as out:
        while chunk := os.read(source.fileno(), 65536):
            out.write(chunk)
            out.flush()
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
