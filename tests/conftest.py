"""Fixtures shared by the whole suite: a real alallo server in its own process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support import LiveServer, start_server, stop_server


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
