"""Trainer processes: lines in order, stopped with their children, never orphaned."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
from support import wait_exited

from alallo.executors import TrainerProcess, _local, _warm

pytestmark = pytest.mark.unit


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


async def test_trainer_outlives_the_thread_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: forking from a trio worker thread made PR_SET_PDEATHSIG kill the
    trainer when that idle thread retired (after 10 s; 0.2 s here)."""
    monkeypatch.setattr(trio._core._thread_cache, "IDLE_TIMEOUT", 0.2)
    await trio.to_thread.run_sync(lambda: None)  # a worker thread exists, then idles
    # Not a wait: the trainer runs past the retirement of every idle worker thread.
    script = "import time\ntime.sleep(1.5)\nprint('alive')"
    process = TrainerProcess([sys.executable, "-c", script], cwd=tmp_path,
                             output_log=tmp_path / "out.log", grace_s=1)
    lines: list[str] = []

    async def collect(line: str) -> None:
        lines.append(line)

    assert await process.run(collect) == 0
    assert lines == ["alive"]


async def test_the_event_loop_runs_while_a_trainer_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A start that waits (a loaded machine) holds up its own job only: the server's other
    tasks run meanwhile, here the one that lets the start go on."""
    entered, go = threading.Event(), threading.Event()
    real_spawn = _local._spawn

    def slow_spawn(*args: Any) -> subprocess.Popen[bytes]:
        entered.set()
        released = go.wait(timeout=10)  # on the Trio thread, nothing could set it
        assert released, "the event loop did not run while a trainer was starting"
        return real_spawn(*args)

    monkeypatch.setattr(_local, "_spawn", slow_spawn)
    process = TrainerProcess([sys.executable, "-c", "print('up')"], cwd=tmp_path,
                             output_log=tmp_path / "out.log", grace_s=1)
    lines: list[str] = []

    async def collect(line: str) -> None:
        lines.append(line)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(process.run, collect)
        await trio.to_thread.run_sync(entered.wait)  # the start is under way
        go.set()  # from the event loop, while the start waits
    assert lines == ["up"]
    assert process.returncode == 0


async def test_a_trainer_started_while_its_caller_is_cancelled_is_stopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancel that comes while the trainer starts does not leave it running unowned."""
    started = threading.Event()
    go = threading.Event()
    real_spawn = _local._spawn

    def slow_spawn(*args: Any) -> subprocess.Popen[bytes]:
        started.set()
        go.wait(timeout=30)
        return real_spawn(*args)

    monkeypatch.setattr(_local, "_spawn", slow_spawn)
    process = TrainerProcess([sys.executable, "-c", "import time; time.sleep(60)"],
                             cwd=tmp_path, output_log=tmp_path / "out.log", grace_s=1)

    async def ignore(line: str) -> None:
        pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(process.run, ignore)
        await trio.to_thread.run_sync(started.wait)
        nursery.cancel_scope.cancel()  # while the start is under way
        go.set()
    assert process.pid is not None
    await wait_exited([process.pid], timeout=10)
    assert not alive(process.pid)


async def test_cancel_stops_the_whole_group_even_if_sigterm_is_ignored(tmp_path: Path) -> None:
    # Not waits: the trainer and its child run until they are killed.
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
    printed = trio.Event()

    async def collect(line: str) -> None:
        grandchild.append(int(line))
        printed.set()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(process.run, collect)
            await printed.wait()
            nursery.cancel_scope.cancel()
    assert process.pid is not None and not alive(process.pid)
    await wait_exited(grandchild, timeout=5)
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


# -- warm trainers: forked from a process that has imported the trainer already --------

STUB_TRAINER = '''
import os, signal, subprocess, sys, time

if os.environ.get("STUB_BREAK_WARM") and sys.argv[0].endswith("_warm_process.py"):
    raise RuntimeError("this module cannot be imported in a warm process")

def main(argv):
    if argv[0] == "report":
        print(os.getcwd())
        print(os.environ.get("STUB_VAR"))
        print(os.getpgid(0) == os.getpid())
        print(open("/proc/self/cmdline", "rb").read().replace(b"\\0", b" ").decode().strip())
        print("err", file=sys.stderr)
        return 3
    if argv[0] == "environ":
        print(sorted(os.environ))
        print(open("/proc/self/environ", "rb").read().decode(errors="replace"))
        return 0
    if argv[0] == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        # Not a wait: a child of the trainer that runs until it is killed.
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print(child.pid, flush=True)
    else:
        print("started", flush=True)
    time.sleep(60)  # not a wait: a trainer that runs until it is killed
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


@pytest.fixture
def stub_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A trainer module ``main(argv)`` the warm process may serve, named for this test."""
    name = f"stub_trainer_{os.getpid()}_{tmp_path.name.replace('-', '_')}"
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / f"{name}.py").write_text(STUB_TRAINER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(modules), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setattr(_warm, "WARM_MODULES", {*_warm.WARM_MODULES, name})
    return name


def warm_process_of(module: str) -> _warm.WarmProcess:
    found = [w for w in _warm.warm_processes() if w.module == module and w.alive()]
    assert len(found) == 1
    return found[0]


async def test_a_warm_trainer_gets_its_cwd_env_group_title_and_exit_code(
        tmp_path: Path, stub_module: str) -> None:
    command = [sys.executable, "-m", stub_module, "report"]
    process = TrainerProcess(command, cwd=tmp_path, output_log=tmp_path / "out.log", grace_s=1,
                             env={"STUB_VAR": "job-1"}, warm=True)
    lines: list[str] = []

    async def collect(line: str) -> None:
        lines.append(line)

    assert await process.run(collect) == 3
    assert process.started_warm
    assert lines == [str(tmp_path), "job-1", "True", " ".join(command), "err"]
    assert (tmp_path / "out.log").read_text() == "\n".join(lines) + "\n"
    warm = warm_process_of(stub_module)
    assert process.pid != warm.pid


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
async def test_a_trainer_gets_a_scrubbed_environment_never_the_servers(
        tmp_path: Path, stub_module: str, monkeypatch: pytest.MonkeyPatch, warm: bool) -> None:
    monkeypatch.setenv("ALALLO_DATABASE_URL", "postgresql://alallo:server-secret@db/alallo")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-secret")
    command = [sys.executable, "-m", stub_module, "environ"]
    process = TrainerProcess(command, cwd=tmp_path, output_log=tmp_path / "out.log", grace_s=1,
                             env={"JOB_VAR": "mine"}, shared_env={"SHARED": "all"}, warm=warm)
    lines: list[str] = []

    async def collect(line: str) -> None:
        lines.append(line)

    assert await process.run(collect) == 0
    assert process.started_warm is warm
    names, environ_file = lines
    assert "JOB_VAR" in names and "SHARED" in names and "PATH" in names
    assert "ALALLO_DATABASE_URL" not in names and "OPENAI_API_KEY" not in names
    # What the process (and, warm, the process it was forked from) started with.
    assert "server-secret" not in environ_file


async def test_cancel_stops_a_warm_trainers_whole_group(tmp_path: Path, stub_module: str) -> None:
    process = TrainerProcess([sys.executable, "-m", stub_module, "stubborn"], cwd=tmp_path,
                             output_log=tmp_path / "out.log", grace_s=0.5, warm=True)
    grandchild: list[int] = []
    printed = trio.Event()

    async def collect(line: str) -> None:
        grandchild.append(int(line))
        printed.set()

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(process.run, collect)
            await printed.wait()
            nursery.cancel_scope.cancel()
    assert process.started_warm
    assert process.pid is not None and not alive(process.pid)
    await wait_exited(grandchild, timeout=5)
    assert not alive(grandchild[0]), "the trainer's own children stop too"
    assert process.returncode == -9
    assert warm_process_of(stub_module).alive(), "the warm process serves the next job"


async def test_a_warm_process_that_cannot_fork_the_trainer_starts_it_cold(
        tmp_path: Path, stub_module: str) -> None:
    # The warm process dies while it imports (it gets the variables every trainer gets).
    process = TrainerProcess([sys.executable, "-m", stub_module, "report"], cwd=tmp_path,
                             output_log=tmp_path / "out.log", grace_s=1, warm=True,
                             shared_env={"STUB_BREAK_WARM": "1"})
    lines: list[str] = []

    async def collect(line: str) -> None:
        lines.append(line)

    assert await process.run(collect) == 3
    assert not process.started_warm
    assert lines[:3] == [str(tmp_path), "None", "True"] and lines[-1] == "err"


SERVER = '''
import sys, trio
from pathlib import Path
from alallo.executors import _warm
from alallo.executors import TrainerProcess

async def main(module, cwd):
    process = TrainerProcess([sys.executable, "-m", module, "sleep"], cwd=Path(cwd),
                             output_log=Path(cwd) / "out.log", grace_s=1, warm=True)
    started = trio.Event()

    async def on_line(line):
        started.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(process.run, on_line)
        await started.wait()  # the trainer's first line: it runs
        print(process.pid, _warm.warm_processes()[0].pid, flush=True)

_warm.WARM_MODULES.add(sys.argv[1])
trio.run(main, sys.argv[1], sys.argv[2])
'''


async def test_kill_9_of_the_server_leaves_no_warm_process_and_no_trainer(
        tmp_path: Path, stub_module: str) -> None:
    server = subprocess.Popen([sys.executable, "-c", SERVER, stub_module, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        line = await trio.to_thread.run_sync(server.stdout.readline)
        trainer, warm = (int(pid) for pid in line.split())
        assert alive(trainer) and alive(warm)
    finally:
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()
    await wait_exited([trainer, warm], timeout=10)
    assert not alive(warm), "the warm process dies with the server"
    assert not alive(trainer), "the trainer dies with the warm process"


COLD_SERVER = '''
import sys, trio
from pathlib import Path
from alallo.executors import TrainerProcess

async def main(cwd):
    script = "import time; print('up', flush=True); time.sleep(60)"
    process = TrainerProcess([sys.executable, "-c", script], cwd=Path(cwd),
                             output_log=Path(cwd) / "out.log", grace_s=1)
    started = trio.Event()

    async def on_line(line):
        started.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(process.run, on_line)
        await started.wait()
        print(process.pid, flush=True)

trio.run(main, sys.argv[1])
'''


async def test_kill_9_of_the_server_leaves_no_cold_trainer(tmp_path: Path) -> None:
    server = subprocess.Popen([sys.executable, "-c", COLD_SERVER, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        trainer = int(await trio.to_thread.run_sync(server.stdout.readline))
        assert alive(trainer)
    finally:
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()
    await wait_exited([trainer], timeout=10)
    assert not alive(trainer), "the trainer dies with the server (its parent-death signal)"


async def test_a_command_that_is_not_executable_raises(tmp_path: Path) -> None:
    script = tmp_path / "trainer.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    process = TrainerProcess([str(script)], cwd=tmp_path, output_log=tmp_path / "o",
                             grace_s=1)

    async def ignore(line: str) -> None:
        pass

    with pytest.raises(PermissionError):
        await process.run(ignore)
