"""A command that cannot reach the server, or whose key it refuses, says in its one line
what to set: ``ALALLO_URL``, ``ALALLO_API_KEY``, or the server's ``--data-dir``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

import alallo.cli._common
from alallo.cli import app
from alallo.client import Client
import test_cli
from test_cli import FakeServer, error

pytestmark = pytest.mark.unit
_clean_env = test_cli._clean_env  # fixtures shared with test_cli
server = test_cli.server


def run(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "80"})
    assert result.exit_code == 1 and result.stdout == ""
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1, "one line, however long"
    return result.stderr


def answering(monkeypatch: pytest.MonkeyPatch,
              answer: Callable[[httpx.Request], httpx.Response]) -> None:
    monkeypatch.setattr(alallo.cli._common, "make_client", lambda url, key: Client(
        url or "http://127.0.0.1:8000", api_key="k", transport=httpx.MockTransport(answer)))


def test_no_server_at_the_url_names_alallo_url(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("Connection refused", request=request)

    answering(monkeypatch, refuse)
    line = run("jobs", "list", "--url", "http://127.0.0.1:9")
    assert line.startswith("Error: cannot reach alallo at http://127.0.0.1:9: is the server "
                           "running? start it with `alallo serve`")
    assert "set ALALLO_URL (or --url) to the address `alallo serve` printed" in line


def test_another_program_at_the_url_names_alallo_url(monkeypatch: pytest.MonkeyPatch) -> None:
    answering(monkeypatch, lambda request: httpx.Response(404, text="<h1>Not Found</h1>"))
    line = run("files", "list", "--url", "http://127.0.0.1:3000")
    assert line.startswith("Error: <h1>Not Found</h1> (GET /v1/files)")
    assert "is http://127.0.0.1:3000 an alallo server? set ALALLO_URL" in line


def test_a_key_the_server_does_not_know_names_alallo_api_key_and_the_data_dir(
        server: FakeServer) -> None:
    server.on("GET", "/v1/fine_tuning/jobs",
              lambda request: error(401, "unauthorized", "invalid API key"))
    line = run("jobs", "list")
    assert line.startswith("Error: invalid API key; set ALALLO_API_KEY (or --api-key) to this "
                           "server's key")
    assert "api-key in its --data-dir (default ./.alallo)" in line


def test_no_key_in_this_data_dir_names_the_servers_data_dir(tmp_path: Path) -> None:
    line = run("models")
    assert line.startswith("Error: no API key: pass --api-key, set ALALLO_API_KEY")
    assert f"writes one to {tmp_path / 'data' / 'api-key'}" in line
    assert "a server started with --data-dir DIR keeps it in DIR/api-key" in line


def test_other_refusals_get_no_hint(server: FakeServer) -> None:
    line = run("jobs", "get", "ft-1")
    assert line == "Error: no such thing: /v1/fine_tuning/jobs/ft-1\n"
