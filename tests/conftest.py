"""Fixtures shared by the whole suite: a real alallo server in its own process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from alallo.settings import Settings
from support import (TEST_DATABASE, LiveServer, created_databases, database_url_for,
                     drop_databases, drop_orphan_databases, new_database_url, start_server,
                     stop_server)


@pytest.fixture(scope="session", autouse=True)
def _test_databases() -> Iterator[None]:
    """On PostgreSQL: no database of a dead test run is left, nor any of this one at the end."""
    drop_orphan_databases()
    yield
    drop_databases()


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
