"""Trainer processes: lines in order, stopped with their children, never orphaned."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import trio

from alallo._trainer_process import TrainerProcess


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


async def test_lines_arrive_in_order_and_the_exit_code_is_kept(tmp_path: Path) -> None:
    script = "import sys\nfor i in range(3): print(i)\nprint('err', file=sys.stderr)\nsys.exit(3)"
    process = TrainerProcess([sys.executable, "-c", script], cwd=tmp_path,
                             output_log=tmp_path / "out.log", grace_s=1)
    lines: list[str] = []

    async def collect(line: str) -> None:
        lines.append(line)

    assert await process.run(collect) == 3
    assert lines == ["0", "1", "2", "err"]
    assert (tmp_path / "out.log").read_text() == "0\n1\n2\nerr\n"


async def test_trainer_outlives_the_thread_cache(tmp_path: Path) -> None:
    """Regression: forking from a trio worker thread made PR_SET_PDEATHSIG kill the
    trainer when that idle thread retired (~10 s)."""
    await trio.to_thread.run_sync(lambda: None)  # a worker thread exists, then idles
    script = "import time\ntime.sleep(12.5)\nprint('alive')"
    process = TrainerProcess([sys.executable, "-c", script], cwd=tmp_path,
                             output_log=tmp_path / "out.log", grace_s=1)
    lines: list[str] = []

    async def collect(line: str) -> None:
        lines.append(line)

    assert await process.run(collect) == 0
    assert lines == ["alive"]


async def test_cancel_stops_the_whole_group_even_if_sigterm_is_ignored(tmp_path: Path) -> None:
    script = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    process = TrainerProcess([sys.executable, "-c", script], cwd=tmp_path,
                             output_log=tmp_path / "out.log", grace_s=0.5)
    grandchild: list[int] = []

    async def collect(line: str) -> None:
        grandchild.append(int(line))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(process.run, collect)
            while not grandchild:
                await trio.sleep(0.02)
            nursery.cancel_scope.cancel()
    assert process.pid is not None and not alive(process.pid)
    await trio.sleep(0.2)
    assert not alive(grandchild[0]), "the trainer's own children stop too"
    assert process.returncode == -9


async def test_missing_command_raises(tmp_path: Path) -> None:
    process = TrainerProcess(["/no/such/trainer"], cwd=tmp_path, output_log=tmp_path / "o",
                             grace_s=1)

    async def ignore(line: str) -> None:
        pass

    try:
        await process.run(ignore)
    except FileNotFoundError:
        return
    raise AssertionError("a missing command must raise FileNotFoundError")
