"""The python grader's sandbox, inside: ``python -I -m alallo.trainers.graders._sandbox
RESULTS_FD`` reads ``{"source", "rows": [{"sample", "item"}], "limits": {...}}`` on stdin, shuts
itself in, runs the user's ``grade(sample, item)`` on each row and writes one JSON line per
row to the file descriptor ``RESULTS_FD``: ``{"score": float}`` or ``{"error": "..."}``.

Shut in, in this order, before any of the user's code runs (the parent has already put it in
an empty folder, as the trainer user, in a network namespace of its own where it can):

- resource limits: address space, CPU seconds, file size, open files, no new process or
  thread (``RLIMIT_NPROC`` 0: a fork fails), no core dump;
- Landlock: the Python installation readable (so ``import`` works), the empty folder
  writable, nothing else of the file system; no TCP bind or connect, no signal or abstract
  socket outside itself (:mod:`._landlock`);
- each call has its own wall-time limit (``SIGALRM``): a loop that never ends scores 0 and
  the next row is graded.

The user's prints go to stdout, which the parent reads (the first KiB of it for the log) and
drops. Standard library only, and nothing of alallo but :mod:`._landlock`.
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import sys
import sysconfig
from types import FrameType
from typing import Any

from ._landlock import restrict

__all__ = ["main"]


class _TimedOut(BaseException):
    """A call ran past its wall-time limit (a BaseException: ``except Exception`` in the
    user's code does not swallow it)."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise _TimedOut


def _shut_in(limits: dict[str, Any]) -> None:
    memory = int(limits["memory_mb"]) * 1024 * 1024
    for name, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CORE, 0),
                        (resource.RLIMIT_CPU, int(limits["cpu_s"])),
                        (resource.RLIMIT_FSIZE, int(limits["file_mb"]) * 1024 * 1024),
                        (resource.RLIMIT_NOFILE, 32), (resource.RLIMIT_NPROC, 0)):
        resource.setrlimit(name, (value, value))
    paths = sysconfig.get_paths()
    readable = sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, paths["stdlib"],
                       paths["platstdlib"], paths["purelib"], paths["platlib"],
                       os.path.dirname(os.path.realpath(sys.executable)),
                       "/dev/null", "/dev/urandom"})
    restrict(readable, [os.getcwd()])


def _grade(grade: Any, row: dict[str, Any], wall_s: float) -> dict[str, Any]:
    signal.setitimer(signal.ITIMER_REAL, wall_s)
    try:
        score = grade(row["sample"], row["item"])
    except _TimedOut:
        return {"error": f"grade did not return in {wall_s:g} s"}
    except MemoryError:
        return {"error": "grade ran out of memory"}
    except Exception as exc:  # the user's error: reported by line, scored 0
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        return {"error": f"grade returned {score!r:.80}, not a finite number"}
    return {"score": float(score)}


def main(argv: list[str]) -> int:
    """Grade the rows of stdin's request; 0, or 3 when the source cannot be loaded."""
    results = os.fdopen(int(argv[1]), "w", buffering=1)
    request = json.loads(sys.stdin.read())
    _shut_in(request["limits"])
    signal.signal(signal.SIGALRM, _on_alarm)
    wall_s = float(request["limits"]["wall_s"])
    namespace: dict[str, Any] = {"__name__": "grader"}
    signal.setitimer(signal.ITIMER_REAL, wall_s)
    try:
        exec(compile(request["source"], "grader.py", "exec"), namespace)  # noqa: S102 - sandboxed
        grade = namespace["grade"]
    except _TimedOut:
        results.write(json.dumps({"error": f"the source did not load in {wall_s:g} s"}) + "\n")
        return 3
    except BaseException as exc:  # noqa: BLE001 - whatever it is, it is the user's
        results.write(json.dumps({"error": f"the source did not load: "
                                           f"{type(exc).__name__}: {exc}"[:500]}) + "\n")
        return 3
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    for row in request["rows"]:
        results.write(json.dumps(_grade(grade, row, wall_s)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
