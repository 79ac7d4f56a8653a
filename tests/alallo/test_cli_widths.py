"""What users copy stays whole on one line of a narrow terminal: job and file ids in
``jobs list`` and ``files list`` at 80 columns, whatever the names beside them, and the
timestamps of ``jobs events`` at 120."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from alallo.cli import app
from alallo.cli._common import timestamp
import test_cli
from test_cli import FakeServer, JobFactory, listing

pytestmark = pytest.mark.unit
_clean_env = test_cli._clean_env  # fixtures shared with test_cli
server = test_cli.server

JOB_ID = "ft-4a5b6c7d8e9f0a1b2c3d4e5f"
FILE_ID = "file-3bcd4e5f6a7b8c9d0e1f2a3b"
NAMES = [
    "",
    "demo",
    "my first fine-tuning run of the sample, with a longer learning rate schedule and notes",
    "customer-support-assistant-experiment-2026-01-15-lr3e-4-batch32-epochs3",
    "x" * 200,
    "a " * 60,
]
"""Names as users give them: none, short, many words, one long word, a very long word,
many one-letter words."""


def run(columns: int, *args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.stdout.splitlines()) <= columns
    return result.stdout


def whole_on_one_line(value: str, out: str) -> bool:
    return sum(line.count(value) for line in out.splitlines()) == 1


@pytest.mark.parametrize("name", NAMES)
def test_jobs_list_at_80_columns_keeps_every_job_id_whole_whatever_the_names(
    server: FakeServer, make_job: JobFactory, name: str
) -> None:
    long_model = "meta-llama/Llama-3.1-70B-Instruct-with-a-long-local-suffix"
    ids = [JOB_ID, JOB_ID.replace("4a5", "777"), JOB_ID.replace("4a5", "999")]
    server.on("GET", "/v1/fine_tuning/jobs", listing(
        make_job(id=ids[0], name=name, model=long_model),
        make_job(id=ids[1], name=name[::-1], status="re_scheduling",
                 price={"estimate": {"low": 0.000012, "high": 0.000031}, "currency": "USD"}),
        make_job(id=ids[2], name=None, status="succeeded"),
    ))
    out = run(80, "jobs", "list")
    for job_id in ids:
        assert whole_on_one_line(job_id, out), out
    for status in ("running", "re_scheduling", "succeeded", "$0.000012 to $0.000031"):
        assert whole_on_one_line(status, out), out
    assert "…" not in out


@pytest.mark.parametrize("filename", ["a.jsonl", "customer-support-conversations-2026.jsonl",
                                      "x" * 120 + ".jsonl", "my data " * 12 + ".jsonl"])
def test_files_list_at_80_columns_keeps_every_file_id_whole(server: FakeServer,
                                                            filename: str) -> None:
    ids = [FILE_ID, FILE_ID.replace("3bc", "777")]
    server.on("GET", "/v1/files", listing(*({
        "id": file_id, "filename": filename, "bytes": 123456789, "line_count": 500000,
        "format": "conversations", "status": "processed", "created_at": 1_700_000_000,
    } for file_id in ids)))
    out = run(80, "files", "list")
    for file_id in ids:
        assert whole_on_one_line(file_id, out), out
    assert "…" not in out


def test_jobs_events_at_120_columns_keeps_created_at_on_one_line(server: FakeServer) -> None:
    words = ("The trainer started on node gpu-node-7 with 4 GPUs; the run resumes from the "
             "checkpoint of step 40 and goes on to step 100 of 3 epochs, at batch size 32.")
    events = [{"id": f"{JOB_ID}-event-{n}", "object": "fine_tuning.job.event",
               "created_at": 1_700_000_000 + n, "level": "info", "type": "message",
               "message": words if n % 2 else "Job started", "data": None,
               "alallo_type": "JOB_RESCHEDULED_FROM_CHECKPOINT", "seq": n,
               "hash": "3f2a9b0c3f2a9b0c", "step": None} for n in range(4)]
    server.on("GET", f"/v1/fine_tuning/jobs/{JOB_ID}/events", listing(*events))
    out = run(120, "jobs", "events", JOB_ID)
    assert whole_on_one_line("Created at", out), out
    for event in events:
        assert whole_on_one_line(timestamp(event["created_at"]), out), out
    assert "JOB_RESCHEDULED_FROM_CHECKPOINT" in out
