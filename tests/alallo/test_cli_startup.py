"""``alallo`` starts fast: client commands import no server code, and help reads plainly."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from alallo.cli import app

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


def test_help_shows_defaults_and_flags_plainly() -> None:
    serve = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "100"}).stdout
    create = CliRunner().invoke(app, ["jobs", "create", "--help"], env={"COLUMNS": "100"}).stdout
    assert "[default: 127.0.0.1]" in serve and "(127.0.0.1)" not in serve
    assert "<bool>" not in serve + create
    assert "--watch " in create and "-y, --yes " in create
