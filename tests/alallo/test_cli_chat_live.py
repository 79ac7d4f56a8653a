"""``alallo serve`` and ``alallo chat`` as a user meets them, against a real server: the
key's path stays on one line at 80 columns, a chat on the 256-token demo model holds ten
turns, and a key or data dir of another server is named in the error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support import LiveServer, start_server, stop_server

pytestmark = pytest.mark.any_backend  # the subject does not depend on the store


def alallo(*args: str, stdin: str = "", cwd: Path | None = None,
           **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "alallo", *args], input=stdin, cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "80", **env})


def test_serve_prints_the_key_files_path_on_one_line(tmp_path: Path) -> None:
    """On 80 columns, with a data dir of a long path, as a user's project may have."""
    data_dir = tmp_path / "projects-of-someone" / "customer-support-assistant-2026" / "data"
    server = start_server(data_dir, COLUMNS="80")
    stop_server(server)  # read once it has exited: all it printed is then in its log
    port = server.url.rsplit(":", 1)[1]
    printed = (data_dir.parent / f"server-{port}.log").read_text()
    key_file = str((data_dir / "api-key").resolve())
    (line,) = [line for line in printed.splitlines() if server.api_key in line]
    assert len(line) > 80 and key_file in line, printed


def test_chat_holds_ten_turns_on_a_256_token_model(live_server: LiveServer) -> None:
    turns = "".join(f"Turn {n}: tell me more.\n" for n in range(10))
    talk = alallo("chat", "alallo/tiny-gpt2", "--max-tokens", "2", "--system", "Be brief.",
                  stdin=turns + "/exit\n", ALALLO_URL=live_server.url,
                  ALALLO_API_KEY=live_server.api_key, FORCE_COLOR="1", TERM="xterm")
    # A turn that failed would be a red line on stderr and exit status 1.
    assert (talk.returncode, talk.stderr) == (0, ""), talk.stderr
    assert "\x1b[2m(dropped the oldest turn" in talk.stdout
    assert "model's context of 256 tokens)" in talk.stdout


def test_another_servers_key_or_data_dir_is_named(live_server: LiveServer,
                                                 tmp_path: Path) -> None:
    wrong = alallo("jobs", "list", ALALLO_URL=live_server.url, ALALLO_API_KEY="sk-other")
    assert wrong.returncode == 1
    assert wrong.stderr.startswith("Error: invalid API key; set ALALLO_API_KEY")
    assert "--data-dir" in wrong.stderr
    none_here = alallo("jobs", "list", cwd=tmp_path, ALALLO_URL=live_server.url)
    assert none_here.returncode == 1
    assert "a server started with --data-dir DIR keeps it in DIR/api-key" in none_here.stderr
