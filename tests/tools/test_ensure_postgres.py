"""tests/tools/ensure_postgres.py as `make test` runs it: which server, its line, and a
private server that is gone when the command ends, is killed, or its owner is."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tools.ensure_postgres import PROBE_VARIABLE, URL_VARIABLE, remove_orphans

TOOL = Path(__file__).with_name("ensure_postgres.py")
PRIVATE_LINE = re.compile(r"postgres: private server 18\.\d+ on 127\.0\.0\.1:(\d+) in (\S+) "
                          r"\(none answers at 127\.0\.0\.1:(\d+): Connection refused\)")

# Run by the tool on its private server: runs the tool twice again, once with its probe
# aimed at that server, once naming it, each on a database the server lacks; prints the
# private server's URL, then each inner tool's line and the URL it passed on.
AGAIN = f"""
import os, subprocess, sys
url = os.environ["{URL_VARIABLE}"]
server = url.rsplit("/", 1)[0]
for variable, database in [("{PROBE_VARIABLE}", "made_by_probe"),
                           ("{URL_VARIABLE}", "made_by_name")]:
    env = {{k: v for k, v in os.environ.items() if k != "{URL_VARIABLE}"}}
    env[variable] = f"{{server}}/{{database}}"
    inner = subprocess.run([sys.executable, {str(TOOL)!r}, "--", sys.executable, "-c",
                            "import os; print(os.environ['{URL_VARIABLE}'])"],
                           env=env, capture_output=True, text=True)
    print(inner.stderr.strip(), inner.stdout.strip(), sep="\\n")
print(url)
sys.exit(3)
"""
# Run by the tool: says it runs, then waits for its stdin to close.
WAIT = "import sys; print('running', flush=True); sys.stdin.read()"


def dead_port() -> int:
    """A port of 127.0.0.1 where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def environment(**env: str) -> dict[str, str]:
    """This environment less the tool's variables, plus ``env``."""
    base = {k: v for k, v in os.environ.items() if k not in {URL_VARIABLE, PROBE_VARIABLE}}
    return {**base, **env}


def no_probe() -> dict[str, str]:
    """This environment with the probe aimed where nothing listens."""
    probe = f"postgresql+psycopg://postgres@127.0.0.1:{dead_port()}/test"
    return environment(**{PROBE_VARIABLE: probe})


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_with_none_answering_a_private_server_runs_the_command_and_is_gone_after() -> None:
    env = no_probe()
    done = subprocess.run([sys.executable, str(TOOL), "--", sys.executable, "-c", AGAIN],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr  # the command's own status
    line = PRIVATE_LINE.fullmatch(done.stderr.strip())
    assert line, done.stderr
    port, directory, probed = int(line[1]), Path(line[2]), line[3]
    assert env[PROBE_VARIABLE].endswith(f":{probed}/test")
    probe_line, probe_url, named_line, named_url, url = done.stdout.splitlines()
    assert url == f"postgresql+psycopg://postgres@127.0.0.1:{port}/test"
    # A server that answers is taken as it is, its database created: the probed one ...
    assert re.fullmatch(rf"postgres: 127\.0\.0\.1:{port} \(running, PostgreSQL 18\.\d+\)",
                        probe_line)
    assert probe_url == f"postgresql+psycopg://postgres@127.0.0.1:{port}/made_by_probe"
    # ... and the named one.
    assert re.fullmatch(rf"postgres: 127\.0\.0\.1:{port} \({URL_VARIABLE}, PostgreSQL 18\.\d+\)",
                        named_line)
    assert named_url == f"postgresql+psycopg://postgres@127.0.0.1:{port}/made_by_name"
    assert not directory.exists()
    assert refused(port)


def test_a_named_server_that_does_not_answer_is_an_error_and_the_command_does_not_run(
        tmp_path: Path) -> None:
    port = dead_port()
    env = environment(**{URL_VARIABLE: f"postgresql+psycopg://postgres@127.0.0.1:{port}/test"})
    done = subprocess.run([sys.executable, str(TOOL), "--", "touch", str(tmp_path / "ran")],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith(f"postgres: no server for the tests. 127.0.0.1:{port}: "
                                  "Connection refused\n")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "ran").exists()


@contextlib.contextmanager
def waiting() -> Iterator[tuple[subprocess.Popen[str], int, Path]]:
    """The tool on a private server running WAIT: its process, the server's port and directory."""
    with subprocess.Popen([sys.executable, str(TOOL), "--", sys.executable, "-c", WAIT],
                          env=no_probe(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as tool:
        assert tool.stderr is not None and tool.stdout is not None
        line = PRIVATE_LINE.fullmatch(tool.stderr.readline().strip())
        assert line
        assert tool.stdout.readline() == "running\n"
        yield tool, int(line[1]), Path(line[2])


def test_sigterm_stops_the_command_and_the_private_server() -> None:
    with waiting() as (tool, port, directory):
        assert not refused(port)
        tool.send_signal(signal.SIGTERM)
        # The command ended, killed by the SIGTERM passed on to it.
        assert tool.wait(timeout=60) == 128 + signal.SIGTERM
    assert not directory.exists()
    assert refused(port)


def test_a_private_server_whose_owner_was_killed_is_removed_by_the_next_run() -> None:
    with waiting() as (tool, port, directory):
        tool.kill()
        tool.wait()
    # (the command, left behind, ended when its stdin closed)
    assert directory.exists() and not refused(port)
    assert directory in remove_orphans(Path(tempfile.gettempdir()))
    assert not directory.exists()
    assert refused(port)
