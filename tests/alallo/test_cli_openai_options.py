"""OpenAI's list and file options from the command line: ``alallo files upload
--expires-after``, ``files list --purpose --oldest-first``, ``jobs list --metadata``, against a
scripted fake server (as in test_cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_cli import FakeServer, _clean_env, listing, run, server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.unit

FILE = {"id": "file-9", "filename": "chat.jsonl", "bytes": 17, "line_count": 1,
        "format": "messages", "status": "processed", "created_at": 1_700_000_000,
        "expires_at": 1_700_003_600}


def test_upload_sends_openais_expires_after_and_shows_when(server: FakeServer,
                                                          tmp_path: Path) -> None:
    data = tmp_path / "chat.jsonl"
    data.write_text('{"messages": []}\n')
    server.on("POST", "/v1/files", FILE)
    result = run("files", "upload", str(data), "--expires-after", "3600")
    assert result.exit_code == 0, result.output
    body = server.requests[-1].content
    assert b'name="expires_after[anchor]"\r\n\r\ncreated_at' in body
    assert b'name="expires_after[seconds]"\r\n\r\n3600' in body
    assert "expires at " in result.stdout


def test_list_asks_for_a_purpose_and_the_oldest_first(server: FakeServer) -> None:
    server.on("GET", "/v1/files", listing(FILE))
    assert run("files", "list", "--purpose", "fine-tune", "--oldest-first").exit_code == 0
    assert dict(server.requests[-1].url.params) == {"purpose": "fine-tune", "order": "asc"}
    assert run("files", "list").exit_code == 0
    assert dict(server.requests[-1].url.params) == {}


def test_jobs_list_filters_on_metadata_as_openai_does(server: FakeServer) -> None:
    server.on("GET", "/v1/fine_tuning/jobs", listing())
    result = run("jobs", "list", "--metadata", "team=search", "--metadata", "run=a=b")
    assert result.exit_code == 0, result.output
    assert dict(server.requests[-1].url.params) == {
        "limit": "20", "metadata[team]": "search", "metadata[run]": "a=b"}
    assert run("jobs", "list", "--metadata", "novalue").exit_code == 1
