"""``alallo`` starts fast: client commands and the clients import no server code, and help
reads plainly."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from alallo.cli import app

pytestmark = pytest.mark.any_backend  # the CLI's import time is the subject

# Not trio: httpcore (under httpx, the client's) imports it whenever it is installed.
SERVER_SIDE = ("gateway", "sqlalchemy", "torch", "starlette", "psycopg", "structlog",
               "alallo.runtime._runtime", "alallo.store._store", "alallo.jobs._lifecycle")

_PROBE = """
import json, sys
from alallo.cli import app
try:
    app(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(name for name in {names} if name in sys.modules)), file=sys.stderr)
"""


def _imported_by(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(names=SERVER_SIDE), *args],
        capture_output=True, text=True, timeout=60,
        env={"PATH": "", "ALALLO_URL": "http://127.0.0.1:9", "COLUMNS": "80",
             "PYTHONPATH": ":".join(sys.path)},
    )
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_help_and_client_commands_import_no_server_code() -> None:
    assert _imported_by("--help") == []
    # Refused at once (no API key), after the command and the client are loaded.
    assert _imported_by("jobs", "list") == []


CLIENT_NEVER = ("starlette", "sqlalchemy", "hypercorn", "torch", "transformers", "pydantic",
                "actors", "gateway", "alallo.runtime", "alallo.store", "alallo.jobs")
"""What the clients stand apart from: the server, its store and web stack, training, the
runtime's actors; pydantic too (the answers' types are plain TypedDicts)."""


@pytest.mark.unit
@pytest.mark.parametrize("statement", [
    "import alallo.client",
    "from alallo import Client, AsyncClient, ApiError, NotFound, Unavailable, FineTuningJob",
    "from alallo.client import Client, AsyncClient, ApiError, ClientError, AlalloClientError",
])
def test_the_clients_import_no_server_code(statement: str) -> None:
    code = f"import sys; {statement}; print(sorted(m for m in {CLIENT_NEVER} if m in sys.modules))"
    env = {"PATH": "", "PYTHONPATH": ":".join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True, env=env)
    assert done.stdout.strip() == "[]"


def test_help_shows_defaults_and_flags_plainly() -> None:
    serve = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "100"}).stdout
    create = CliRunner().invoke(app, ["jobs", "create", "--help"], env={"COLUMNS": "100"}).stdout
    assert "[default: 127.0.0.1]" in serve and "(127.0.0.1)" not in serve
    assert "<bool>" not in serve + create
    assert "--watch " in create and "-y, --yes " in create
