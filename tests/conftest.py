"""Fixtures shared by the whole suite (a real alallo server in its own process), and the
markers that say what a test needs.

Markers (registered in pyproject.toml; ``make test`` selects with ``-m``):

- ``unit``: no store: pure code, actors, trainer programs, the client against a fake server.
  Whole folders whose subject knows no store are marked here (``FOLDER_MARKERS``); a loose
  module says ``pytestmark = pytest.mark.unit``. Runs once, in the SQLite pass.
- ``any_backend``: uses a store that is not its subject; runs once, in the SQLite pass.
- ``once_on_postgres``: the same, but runs once in the PostgreSQL pass: a few long tests,
  so that the two passes, which run at once, end together (``--durations`` of both).
- ``postgres``: needs PostgreSQL itself (tests/cluster/: many processes on one database);
  deselected when ``ALALLO_TEST_DATABASE`` is sqlite.
- ``integration``: everything else (a runtime or a server on the test backend); added here to
  every test not marked otherwise, so a new test runs on both backends unless it says why not.
- ``browser``: drives Chromium (added here to every test using the ``browser`` fixture).
- ``ray``: uses the real local Ray cluster (the session fixture ``ray_cluster``,
  ``tests/ray_cluster.py``; its stores are SQLite files of its own, so it runs in the SQLite
  pass only); added here to every test using it, with the ``xdist_group`` that keeps them in
  one pytest-xdist worker, so that one cluster serves them all.
- ``slow``: real training or thousands of streams; ``make test-quick`` leaves them out.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ray_cluster import ray_cluster  # noqa: F401 - the session's Ray cluster, for tests using it
from support import (
    TEST_DATABASE,
    LiveServer,
    Servers,
    created_databases,
    database_url_for,
    drop_databases,
    drop_orphan_databases,
    new_database_url,
    start_server,
    stop_server,
)

from alallo.settings import Settings

# No test reaches the real Hugging Face hub (there is no network but the package index); set
# before anything imports huggingface_hub, which reads it once (nothing above does). The tests
# of hub downloads serve a hub of their own (tests/fake_hub.py).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Models are served with transformers unless a test asks for vLLM (tests/serving/, one engine
# for the module): a vLLM engine takes half a minute to start on two cores.
os.environ.setdefault("ALALLO_SERVING_ENGINE", "transformers")

FOLDER_MARKERS = {"actors": "unit", "trainers": "unit", "tools": "unit", "cluster": "postgres"}
"""Test folders (under tests/) whose every test needs the same: actors, trainer programs and
the test tools never open a store; the cluster's tests are many processes on one PostgreSQL."""

_ONE_PASS = ("unit", "any_backend", "once_on_postgres", "postgres")
RUN_FIRST = ("test_stream_leaks.py", "test_ray.py", "test_recovery.py", "test_ranks.py",
             "test_trl.py", "test_two_servers.py")
"""Test modules of a minute or more (``--durations``), longest first: started first."""


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by what it needs (see the module docstring); on SQLite, deselect the
    tests that need PostgreSQL (reported as deselected, not skipped)."""
    tests = Path(__file__).parent
    kept: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        folder = item.path.relative_to(tests).parts[0]
        if folder in FOLDER_MARKERS:
            item.add_marker(FOLDER_MARKERS[folder])
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
        if "ray_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
            item.add_marker(pytest.mark.xdist_group("ray"))  # one worker, one cluster
        if not any(item.get_closest_marker(name) for name in _ONE_PASS):
            item.add_marker(pytest.mark.integration)
        needs_postgres = item.get_closest_marker("postgres") is not None
        (deselected if needs_postgres and TEST_DATABASE == "sqlite" else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    # The longest modules first, so that pytest-xdist's workers end together (longest
    # processing time first); a module stays whole, its module-scoped fixtures made once.
    first = {name: rank for rank, name in enumerate(RUN_FIRST)}
    items[:] = sorted(kept, key=lambda item: first.get(item.path.name, len(first)))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail a grouped test that ``--dist loadgroup`` did not group: the Ray tests would
    start a cluster per worker (pytest 9.2 with pytest-xdist 3.8, pytest-dev/pytest-xdist#1386)."""
    if (getattr(item.config.option, "loadgroup", False) and "@" not in item.nodeid
            and item.get_closest_marker("xdist_group")):
        pytest.fail("pytest-xdist did not put this test in its group "
                    "(pytest-dev/pytest-xdist#1386): install the pytest pyproject.toml names")


@pytest.fixture(scope="session", autouse=True)
def _test_databases() -> Iterator[None]:
    """On PostgreSQL: no database of a dead test run is left, nor any of this one at the end."""
    drop_orphan_databases()
    yield
    drop_databases()


@pytest.fixture(autouse=True)
def _dev_null_untouched() -> Iterator[None]:
    """No test, and nothing a test's server or trainer does as root, changes ``/dev/null``
    (once it was found 0644, and every later trainer, initdb and shell of another user
    failed writing to it: the test that does it fails, not those after it)."""
    yield
    mode = os.stat("/dev/null").st_mode
    assert stat.S_ISCHR(mode) and stat.S_IMODE(mode) == 0o666, (
        f"/dev/null is now {stat.filemode(mode)}: this test changed it")


@pytest.fixture(autouse=True)
def _database_per_data_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """On PostgreSQL, a runtime's default database is a fresh one per data dir (not SQLite);
    the databases a test made are dropped after it."""
    if TEST_DATABASE == "sqlite":
        yield
        return

    def resolved(settings: Settings) -> str:
        return settings.database_url or str(database_url_for(settings.data_dir))

    monkeypatch.setattr(Settings, "resolved_database_url", property(resolved))
    before = created_databases()
    yield
    drop_databases(created_databases() - before)


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database of the test backend."""
    if TEST_DATABASE == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    url = new_database_url()
    yield url
    drop_databases({url})


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server for the session (jobs of different tests do not interfere)."""
    server = start_server(tmp_path_factory.mktemp("server") / "data",
                          ALALLO_MAX_CONCURRENT_JOBS="4", ALALLO_CANCEL_GRACE_S="3")
    yield server
    stop_server(server)


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., LiveServer]]:
    """Start servers with their own settings (``ALALLO_*`` variables) for one test."""
    started: list[LiveServer] = []

    def start(**env: str) -> LiveServer:
        server = start_server(tmp_path / f"data-{len(started)}", **env)
        started.append(server)
        return server

    yield start
    for server in started:
        stop_server(server)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Callable[..., Servers]]:
    """Make groups of servers on a data dir of their own (``ALALLO_*`` variables), each
    started, killed and restarted by the test; what is still running is stopped after it."""
    made: list[Servers] = []

    def make(**env: str) -> Servers:
        made.append(Servers(tmp_path / f"data-{len(made)}", env))
        return made[-1]

    yield make
    for group in made:
        group.close()
