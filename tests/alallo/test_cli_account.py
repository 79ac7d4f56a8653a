"""``alallo account``: the caller's account from ``GET /v1/account``, against a scripted
fake server (``httpx.MockTransport``, as in test_cli.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from alallo.cli import app
from alallo.cli._account import NO_ROOM
from test_cli import FakeServer, _clean_env, error, server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.unit

ACCOUNT_ID = "acct-3f9a0c1b2d4e5f60"


def answer(**fields: Any) -> dict[str, Any]:
    """An account as the server answers it, with ``fields`` changed."""
    return {"id": ACCOUNT_ID, "object": "account", "name": "Team [bold]A[/bold]",
            "created_at": 1_700_000_000, "balance": 94.25, "billing_limit": 5.0,
            "available": 99.25, "currency": "USD",
            "spend": {"charged": 5.750018, "refunded": 0.25, "gross": 6.000018}, **fields}


def run(*args: str, columns: int = 80) -> Any:
    result = CliRunner().invoke(app, ["account", *args], env={"COLUMNS": str(columns)})
    assert "Traceback" not in result.output
    return result


def rows(output: str) -> dict[str, str]:
    """The figures' lines, by their label (a label is one or two words)."""
    found = {}
    for line in output.splitlines()[1:]:
        label, _, value = line.strip().partition("  ")
        found[label] = value.strip()
    return found


def test_it_shows_the_figures_as_money_reads_everywhere(server: FakeServer) -> None:
    server.on("GET", "/v1/account", answer())
    result = run("--api-key", "sk-alallo-mine")
    assert result.exit_code == 0, result.output
    request = server.requests[-1]
    assert (request.method, request.url.path) == ("GET", "/v1/account")
    assert request.headers["authorization"] == "Bearer sk-alallo-mine"
    lines = result.stdout.splitlines()
    assert lines[0] == f"{ACCOUNT_ID}  Team [bold]A[/bold]", "a name is text, never markup"
    assert max(len(line) for line in lines) <= 80
    shown = rows(result.stdout)
    assert shown["Balance"] == "$94.25"
    assert shown["Billing limit"].startswith("$5.00 (how far below zero")
    assert shown["Available"].startswith("$99.25 (balance plus billing limit")
    assert shown["Spent"] == "$5.75 (charged $6.00, refunded $0.25)"
    assert NO_ROOM not in result.stdout


def test_an_account_with_nothing_available_is_told_what_that_means(
        server: FakeServer) -> None:
    server.on("GET", "/v1/account", answer(
        balance=-5.0012, available=-0.0012,
        spend={"charged": 105.0012, "refunded": 0, "gross": 105.0012}))
    out = run(columns=200).stdout
    shown = rows(out)
    assert shown["Balance"] == "-$5.00" and shown["Available"].startswith("-$0.0012 ")
    assert shown["Spent"] == "$105.00", "no refund, nothing said of one"
    assert NO_ROOM in " ".join(out.split())


def test_json_is_the_servers_answer(server: FakeServer) -> None:
    server.on("GET", "/v1/account", answer())
    assert json.loads(run("--json").stdout) == answer()


def test_a_refused_key_is_one_red_line_and_exit_1(server: FakeServer) -> None:
    server.on("GET", "/v1/account", lambda request: error(401, "unauthorized",
                                                          "invalid API key"))
    result = run()
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error: invalid API key; set ALALLO_API_KEY")
    assert len(result.stderr.splitlines()) == 1
