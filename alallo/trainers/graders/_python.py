"""The python grader: the user's ``grade(sample, item)``, run in a sandbox of its own
(:mod:`._sandbox`), never in the server or the trainer.

One sandbox process grades a batch of rows: ``python -I -m alallo.trainers.graders._sandbox``,
in an empty temporary folder, as the trainer user when the caller runs as root (``setpriv``),
in a network namespace of its own where ``unshare --net`` may make one (root: always), with the
limits of :class:`Limits`. What it prints is read and dropped past :data:`OUTPUT_KEPT` bytes.
A row whose call raised, ran out of time or memory, or returned no finite number scores 0 with
its reason; a sandbox that dies or overruns its batch's time scores its remaining rows 0 the
same way. Nothing here raises for the user's code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["OUTPUT_KEPT", "Limits", "PythonScore", "run_python"]

OUTPUT_KEPT = 1024
"""Bytes of the grader's output kept (for the log); the rest is read and dropped."""


@dataclass(frozen=True)
class Limits:
    """A sandbox's limits (OpenAI's python grader: 2 GB, 2 minutes, no network)."""

    wall_s: float = 10.0
    """Seconds one ``grade`` call may take (the batch: this × (rows + 1))."""
    cpu_s: int = 60
    """CPU seconds for the whole batch."""
    memory_mb: int = 1024
    """Address space, MB."""
    file_mb: int = 16
    """The largest file it may write in its folder, MB."""


@dataclass(frozen=True)
class PythonScore:
    """One row's score, or why it is 0."""

    score: float
    error: str | None = None


def run_python(source: str, rows: list[dict[str, Any]], limits: Limits = Limits(),
               user: tuple[int, int] | None = None) -> tuple[list[PythonScore], str]:
    """Grade ``rows`` (each ``{"sample": {...}, "item": {...}}``) with ``source``'s
    ``grade``. Blocking (a thread's work on a server).

    Args:
        user: ``(uid, gid)`` to run as (the trainer user); None: as this process's user,
            or the trainer user ``alallo-trainer``/``nobody`` when this process is root.

    Returns:
        A score per row, in order, and the start of what the grader printed.
    """
    with tempfile.TemporaryDirectory(prefix="alallo-grader-") as folder:
        command = [sys.executable, "-I", "-m", "alallo.trainers.graders._sandbox"]
        if os.geteuid() == 0:
            uid, gid = user or _unprivileged()
            os.chown(folder, uid, gid)
            command = ["unshare", "--net", "setpriv", f"--reuid={uid}", f"--regid={gid}",
                       "--clear-groups", "--", *command]
        elif _user_namespaces():
            command = ["unshare", "--user", "--map-current-user", "--net", "--", *command]
        read_end, write_end = os.pipe()
        request = json.dumps({"source": source, "rows": rows, "limits": asdict(limits)})
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                [*command, str(write_end)], cwd=folder, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=(write_end,),
                env={"PATH": os.defpath, "LANG": "C.UTF-8", "HOME": folder,
                     "PYTHONDONTWRITEBYTECODE": "1"}, start_new_session=True)
        finally:
            os.close(write_end)
        with process:  # its pipes closed on the way out
            output = _Drain(process.stdout)
            feeding = threading.Thread(target=_feed, args=(process.stdin, request), daemon=True)
            feeding.start()
            answers = _read_lines(read_end, started + limits.wall_s * (len(rows) + 1) + 5)
            if process.poll() is None:
                os.killpg(process.pid, 9)
            process.wait()
            output.join(5)
            feeding.join(5)
    return _scores(answers, len(rows), process.returncode), output.kept.decode(errors="replace")


def _scores(answers: list[dict[str, Any]], rows: int, code: int | None) -> list[PythonScore]:
    if len(answers) == 1 and rows != 1 and "error" in answers[0] and code == 3:
        return [PythonScore(0.0, answers[0]["error"])] * rows  # the source did not load
    scores = [PythonScore(0.0, a["error"]) if "error" in a else PythonScore(float(a["score"]))
              for a in answers[:rows]]
    reason = ("the grader's process was killed (out of time or memory)" if code and code < 0
              else f"the grader's process ended ({code}) before grading it")
    return scores + [PythonScore(0.0, reason)] * (rows - len(scores))


def _read_lines(descriptor: int, deadline: float) -> list[dict[str, Any]]:
    """The JSON lines written on ``descriptor`` until it closes or ``deadline`` passes."""
    import selectors

    answers, pending = [], b""
    with os.fdopen(descriptor, "rb", buffering=0) as results, \
            selectors.DefaultSelector() as selector:
        selector.register(results, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0 and selector.select(left):
            chunk = results.read(65536)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                try:
                    answer = json.loads(line)
                except ValueError:
                    answer = {"error": "the grader wrote on its results' descriptor"}
                answers.append(answer if isinstance(answer, dict) else {"error": "?"})
    return answers


def _feed(stdin: Any, request: str) -> None:
    try:
        stdin.write(request.encode())
        stdin.close()
    except OSError:
        pass  # it died first: its rows say why


class _Drain(threading.Thread):
    """Reads a process's output to its end, keeping the first :data:`OUTPUT_KEPT` bytes."""

    def __init__(self, stream: Any) -> None:
        super().__init__(daemon=True)
        self._stream = stream
        self.kept = b""
        self.start()

    def run(self) -> None:
        while chunk := self._stream.read1(65536):
            if len(self.kept) < OUTPUT_KEPT:
                self.kept += chunk[:OUTPUT_KEPT - len(self.kept)]


def _unprivileged() -> tuple[int, int]:
    import pwd

    for name in ("alallo-trainer", "nobody"):
        try:
            entry = pwd.getpwnam(name)
            return entry.pw_uid, entry.pw_gid
        except KeyError:
            continue
    raise OSError("no unprivileged user to run the python grader as (alallo-trainer, nobody)")


_namespaces: bool | None = None


def _user_namespaces() -> bool:
    """Whether ``unshare --user --net`` works for this (unprivileged) user (read once)."""
    global _namespaces
    if _namespaces is None:
        _namespaces = shutil.which("unshare") is not None and subprocess.run(
            ["unshare", "--user", "--map-current-user", "--net", "true"],
            capture_output=True, check=False).returncode == 0
    return _namespaces
